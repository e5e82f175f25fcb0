#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Holds the code to the layer order written in plugin/README.md ("Layers"): a file may include
# files of its own unit and of the layers below it, never a layer above, and never a sibling unit
# of its own layer. Every source file under include/, lib/, ipam/ and plugin/ must belong to a unit.
#   scripts/check-layers.sh [ROOT]     exit 0 when every include goes down, 1 (listing each
#                                      offending include) otherwise
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# The table: the fenced ```layers block of plugin/README.md, top layer first; each line is
# "<layer>: <unit> [<unit> ...]". A unit is a path prefix (a folder "plugin/modes/", or the files
# "plugin/dispatch." of one name), or several joined by "+" (an interface folder of include/ with
# the folder that implements it).
table=$(awk '/^```layers$/ {on = 1; next} on && /^```$/ {exit} on && NF {print}' plugin/README.md)
if [[ -z $table ]]; then
  echo "check-layers: no \`\`\`layers block in plugin/README.md" >&2
  exit 2
fi

# Every quoted include of every source file, as "file<TAB>line<TAB>included path", then resolved
# as the compiler would (next to the file, then include/ and the repository root: every include
# names its folder, "ibcni/os/unique_fd.h", "lib/log/log.h", "ipam/cluster/cluster_pool.h").
find include lib ipam plugin -type f \( -name '*.h' -o -name '*.cpp' \) -print0 | sort -z |
  xargs -0 awk '
    FNR == 1 { print FILENAME "\t0\t" }  # every file, so that files without includes are placed too
    match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]+"/) {
      inc = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", inc); sub(/"$/, "", inc)
      print FILENAME "\t" FNR "\t" inc
    }' |
  while IFS=$'\t' read -r file line inc; do
    target=
    if [[ -n $inc ]]; then
      for dir in "$(dirname "$file")" include .; do
        if [[ -f $dir/$inc ]]; then
          target=$(realpath --relative-to=. "$dir/$inc")
          break
        fi
      done
    fi
    printf '%s\t%s\t%s\t%s\n' "$file" "$line" "$inc" "$target"
  done |
  awk -v table="$table" -F'\t' '
    BEGIN {
      n = split(table, rows, "\n")
      for (r = 1; r <= n; r++) {
        row = rows[r]; layer = row; sub(/:.*/, "", layer); sub(/^[^:]*:/, "", row)
        m = split(row, units, " ")
        for (u = 1; u <= m; u++) {
          if (units[u] == "") continue
          k = split(units[u], prefixes, "+")
          for (p = 1; p <= k; p++) { unitName[prefixes[p]] = units[u]; rank[prefixes[p]] = r; layerOf[prefixes[p]] = layer }
        }
      }
    }
    # The unit of a path: the one with the longest prefix of it.
    function unitOf(path,   u, best) {
      best = ""
      for (u in rank) if (index(path, u) == 1 && length(u) > length(best)) best = u
      return best
    }
    {
      file = $1; line = $2; inc = $3; target = $4
      fu = unitOf(file)
      if (fu == "") {
        if (!(file in unplaced)) { unplaced[file] = 1; print file ": in no layer: add it to the layers block of plugin/README.md"; bad++ }
        next
      }
      if (target == "") next  # a system or generated header
      tu = unitOf(target)
      if (tu == "" || unitName[tu] == unitName[fu]) next  # an unplaced target is reported on its own
      if (rank[tu] < rank[fu]) {
        printf "%s:%s: includes \"%s\" (%s, layer %s) from layer %s, which is below it\n", file, line, inc, unitName[tu], layerOf[tu], layerOf[fu]
        bad++
      } else if (rank[tu] == rank[fu]) {
        printf "%s:%s: includes \"%s\" (%s) from its sibling %s in layer %s: siblings do not include each other\n", file, line, inc, unitName[tu], unitName[fu], layerOf[fu]
        bad++
      }
      checked++
    }
    END {
      if (bad) { printf "check-layers: %d include(s) break the layer order (plugin/README.md, Layers)\n", bad; exit 1 }
      printf "check-layers: %d includes, every one goes down the layers\n", checked
    }'
