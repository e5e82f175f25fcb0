#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# grafana_dashboard_test.sh [DASHBOARD [METRICS_DOC]]: the Grafana dashboard deploy/grafana/ibcni-dashboard.json
# (default) against what the agent exports:
#   - it is JSON (jq) with at least one PromQL "expr";
#   - every expr, with Grafana's variables replaced ($__rate_interval, $__interval, $__range -> 5m;
#     $node, $network -> .*), is valid PromQL: they are written as recording rules to a temporary
#     file and `promtool check rules` reads it;
#   - every ibcni_* metric name the exprs and the template variables' queries use (a histogram's
#     _bucket, _sum and _count taken as the histogram) is one docs/metrics.md lists in its table of
#     metrics (a table row: a line that starts with "|").
# Needs jq and promtool (Debian: jq, prometheus); 77 = skip without them.
set -uo pipefail
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
repo=$(cd "$here/../.." && pwd -P)
source "$repo/tests/support/check.sh"
dashboard=${1:-$repo/deploy/grafana/ibcni-dashboard.json}
metrics_doc=${2:-$repo/docs/metrics.md}

for tool in jq promtool; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not in PATH (Debian: jq, prometheus)"; exit 77; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-dashboard-test.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

check "the dashboard is one JSON object" jq -es 'length == 1 and (.[0] | type == "object")' "$dashboard" >/dev/null || finish_checks
jq -r '.. | objects | select(has("expr")) | .expr' "$dashboard" >"$work/exprs"
n=$(jq '[.. | objects | select(has("expr"))] | length' "$dashboard")
check "the dashboard has PromQL exprs ($n)" test "$n" -gt 0 || finish_checks

# --- every expr is valid PromQL ---------------------------------------------------------------
# Grafana's variables replaced by what a query with "All" selected gets (jq, so that an expr may
# span lines); the rules file is JSON, which is YAML too.
jq '{groups: [{name: "ibcni-dashboard", rules: ([.. | objects | select(has("expr")) | .expr
  | gsub("\\$\\{?__(rate_interval|interval|range)\\}?"; "5m")
  | gsub("\\$\\{?(node|network)(:[a-z]+)?\\}?"; ".*")]
  | to_entries | map({record: "ibcni_dashboard:expr_\(.key)", expr: .value}))}]}' \
  "$dashboard" >"$work/rules.yaml"
check "no Grafana variable left after substitution (only \$__rate_interval, \$__interval, \$__range, \$node, \$network)" \
  bash -c '! jq -r ".groups[0].rules[].expr" "$1" | grep "\\$" >&2' _ "$work/rules.yaml"
check "promtool check rules accepts every expr as a recording rule" \
  promtool check rules "$work/rules.yaml" >"$work/promtool.out" 2>&1 ||
  sed -e 's/^/    /' "$work/promtool.out" >&2

# --- every metric name is one docs/metrics.md lists -------------------------------------------
# Its table rows: the lines that start with "|".
grep -E '^\|' "$metrics_doc" | grep -oE '\bibcni_[a-z0-9_]+' | sort -u >"$work/listed"
check "docs/metrics.md has a table naming ibcni_* metrics" test -s "$work/listed" || finish_checks
{
  cat "$work/exprs"
  jq -r '.templating.list[]? | .query | if type == "object" then .query // empty else . end' "$dashboard"
} | grep -oE '\bibcni_[a-zA-Z0-9_]+' | sort -u >"$work/used"
unknown=()
while IFS= read -r name; do
  base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$name")
  grep -Fxq -e "$name" -e "$base" "$work/listed" || unknown+=("$name")
done <"$work/used"
check "the $(wc -l <"$work/used") ibcni_* metrics of the dashboard are listed in docs/metrics.md's table" \
  test "${#unknown[@]}" -eq 0 || echo "    unknown: ${unknown[*]}" >&2

finish_checks
