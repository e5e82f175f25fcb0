#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Holds production code (include/, lib/, ipam/, plugin/) to two limits: no function over 80 lines,
# no source file over 600. Functions are read by a parser, Universal Ctags (the C++ parser, every
# .h and .cpp as C++): each function definition, free or a member defined in its class or outside,
# wherever it is indented, counted from the line that names it to the line of its closing "}"
# (lambdas count as part of the function around them). A member is named Class::name. What exceeds
# a limit today is listed in scripts/length-debt.txt with its length: a listed function or file may
# shrink, never grow; a new one over a limit fails; an entry that is back within its limit (or gone)
# fails too, so that the list only ever gets shorter.
#   scripts/check-lengths.sh [ROOT]            exit 0 when every limit holds, 1 (naming each) otherwise
#   scripts/check-lengths.sh --measure [ROOT]  print what is over a limit, in the list's format
# Needs Universal Ctags as `ctags` (Debian: universal-ctags; scripts/install-deps.sh); CTAGS names
# another binary. Exits 2 without it.
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
ctags=${CTAGS:-ctags}

# Another ctags (Exuberant, Emacs's) reads no function's end: refuse rather than pass everything.
if ! version=$("$ctags" --version 2>/dev/null) || [[ $version != "Universal Ctags"* ]]; then
  echo "check-lengths: needs Universal Ctags as '$ctags' (apt-get install universal-ctags), found: $(
    head -n 1 <<<"${version:-nothing}")" >&2
  exit 2
fi

sources() { find include lib ipam plugin -type f \( -name '*.cpp' -o -name '*.h' \) -print0 | sort -z; }

# Every function definition the C++ parser finds, a line each (--excmd=number --fields=+ne): name,
# path, line;", kind, then line:N, the scope (class:ns::Class, struct:..., namespace:...,
# function:... for a lambda's) and end:N.
if ! tags=$(sources | xargs -0 -r "$ctags" -o - --output-format=u-ctags --language-force=C++ --kinds-C++=f \
  --fields=+ne --excmd=number --sort=no); then
  echo "check-lengths: '$ctags' failed to read the sources" >&2
  exit 2
fi
unreadable=$(awk -F'\t' 'NF && $3 !~ /^[0-9]+;"$/ {
  l = substr($0, 1, 120); gsub(/[^[:print:]]/, "?", l); print l; exit
}' <<<"$tags")
if [[ -n $unreadable ]]; then
  echo "check-lengths: '$ctags' did not answer in Universal Ctags's own format (u-ctags): $unreadable" >&2
  exit 2
fi

# "function<TAB>path<TAB>name<TAB>lines" and "file<TAB>path<TAB>-<TAB>lines", for everything over a
# limit (a function whose end ctags did not find: "?").
measured=$(
  awk -F'\t' -v maxf="$max_function" '
    !NF || $1 ~ /^__anon/ { next }  # a lambda: part of its function
    {
      start = 0; end = 0; scope = ""
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) start = substr($i, 6)
        else if ($i ~ /^end:/) end = substr($i, 5)
        else if ($i ~ /^(class|struct|union):/) {
          k = split(substr($i, index($i, ":") + 1), s, "::"); scope = s[k] "::"
        }
      }
      if (!end) printf "function\t%s\t%s%s\t?\n", $2, scope, $1
      else if (end - start + 1 > maxf) printf "function\t%s\t%s%s\t%d\n", $2, scope, $1, end - start + 1
    }' <<<"$tags" | sort -u
  sources | xargs -0 wc -l | awk -v maxl="$max_file" '$2 != "total" && $1 > maxl {printf "file\t%s\t-\t%d\n", $2, $1}'
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
      if ($4 == "?") {
        printf "%s: ctags found no end for it, so its length is unknown\n", what
      } else if (!(key in allowed)) {
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
