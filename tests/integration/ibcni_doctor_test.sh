#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `ibcni doctor` on a host without RDMA (our dev and CI machines): valid JSON with no device and a
# "no RDMA devices" problem, exit 1; the text form; usage errors exit 2. `--config` judges a network
# config: a host netdev given as "device" would work (exit 0, even with node problems), an IPoIB
# child of a non-IPoIB parent and a missing IPAM plugin would not (exit 1). Needs root (a veth).
#   ibcni_doctor_test.sh IBCNI
set -uo pipefail
bin=$1
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../support/check.sh"
if [[ -e /dev/infiniband ]] || { [[ -d /sys/class/infiniband ]] && [[ -n $(ls -A /sys/class/infiniband) ]]; }; then
  echo "SKIP: this host has RDMA devices; the test expects none"
  exit 77
fi

out=$("$bin" doctor --json </dev/null)
rc=$?
echo "$out"
check "doctor --json exits 1 (problems found)" test "$rc" -eq 1
check "doctor --json prints valid JSON" jq -e 'type == "object"' <<<"$out" >/dev/null
check "no RDMA device is listed" jq -e '.devices == []' <<<"$out" >/dev/null
check "a \"no RDMA devices\" problem with a fix" \
  jq -e '[.problems[] | select(.what | test("no RDMA devices")) | select(.fix != "")] | length == 1' <<<"$out" >/dev/null
check "the report has every section" \
  jq -e 'has("rdmaNetnsMode") and has("libibverbs") and has("uverbsDevices") and has("ipoibLinks") and has("sriovPfs")' \
  <<<"$out" >/dev/null

text=$("$bin" doctor </dev/null)
rc=$?
check "doctor (text) exits 1" test "$rc" -eq 1
check "the text report lists the problem" grep -q "no RDMA devices" <<<"$text"
check "the text report says there is no device" grep -q "RDMA devices: none" <<<"$text"

"$bin" doctor --bogus >/dev/null 2>&1
check "an unknown option is a usage error (2)" test $? -eq 2
"$bin" doctor --json --json >/dev/null 2>&1
check "a repeated option is a usage error (2)" test $? -eq 2
msg=$("$bin" doctor extra 2>&1 >/dev/null)
check "the usage goes to stderr" grep -q "usage: ibcni doctor" <<<"$msg"

# --config: a veth end named as "device" would work here; the exit status is the config's verdict.
tmp=$(mktemp -d)
veth=ibcdoc$$
trap 'ip link del "$veth" 2>/dev/null; rm -rf "$tmp"' EXIT
ip link add "$veth" type veth peer name "${veth}p"
cat >"$tmp/dev.json" <<EOF
{"cniVersion": "1.1.0", "name": "doc", "type": "ibcni", "device": "$veth", "stateDir": "$tmp/state"}
EOF
out=$("$bin" doctor --json --config "$tmp/dev.json")
rc=$?
check "--config: a present device would work (exit 0 although the node has no RDMA)" test "$rc" -eq 0
check "--config: JSON verdict works=true for device $veth" \
  jq -e --arg d "device $veth" '.config.works == true and .config.candidates[0].device == $d' <<<"$out" >/dev/null
check "--config: the node report is still there" jq -e '.devices == [] and (.problems | length) > 0' <<<"$out" >/dev/null

# The same as a NetworkAttachmentDefinition, with an IPoIB parent that is a veth and an IPAM plugin
# that is not installed.
jq -n --arg veth "$veth" --arg state "$tmp/state" '{apiVersion: "k8s.cni.cncf.io/v1",
  kind: "NetworkAttachmentDefinition", metadata: {name: "doc"},
  spec: {config: ({cniVersion: "1.0.0", name: "doc", type: "ibcni", mode: "ipoib", master: $veth,
                   stateDir: $state, ipam: {type: "no-such-ipam"}} | tojson)}}' >"$tmp/nad.json"
text=$("$bin" doctor --config "$tmp/nad.json" --cni-path "$tmp")
rc=$?
echo "$text" | sed -n '/^Network config/,$p'
check "--config: a veth parent for ipoib would not work (exit 1)" test "$rc" -eq 1
check "--config: says why (not an IPoIB interface)" grep -q "refused: master = \"$veth\".*not an IPoIB interface" <<<"$text"
check "--config: names the missing IPAM plugin" grep -q 'ipam.type = "no-such-ipam" is not installed in CNI_PATH' <<<"$text"
"$bin" doctor --config "$tmp/missing.json" >/dev/null 2>&1
check "--config of a missing file is a usage error (2)" test $? -eq 2
"$bin" doctor --cni-path /opt/cni/bin >/dev/null 2>&1
check "--cni-path without --config is a usage error (2)" test $? -eq 2

# Without arguments it is still the CNI plugin: VERSION answers on stdout.
version=$(CNI_COMMAND=VERSION "$bin" </dev/null)
check "without arguments ibcni is the CNI plugin" jq -e '.supportedVersions | length > 0' <<<"$version" >/dev/null

finish_checks
