#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/check-layers.sh fails, naming the include, on each way of breaking the layer order: an
# include that goes up, one between siblings, a file in no layer; and on each fault of the table:
# wings out of order, a unit outside its wing's folder, a row naming nothing, descriptions that
# differ from the layers; and passes a tree whose includes all go down. Last, the real tree with one
# upward include added (netlink -> commands) fails, and with lib/ including ipam/, with a C
# library included outside the folders the libraries block gives it, with a library linking one
# of a wing above its own (ipam/ -> plugin/, lib/ -> ipam/), and with the agent including an IPAM
# header past the IPAM's face.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
check=$repo/scripts/check-layers.sh
work=$(mktemp -d /tmp/ibcni-layers.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
passes=0
pass() { echo "PASS $*"; passes=$((passes + 1)); }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# A small tree: commands above modes; netlink and rdma siblings; ipam's store; os at the bottom.
mini=$work/mini
mkdir -p "$mini"/plugin/{commands,modes,netlink,rdma} "$mini"/lib/os "$mini"/include/ibcni/os "$mini"/ipam/store
table() {
  cat >"$mini/plugin/README.md" <<MD
\`\`\`layers
${1:-[plugin]}
commands: plugin/commands/
modes: plugin/modes/
adapters: plugin/netlink/ plugin/rdma/
${2:-[ipam]}
ipam-store: ipam/store/
[interfaces]
[lib]
os: include/ibcni/os/+lib/os/
\`\`\`

| Layer | What it is |
|---|---|
| commands ... adapters | the plugin |
| ipam-store | the store |
${3:-| os | the bottom |}
MD
}
table
echo '#pragma once' >"$mini/ipam/store/store.h"
echo '#pragma once' >"$mini/include/ibcni/os/fd.h"
printf '#include "ibcni/os/fd.h"\n' >"$mini/lib/os/fd.cpp"
printf '#pragma once\n#include "ibcni/os/fd.h"\n' >"$mini/plugin/netlink/nl.h"
printf '#pragma once\n' >"$mini/plugin/rdma/rdma.h"
printf '#pragma once\n#include "plugin/netlink/nl.h"\n#include <vector>\n' >"$mini/plugin/modes/mode.h"
printf '#include "plugin/modes/mode.h"\n#include "mode.h"\n' >"$mini/plugin/modes/mode.cpp"
printf '#include "plugin/modes/mode.h"\n#include "plugin/netlink/nl.h"\n' >"$mini/plugin/commands/add.cpp"

run() { out=$("$check" "$1" 2>&1); rc=$?; }
# expect_report PATTERN WHAT: the real tree fails, with a line matching PATTERN.
expect_report() {
  run "$real"
  if [[ $rc -eq 1 ]] && grep -q "$1" <<<"$out"; then pass "$2"; else fail "$2: not reported (rc $rc): $out"; fi
}
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
rm "$mini/ipam/orphan.cpp"

# The table itself: wings out of order, a unit outside its wing's folder, a layer left undescribed.
table "[ipam]" "[plugin]"
run "$mini"
[[ $rc -eq 1 ]] && grep -q 'plugin/commands/ (layer commands) is not in the ipam wing' <<<"$out" &&
  grep -q 'the wings are \[ipam plugin interfaces lib\]' <<<"$out" && pass "wings out of order fail" ||
  fail "wings out of order were not reported (rc $rc): $out"
table "[plugin]" "[ipam]" "| yaml | not a layer |"
run "$mini"
[[ $rc -eq 1 ]] && grep -q 'descriptions: "yaml" where the layers block has os' <<<"$out" &&
  pass "a description table that differs from the layers fails" ||
  fail "a wrong description table was not reported (rc $rc): $out"
table
rmdir "$mini/plugin/rdma" 2>/dev/null || rm -r "$mini/plugin/rdma"
run "$mini"
[[ $rc -eq 1 ]] && grep -q 'plugin/rdma/ (layer adapters) names nothing that exists' <<<"$out" &&
  pass "a row naming a folder that is gone fails" || fail "a stale row was not reported (rc $rc): $out"
mkdir -p "$mini/plugin/rdma" && printf '#pragma once\n' >"$mini/plugin/rdma/rdma.h"
run "$mini"
[[ $rc -eq 0 ]] || fail "the mini tree did not pass again: $out"

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

# The real tree, with lib/ including the IPAM: the folder direction, named as such.
printf '#include "ipam/store/file_store.h"\n' >>"$real/lib/os/text.cpp"
run "$real"
if [[ $rc -eq 1 ]] && grep -q '^lib/os/text.cpp:[0-9]*: includes "ipam/store/file_store.h" .*the ipam wing is above the lib wing' <<<"$out"; then
  pass "the real tree with lib/ including ipam/ fails, naming the wings"
else
  fail "lib/ including ipam/ was not reported (rc $rc): $out"
fi

# The real tree, with libcurl included by a verb: each library only where the libraries block says.
cp "$repo/plugin/netlink/"*.cpp "$real/plugin/netlink/"  # undo the upward include above
sed -i '$d' "$real/lib/os/text.cpp"  # and lib/ -> ipam/
verb=$real/plugin/commands/add.cpp
printf '#include <curl/curl.h>\n' >>"$verb"
run "$real"
if [[ $rc -eq 1 ]] && grep -q "^plugin/commands/add.cpp:$(wc -l <"$verb"): includes <curl/curl.h>, which only lib/http/ may include" <<<"$out"; then
  pass "the real tree with a C library included outside its folder fails"
else
  fail "a C library included outside its folder was not reported (rc $rc): $out"
fi

# The real tree, with the IPAM linking a library of the plugin (one line), then lib/ linking one
# (a call over two lines): each link named with its file, line and wings, includes or not.
sed -i '$d' "$verb"  # undo the C library include
printf 'target_link_libraries(ibcni_ipam PRIVATE ibcni_plugin)\n' >>"$real/ipam/CMakeLists.txt"
link_line=$(wc -l <"$real/ipam/CMakeLists.txt")
expect_report "^ipam/CMakeLists.txt:$link_line: ibcni_ipam (the ipam wing) links ibcni_plugin, a library of the plugin wing" \
  "the real tree with ipam/ linking a plugin/ library fails"
sed -i '$d' "$real/ipam/CMakeLists.txt"
printf 'target_link_libraries(ibcni_log\n  PUBLIC ibcni_ipam)\n' >>"$real/lib/CMakeLists.txt"
link_line=$(($(wc -l <"$real/lib/CMakeLists.txt") - 1))
expect_report "^lib/CMakeLists.txt:$link_line: ibcni_log (the lib wing) links ibcni_ipam, a library of the ipam wing" \
  "the real tree with lib/ linking an ipam/ library over two lines fails"

# The real tree, with the node agent reading the IPAM's store itself: past the IPAM's face
# (plugin/README.md, faces), although the store is below the agent.
sed -i '$d' "$real/lib/CMakeLists.txt"
sed -i '$d' "$real/lib/CMakeLists.txt"
printf '#include "ipam/store/file_store.h"\n' >>"$real/plugin/agent/node_counts.cpp"
face_line=$(wc -l <"$real/plugin/agent/node_counts.cpp")
expect_report "^plugin/agent/node_counts.cpp:$face_line: includes \"ipam/store/file_store.h\" (layer ipam-store) past the face of the ipam wing" \
  "the real tree with the agent including the IPAM's store fails, naming the face"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
