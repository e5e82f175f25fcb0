#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `ibcni-ipam gc CONFIG_FILE` frees the addresses of pods whose network namespace is gone and keeps
# those of live pods, for a plain network config and for a conflist.
#   ibcni_ipam_gc_test.sh IBCNI_IPAM
set -uo pipefail
bin=$1
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (creates network namespaces)"
  exit 77
fi
work=$(mktemp -d /tmp/ibcni-ipam-gc.XXXXXX)
cleanup() {
  for ns in "$work"/ns-*; do
    [[ -e $ns ]] && umount "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../support/check.sh"

ipam() {  # ipam VERB CID NETNS CONFIG
  CNI_COMMAND=$1 CNI_CONTAINERID=$2 CNI_NETNS=$3 CNI_IFNAME=eth0 CNI_PATH=/nonexistent "$bin" <"$4"
}
newns() { touch "$work/ns-$1" && unshare --net="$work/ns-$1" true; }

for form in conf conflist; do
  data=$work/data-$form
  plugin=$(printf '{"type":"macvlan","master":"eth0","ipam":{"type":"ibcni-ipam","ranges":[[{"subnet":"10.90.0.0/24"}]],"dataDir":"%s"}}' "$data")
  if [[ $form == conf ]]; then
    jq -n --argjson p "$plugin" '$p + {cniVersion: "1.0.0", name: "gcnet"}' >"$work/net.$form"
  else
    jq -n --argjson p "$plugin" '{cniVersion: "1.0.0", name: "gcnet", plugins: [$p]}' >"$work/net.$form"
  fi
  jq -n --argjson p "$plugin" '$p + {cniVersion: "1.0.0", name: "gcnet"}' >"$work/plugin.json"
  newns "live-$form" && newns "dead-$form"
  check "[$form] ADD for the live pod" ipam ADD "live-$form" "$work/ns-live-$form" "$work/plugin.json" >"$work/out"
  check "[$form] ADD for the pod about to die" ipam ADD "dead-$form" "$work/ns-dead-$form" "$work/plugin.json" >"$work/out"
  umount "$work/ns-dead-$form" && rm -f "$work/ns-dead-$form"

  out=$("$bin" gc "$work/net.$form") || true
  echo "  gc printed: $out"
  check "[$form] gc releases the dead pod's address" \
    jq -e '[.released[].containerID] == ["dead-'"$form"'"] and (.released[0].addresses | length == 1)' <<<"$out" >/dev/null
  check "[$form] the live pod keeps its address" test -e "$data/gcnet/attachments/live-$form:eth0"
  check "[$form] the dead pod's allocation is gone" test ! -e "$data/gcnet/attachments/dead-$form:eth0"
  out2=$("$bin" gc "$work/net.$form")
  check "[$form] a second gc releases nothing" jq -e '.released == []' <<<"$out2" >/dev/null
  check "[$form] DEL of the live pod" ipam DEL "live-$form" "$work/ns-live-$form" "$work/plugin.json"
done
check "gc without a config file is a usage error" bash -c "! '$bin' gc >/dev/null 2>&1"
echo '{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"macvlan"}]}' >"$work/other.conflist"
if msg=$("$bin" gc "$work/other.conflist" 2>&1); then
  check "gc of a file without ibcni-ipam fails" false
else
  check "gc of a file without ibcni-ipam fails, saying why" grep -q 'no plugin with "ipam"' <<<"$msg"
fi
finish_checks
