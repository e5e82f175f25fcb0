#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/check-layers.sh fails, naming the include, on each way of breaking the layer order: an
# include that goes up, one between siblings, a file in no layer; and passes a tree whose includes
# all go down. Last, the real tree with one upward include added (netlink -> commands) fails.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
check=$repo/scripts/check-layers.sh
work=$(mktemp -d /tmp/ibcni-layers.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# A small tree: commands above modes; netlink and rdma siblings; os at the bottom.
mini=$work/mini
mkdir -p "$mini"/plugin/{commands,modes,netlink,rdma} "$mini"/lib/os "$mini"/include/ibcni/os "$mini"/ipam
cat >"$mini/plugin/README.md" <<'MD'
```layers
commands: plugin/commands/
modes: plugin/modes/
adapters: plugin/netlink/ plugin/rdma/
os: include/ibcni/os/+lib/os/
```
MD
echo '#pragma once' >"$mini/include/ibcni/os/fd.h"
printf '#include "ibcni/os/fd.h"\n' >"$mini/lib/os/fd.cpp"
printf '#pragma once\n#include "ibcni/os/fd.h"\n' >"$mini/plugin/netlink/nl.h"
printf '#pragma once\n' >"$mini/plugin/rdma/rdma.h"
printf '#pragma once\n#include "plugin/netlink/nl.h"\n#include <vector>\n' >"$mini/plugin/modes/mode.h"
printf '#include "plugin/modes/mode.h"\n#include "mode.h"\n' >"$mini/plugin/modes/mode.cpp"
printf '#include "plugin/modes/mode.h"\n#include "plugin/netlink/nl.h"\n' >"$mini/plugin/commands/add.cpp"

run() { out=$("$check" "$1" 2>&1); rc=$?; }
run "$mini"
[[ $rc -eq 0 ]] && pass "a tree whose includes all go down passes" || fail "a clean tree failed: $out"

printf '#include "plugin/commands/missing.h"\n#include "plugin/modes/mode.h"\n' >>"$mini/plugin/netlink/nl.h"
run "$mini"
if [[ $rc -eq 1 ]] && grep -q '^plugin/netlink/nl.h:4: includes "plugin/modes/mode.h" (plugin/modes/, layer modes) from layer adapters' <<<"$out"; then
  pass "an upward include fails, named with its file and line"
else
  fail "an upward include was not reported (rc $rc): $out"
fi
printf '#pragma once\n#include "ibcni/os/fd.h"\n' >"$mini/plugin/netlink/nl.h"

printf '#pragma once\n#include "plugin/netlink/nl.h"\n' >"$mini/plugin/rdma/rdma.h"
run "$mini"
[[ $rc -eq 1 ]] && grep -q 'plugin/rdma/rdma.h:2: .*sibling' <<<"$out" && pass "a sibling include fails" ||
  fail "a sibling include was not reported (rc $rc): $out"
printf '#pragma once\n' >"$mini/plugin/rdma/rdma.h"

printf '#include "ibcni/os/fd.h"\n' >"$mini/ipam/orphan.cpp"
run "$mini"
[[ $rc -eq 1 ]] && grep -q '^ipam/orphan.cpp: in no layer' <<<"$out" && pass "a file in no layer fails" ||
  fail "an unplaced file was not reported (rc $rc): $out"

# The real tree, with one include that goes up from the netlink adapter to the verbs.
real=$work/real
mkdir -p "$real"
cp -r "$repo/include" "$repo/lib" "$repo/ipam" "$repo/plugin" "$real/"
victim=$(find "$real/plugin/netlink" -name '*.cpp' | sort | head -1)
printf '#include "plugin/commands/common.h"\n' >>"$victim"
lines=$(wc -l <"$victim")
run "$real"
rel=${victim#"$real"/}
if [[ $rc -eq 1 ]] && grep -q "^$rel:$lines: includes \"plugin/commands/common.h\" (plugin/commands/, layer commands)" <<<"$out"; then
  pass "the real tree with an upward include added fails ($rel:$lines)"
else
  fail "the real tree's added upward include was not reported (rc $rc): $out"
fi

echo "$((5 - fails)) passed, $fails failed"
[[ $fails -eq 0 ]]
