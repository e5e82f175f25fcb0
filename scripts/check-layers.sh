#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Holds the code to the layer order written in plugin/README.md ("Layers"): a file may include
# files of its own unit and of the layers below it, never a layer above, and never a sibling unit
# of its own layer. Every source file under include/, lib/, ipam/ and plugin/ must belong to a unit.
# The table itself is checked too: its layers are grouped in the wings, top first, [plugin]
# (plugin/), [ipam] (ipam/), [interfaces] (include/ibcni/) and [lib] (lib/, with its headers in
# include/ibcni/), each unit lies in its wing's folder, and every unit names a folder or files that
# exist; so lib/ includes nothing of ipam/ or plugin/, and ipam/ nothing of plugin/, whatever the
# rows say. The layer descriptions below the block name every layer, in the block's order. A wing
# that the ```faces block names ("ipam: ipam-wiring ipam ...") is included from the other wings only
# through those layers of it. And each library is included only in the folders the ```libraries
# block gives it.
#   scripts/check-layers.sh [ROOT]     exit 0 when the table holds and every include goes down,
#                                      1 (listing each offence) otherwise
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# The table: the fenced ```layers block of plugin/README.md, top layer first: "[wing]" lines, and
# under each "<layer>: <unit> [<unit> ...]" lines. A unit is a path prefix (a folder
# "plugin/modes/", or the files "plugin/dispatch." of one name), or several joined by "+" (an
# interface folder of include/ with the folder that implements it).
table=$(awk '/^```layers$/ {on = 1; next} on && /^```$/ {exit} on && NF {print}' plugin/README.md)
if [[ -z $table ]]; then
  echo "check-layers: no \`\`\`layers block in plugin/README.md" >&2
  exit 2
fi
# The faces: "<wing>: <layer> ..." lines; from another wing, a faced wing is included only through
# the layers named.
faces=$(awk '/^```faces$/ {on = 1; next} on && /^```$/ {exit} on && NF {print}' plugin/README.md)
# The first column of the descriptions' table (| Layer | What it is |) below the block.
described=$(awk '/^```layers$/ {on = 1} on && /^\| *Layer *\|/ {t = 1; next} t && /^\|---/ {next}
  t && /^\|/ {split($0, c, "|"); print c[2]; next} t {exit}' plugin/README.md)

# The table's own faults: wings out of order, a unit outside its wing's folder or naming nothing,
# a layer the descriptions leave out or name out of order.
table_faults=$(
  wing=
  order="plugin ipam interfaces lib"
  seen=
  layers=()
  while read -r row; do
    if [[ $row =~ ^\[([a-z]+)\]$ ]]; then
      wing=${BASH_REMATCH[1]}
      seen="$seen $wing"
      continue
    fi
    [[ -n $wing ]] || { echo "plugin/README.md layers: \"$row\" comes before the first [wing] line"; continue; }
    layer=${row%%:*}
    layers+=("$layer")
    for unit in ${row#*:}; do
      IFS=+ read -ra prefixes <<<"$unit"
      for prefix in "${prefixes[@]}"; do
        case $wing/$prefix in
          plugin/plugin/* | ipam/ipam/* | interfaces/include/ibcni/* | lib/lib/* | lib/include/ibcni/*) ;;
          *) echo "plugin/README.md layers: $prefix (layer $layer) is not in the $wing wing's folder" ;;
        esac
        compgen -G "$prefix*" >/dev/null || echo "plugin/README.md layers: $prefix (layer $layer) names nothing that exists"
      done
    done
  done <<<"$table"
  [[ ${seen# } == "$order" ]] ||
    echo "plugin/README.md layers: the wings are [${seen# }], not [$order] (top first, each once)"
  # Each description row names one layer, several ("a, b, c") or a run of them ("a ... b").
  i=0
  while IFS= read -r cell; do
    cell=$(sed 's/^ *//; s/ *$//' <<<"$cell")
    if [[ $cell == *" ... "* ]]; then
      first=${cell%% ... *} last=${cell##* ... }
      [[ ${layers[i]:-} == "$first" ]] || { echo "plugin/README.md descriptions: \"$cell\" should start at ${layers[i]:-the end}"; break; }
      while ((i < ${#layers[@]})) && [[ ${layers[i]} != "$last" ]]; do i=$((i + 1)); done
      ((i < ${#layers[@]})) || { echo "plugin/README.md descriptions: \"$cell\" ends at no layer"; break; }
      i=$((i + 1))
    else
      IFS=, read -ra names <<<"$cell"
      for name in "${names[@]}"; do
        name=$(sed 's/^ *//; s/ *$//' <<<"$name")
        [[ ${layers[i]:-} == "$name" ]] || { echo "plugin/README.md descriptions: \"$name\" where the layers block has ${layers[i]:-nothing more}"; break 2; }
        i=$((i + 1))
      done
    fi
  done <<<"$described"
  ((i == ${#layers[@]})) || echo "plugin/README.md descriptions: layer ${layers[i]} and those below it are not described"
)
if [[ -n $table_faults ]]; then
  echo "$table_faults"
  echo "check-layers: the layers block of plugin/README.md does not hold (above)"
  exit 1
fi

# The libraries block: each library's include prefix ("nlohmann/", "yaml.h") and the folders
# whose files may include it.
libraries=$(awk '/^```libraries$/ {on = 1; next} on && /^```$/ {exit} on && NF {print}' plugin/README.md)
library_faults=$(
  find include lib ipam plugin -type f \( -name '*.h' -o -name '*.cpp' \) -print0 | sort -z |
    xargs -0 grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' /dev/null |
    awk -v table="$libraries" '
      BEGIN {
        n = split(table, rows, "\n")
        for (r = 1; r <= n; r++) {
          lib = rows[r]; sub(/:.*/, "", lib); dirs = rows[r]; sub(/^[^:]*: */, "", dirs); sub(/ *$/, "", dirs)
          allowed[lib] = " " dirs " "; shown[lib] = dirs
        }
      }
      {
        split($0, parts, ":"); file = parts[1]; line = parts[2]
        inc = $0; sub(/^[^<]*</, "", inc); sub(/>.*$/, "", inc)
        dir = file; sub(/[^\/]*$/, "", dir)
        for (lib in allowed) {
          if (index(inc, lib) == 1 && index(allowed[lib], " " dir " ") == 0) {
            printf "%s:%s: includes <%s>, which only %s may include (plugin/README.md, libraries)\n", file, line, inc, shown[lib]
          }
        }
      }'
)
if [[ -n $library_faults ]]; then
  echo "$library_faults"
  echo "check-layers: a library is included outside the folders the libraries block of plugin/README.md gives it"
  exit 1
fi

# The links: a library of a wing links no library defined in a wing above it (ipam/'s none of
# plugin/'s, lib/'s none of either), whatever its includes say: a link carries a whole library's
# code and its own links. Read from the target_link_libraries() calls of the CMakeLists.txt files of
# lib/, ipam/ and plugin/ (a library's wing is the folder its add_library() is in); libraries defined
# elsewhere (the top level's ibcni_base, imported ones) are in no wing and not checked.
link_faults=$(
  find lib ipam plugin -name CMakeLists.txt -print0 | sort -z |
    xargs -0 awk '
      function wing(file) { split(file, p, "/"); return p[1] }
      {
        line = $0; sub(/#.*/, "", line)
        if (match(line, /add_library\([A-Za-z0-9_.-]+/)) {
          name = substr(line, RSTART + 12, RLENGTH - 12); wingOf[name] = wing(FILENAME)
        }
        if (!open && match(line, /target_link_libraries\(/)) {
          open = 1; text = substr(line, RSTART + RLENGTH); where = FILENAME ":" FNR; from = wing(FILENAME)
        } else if (open) {
          text = text " " line
        }
        if (open && index(text, ")") > 0) {
          sub(/\).*/, "", text)
          n = split(text, words, /[ \t]+/); target = ""
          for (w = 1; w <= n; w++) {
            if (words[w] == "" || words[w] ~ /^(PUBLIC|PRIVATE|INTERFACE)$/ || words[w] ~ /^\$/) continue
            if (target == "") { target = words[w]; continue }
            links[++count] = where "\t" target "\t" words[w]
          }
          open = 0; text = ""
        }
      }
      END {
        rank["lib"] = 1; rank["ipam"] = 2; rank["plugin"] = 3
        for (i = 1; i <= count; i++) {
          split(links[i], f, "\t")
          t = wingOf[f[2]]; d = wingOf[f[3]]
          if (t != "" && d != "" && rank[d] > rank[t]) {
            printf "%s: %s (the %s wing) links %s, a library of the %s wing above it\n", f[1], f[2], t, f[3], d
          }
        }
      }'
)
if [[ -n $link_faults ]]; then
  echo "$link_faults"
  echo "check-layers: a library links a library of a wing above its own (plugin/README.md, Layers)"
  exit 1
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
  awk -v table="$table" -v faces="$faces" -F'\t' '
    BEGIN {
      nf = split(faces, frows, "\n")
      for (r = 1; r <= nf; r++) {
        fw = frows[r]; sub(/:.*/, "", fw); fl = frows[r]; sub(/^[^:]*: */, "", fl)
        faced[fw] = fl; k = split(fl, fls, " ")
        for (p = 1; p <= k; p++) face[fw SUBSEP fls[p]] = 1
      }
      n = split(table, rows, "\n")
      for (r = 1; r <= n; r++) {
        row = rows[r]
        if (row ~ /^\[[a-z]+\]$/) { wing = substr(row, 2, length(row) - 2); continue }
        layer = row; sub(/:.*/, "", layer); sub(/^[^:]*:/, "", row)
        m = split(row, units, " ")
        for (u = 1; u <= m; u++) {
          if (units[u] == "") continue
          k = split(units[u], prefixes, "+")
          for (p = 1; p <= k; p++) {
            unitName[prefixes[p]] = units[u]; rank[prefixes[p]] = r; layerOf[prefixes[p]] = layer; wingOf[prefixes[p]] = wing
          }
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
      if (rank[tu] < rank[fu] && wingOf[tu] != wingOf[fu]) {
        printf "%s:%s: includes \"%s\" (%s, layer %s) from layer %s: the %s wing is above the %s wing\n", file, line, inc, unitName[tu], layerOf[tu], layerOf[fu], wingOf[tu], wingOf[fu]
        bad++
      } else if (rank[tu] < rank[fu]) {
        printf "%s:%s: includes \"%s\" (%s, layer %s) from layer %s, which is below it\n", file, line, inc, unitName[tu], layerOf[tu], layerOf[fu]
        bad++
      } else if (rank[tu] == rank[fu]) {
        printf "%s:%s: includes \"%s\" (%s) from its sibling %s in layer %s: siblings do not include each other\n", file, line, inc, unitName[tu], unitName[fu], layerOf[fu]
        bad++
      } else if (wingOf[tu] != wingOf[fu] && (wingOf[tu] in faced) && !((wingOf[tu] SUBSEP layerOf[tu]) in face)) {
        printf "%s:%s: includes \"%s\" (layer %s) past the face of the %s wing (%s: plugin/README.md, faces)\n", file, line, inc, layerOf[tu], wingOf[tu], faced[wingOf[tu]]
        bad++
      }
      checked++
    }
    END {
      if (bad) { printf "check-layers: %d include(s) break the layer order (plugin/README.md, Layers)\n", bad; exit 1 }
      printf "check-layers: %d includes, every one goes down the layers\n", checked
    }'
