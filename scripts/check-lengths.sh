#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Holds production code (include/, lib/, ipam/, plugin/) to two limits: no function over 80 lines,
# no source file over 600. A function is counted from the line at column 0 that begins its
# definition to the "}" at column 0 that closes it (the code's format: clang-format, 2-space
# indent). What exceeds a limit today is listed in scripts/length-debt.txt with its length: a listed
# function or file may shrink, never grow; a new one over a limit fails; an entry that is back
# within its limit (or gone) fails too, so that the list only ever gets shorter.
#   scripts/check-lengths.sh [ROOT]            exit 0 when every limit holds, 1 (naming each) otherwise
#   scripts/check-lengths.sh --measure [ROOT]  print what is over a limit, in the list's format
set -euo pipefail
measure_only=
if [[ ${1:-} == --measure ]]; then
  measure_only=1
  shift
fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
debt=scripts/length-debt.txt
max_function=80
max_file=600

# "function<TAB>path<TAB>name<TAB>lines" and "file<TAB>path<TAB>-<TAB>lines", for everything over a limit.
measured=$(
  find include lib ipam plugin -type f \( -name '*.cpp' -o -name '*.h' \) -print0 | sort -z |
    xargs -0 awk -v maxf="$max_function" '
      FNR == 1 { inside = 0; pending = 0 }
      # A definition opens at column 0 with its body on the same line, or its parameters run on
      # over indented lines to the one that opens the body.
      function opens(l) { return l ~ /[)]( const)?( noexcept)?( override)?( -> [^{]*)? *\{ *$/ }
      {
        line = $0
        if (!inside) {
          if (line ~ /^(namespace|struct|class|enum|union|extern|typedef|#)/) { pending = 0; next }
          if (line ~ /^[A-Za-z_~]/ && opens(line)) { inside = 1; start = FNR; name = line }
          else if (line ~ /^[A-Za-z_~].*[(,] *$/) { pending = FNR; pname = line }
          else if (pending && line ~ /^ / && opens(line)) { inside = 1; start = pending; name = pname; pending = 0 }
          else if (line !~ /^ /) { pending = 0 }
        } else if (line ~ /^\}/) {
          n = FNR - start + 1
          sub(/\(.*/, "", name); k = split(name, w, " "); fn = w[k]
          if (n > maxf) printf "function\t%s\t%s\t%d\n", FILENAME, fn, n
          inside = 0
        }
      }'
  find include lib ipam plugin -type f \( -name '*.cpp' -o -name '*.h' \) -print0 | sort -z |
    xargs -0 wc -l | awk -v maxl="$max_file" '$2 != "total" && $1 > maxl {printf "file\t%s\t-\t%d\n", $2, $1}'
)

if [[ -n $measure_only ]]; then
  printf '%s\n' "$measured"
  exit 0
fi

# The debt: the same four columns; "#" lines and blank lines are comments.
listed=$(grep -v -e '^#' -e '^[[:space:]]*$' "$debt" 2>/dev/null || true)

faults=$(
  awk -F'\t' -v listed="$listed" -v maxf="$max_function" -v maxl="$max_file" '
    BEGIN {
      n = split(listed, rows, "\n")
      for (r = 1; r <= n; r++) { split(rows[r], c, "\t"); key = c[1] "\t" c[2] "\t" c[3]; allowed[key] = c[4]; seen[key] = 0 }
    }
    NF {
      key = $1 "\t" $2 "\t" $3
      limit = $1 == "function" ? maxf : maxl
      what = $1 == "function" ? $2 ": function " $3 : $2
      if (!(key in allowed)) {
        printf "%s is %d lines, over the limit of %d: cut it where a reader would\n", what, $4, limit
      } else {
        seen[key] = 1
        if ($4 + 0 > allowed[key] + 0) printf "%s grew to %d lines (%s lists %d, the limit is %d)\n", what, $4, "scripts/length-debt.txt", allowed[key], limit
      }
    }
    END {
      for (key in seen) if (!seen[key]) {
        split(key, c, "\t")
        printf "%s is listed in scripts/length-debt.txt but is within its limit now (or gone): remove its line\n", c[1] == "function" ? c[2] ": function " c[3] : c[2]
      }
    }' <<<"$measured"
)
if [[ -n $faults ]]; then
  echo "$faults"
  echo "check-lengths: production code breaks its length limits (functions $max_function lines, files $max_file)"
  exit 1
fi
printf 'check-lengths: every function within %d lines and every file within %d, but the %d listed in %s\n' \
  "$max_function" "$max_file" "$(grep -c . <<<"$listed" || true)" "$debt"
