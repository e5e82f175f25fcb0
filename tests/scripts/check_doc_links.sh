#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the links of the repository's Markdown: README.md, docs/*.md and every other tracked *.md
# (without git: every *.md under ROOT but .git/, node_modules/ and build*/).
#   - a relative link ([text](path), ![alt](path), [label]: path, <a href="path">) must name a file
#     or directory that exists inside ROOT (and, in a git work tree, that git knows: tracked or
#     staged, as GitHub shows only those); a leading "/" is ROOT, as on GitHub;
#   - an anchor (#name, alone or after a path) must be a heading of the target Markdown file under
#     GitHub's rule (lower case; everything but letters, digits, "_", "-" and spaces dropped; each
#     space a "-"; a repeated heading gets -1, -2, ...) or an <a name/id="..."> there; an anchor
#     into a file that is not Markdown must be a line anchor (#L12, #L12-L20);
#   - an external http(s) link is not fetched, only checked to be well-formed (scheme, host, an
#     optional port, no whitespace); mailto: needs an address; any other scheme is refused;
#   - README.md (the user's page) stays under 400 lines: the details belong in docs/.
# Links inside fenced code blocks and `code spans` are not links and are skipped.
#   tests/scripts/check_doc_links.sh [ROOT]   exit 0 when all hold, 1 naming each broken link
set -uo pipefail
export LC_ALL=C.UTF-8
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
root=$(cd "$root" && pwd -P) || exit 2
cd "$root" || exit 2
readme_max=400

problems=0
problem() {
  echo "$1"
  problems=$((problems + 1))
}

# --- the files ------------------------------------------------------------------------------------
declare -A known=()  # what git knows (files and the directories above them); empty without git
files=()
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
  [[ $(git -C "$root" rev-parse --show-toplevel) -ef $root ]]; then
  use_git=1
  while IFS= read -r -d '' f; do
    known[$f]=1
    d=$f
    while [[ $d == */* ]]; do
      d=${d%/*}
      known[$d]=1
    done
  done < <(git ls-files -z)
  while IFS= read -r -d '' f; do
    [[ -f $f ]] && files+=("$f")
  done < <(git ls-files -z -- '*.md')
else
  use_git=
  while IFS= read -r -d '' f; do
    files+=("${f#./}")
  done < <(find . \( -name .git -o -name node_modules -o -name 'build*' \) -prune -o -type f -name '*.md' -print0)
fi
# README.md and docs/*.md always, tracked yet or not.
for f in README.md docs/*.md; do
  [[ -f $f ]] && files+=("$f")
done
mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)

# --- README.md's length -----------------------------------------------------------------------------
if [[ ! -f README.md ]]; then
  problem "README.md: missing"
else
  n=$(wc -l <README.md)
  ((n < readme_max)) ||
    problem "README.md: $n lines: keep the user's page under $readme_max lines (move details to docs/)"
fi

# --- parsing --------------------------------------------------------------------------------------
# One Markdown file as lines "H<TAB>line<TAB>heading text", "A<TAB>line<TAB>explicit anchor" and
# "L<TAB>line<TAB>link target", outside fenced code blocks, with code spans blanked out of links.
scan() {
  awk '
    function emit(kind, text) { printf "%s\t%d\t%s\n", kind, FNR, text }
    # Code spans blanked (``a`b`` first, then `a`), so that nothing in them reads as a link.
    function nocode(s) {
      gsub(/``([^`]|`[^`])*``/, "CODE", s)
      gsub(/`[^`]*`/, "CODE", s)
      return s
    }
    {
      line = $0
      if (fence != "") {
        t = line; sub(/^ */, "", t)
        if (index(t, fence) == 1 && t ~ /^(`+|~+)[ \t]*$/ && length(t) >= length(fence)) fence = ""
        prev = ""
        next
      }
      if (match(line, /^ ? ? ?(```+|~~~+)/)) {
        f = substr(line, RSTART, RLENGTH); sub(/^ */, "", f)
        fence = f
        prev = ""
        next
      }
      if (line ~ /^ ? ? ?#+([ \t]|$)/) {
        h = line
        sub(/^ *#+[ \t]*/, "", h)
        sub(/[ \t]+#+[ \t]*$/, "", h)
        sub(/[ \t]+$/, "", h)
        emit("H", h)
      } else if (line ~ /^ ? ? ?(=+|-+)[ \t]*$/ && prev != "" && prev !~ /^ ? ? ?([#>|*+-]|[0-9]+[.)])/) {
        # A setext heading: the text line above, underlined.
        h = prev; sub(/^ +/, "", h); sub(/[ \t]+$/, "", h)
        printf "H\t%d\t%s\n", FNR - 1, h
      }
      prev = (line ~ /^[ \t]*$/) ? "" : line
      s = nocode(line)
      t = s
      while (match(t, /<a [^>]*(name|id)="[^"]*"/)) {
        a = substr(t, RSTART, RLENGTH); sub(/.*(name|id)="/, "", a); sub(/"$/, "", a)
        emit("A", a)
        t = substr(t, RSTART + RLENGTH)
      }
      t = s
      while (match(t, /href="[^"]*"/)) {
        emit("L", substr(t, RSTART + 6, RLENGTH - 7))
        t = substr(t, RSTART + RLENGTH)
      }
      if (match(s, /^ ? ? ?\[[^]]+\]:[ \t]*[^ \t]+/)) {
        d = substr(s, RSTART, RLENGTH); sub(/^[^]]*\]:[ \t]*/, "", d)
        emit("L", d)
      }
      t = s
      while (match(t, /\]\([^)]*\)/)) {
        raw = substr(t, RSTART + 2, RLENGTH - 3)
        target = raw
        sub(/^[ \t]+/, "", target)
        if (target ~ /^</) { sub(/^</, "", target); sub(/>.*$/, "", target) }
        else {
          # A title may follow the target ("...", '...'); anything else there (a space inside a
          # URL) is no link at all: the whole text is reported as the target.
          rest = target
          sub(/^[^ \t]*/, "", rest)
          sub(/[ \t].*$/, "", target)
          if (rest !~ /^([ \t]+("[^"]*"|'\''[^'\'']*'\''))?[ \t]*$/) target = raw
        }
        emit("L", target == "" ? "(empty)" : target)
        t = substr(t, RSTART + RLENGTH)
      }
      t = s
      while (match(t, /<https?:[^>]*>/)) {
        emit("L", substr(t, RSTART + 1, RLENGTH - 2))
        t = substr(t, RSTART + RLENGTH)
      }
    }
  ' "$1"
}

# GitHub's anchor of a heading's text: its rendered text (links and images as their text, code
# spans as their code, no HTML tags, no emphasis marks), lower case, only letters, digits, "_",
# "-" and spaces kept, each space a "-".
link_re='^(.*)\[([^]]*)]\([^)]*\)(.*)$' tag_re='^(.*)<[^>]*>(.*)$'
slug() {
  local s=$1
  while [[ $s =~ $link_re ]]; do
    s="${BASH_REMATCH[1]}${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
  done
  while [[ $s =~ $tag_re ]]; do
    s="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
  done
  s=${s,,}
  s=${s//[^[:alnum:]_ -]/}
  printf '%s' "${s// /-}"
}

declare -A anchors=()  # "file#anchor" -> 1
declare -A scanned=()  # file -> 1 once its anchors are in `anchors`
declare -A parsed=()   # file -> its scan output
load() {
  local file=$1 kind line text a
  [[ -n ${scanned[$file]:-} ]] && return
  scanned[$file]=1
  parsed[$file]=$(scan "$file")
  declare -A count=()
  while IFS=$'\t' read -r kind line text; do
    case $kind in
      H)
        a=$(slug "$text")
        if [[ -n ${count[$a]+x} ]]; then
          count[$a]=$((count[$a] + 1))
          anchors["$file#$a-${count[$a]}"]=1
        else
          count[$a]=0
          anchors["$file#$a"]=1
        fi
        ;;
      A) anchors["$file#$text"]=1 ;;
    esac
  done <<<"${parsed[$file]}"
}

# "%20" and the like, decoded.
urldecode() {
  local s=${1//+/%2B}
  printf '%b' "${s//%/\\x}"
}

# --- checking -------------------------------------------------------------------------------------
links=0 external=0
host='[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?'
url_re="^https?://${host}(\.${host})*(:[0-9]{1,5})?([/?#][^[:space:]<>\"]*)?$"
for file in "${files[@]}"; do
  load "$file"
  dir=$(dirname "$file")
  while IFS=$'\t' read -r kind line target; do
    [[ $kind == L ]] || continue
    links=$((links + 1))
    where="$file:$line: link \"$target\""
    case $target in
      "(empty)") problem "$where: no target"; continue ;;
      http://* | https://*)
        external=$((external + 1))
        [[ $target =~ $url_re ]] || problem "$where: not a well-formed http(s) URL"
        continue
        ;;
      mailto:*)
        [[ $target =~ ^mailto:[^@[:space:]]+@[^@[:space:]]+$ ]] || problem "$where: not a mail address"
        continue
        ;;
    esac
    if [[ $target =~ ^[A-Za-z][A-Za-z0-9+.-]*: ]]; then
      problem "$where: neither a relative link nor an http(s) URL"
      continue
    fi
    path=${target%%#*}
    anchor=
    [[ $target == *#* ]] && anchor=${target#*#}
    path=${path%%\?*}
    if [[ -z $path ]]; then
      dest=$file
    else
      path=$(urldecode "$path")
      if [[ $path == /* ]]; then
        dest=$(realpath -m "$root$path")
      else
        dest=$(realpath -m "$root/$dir/$path")
      fi
      if [[ $dest != "$root" && $dest != "$root"/* ]]; then
        problem "$where: leaves the repository"
        continue
      fi
      dest=${dest#"$root"}
      dest=${dest#/}
      if [[ -z $dest ]]; then
        dest=.
      fi
      if [[ ! -e $dest ]]; then
        problem "$where: $dest does not exist"
        continue
      fi
      if [[ -n $use_git && $dest != . && -z ${known[$dest]:-} ]]; then
        problem "$where: $dest is not in git (git add it, or link to something that is)"
        continue
      fi
    fi
    [[ -n $anchor ]] || continue
    if [[ $dest == *.md && -f $dest ]]; then
      load "$dest"
      [[ -n ${anchors["$dest#$(urldecode "$anchor")"]:-} ]] ||
        problem "$where: no heading of $dest has the anchor #$anchor"
    elif ! [[ $anchor =~ ^L[0-9]+(-L[0-9]+)?$ ]]; then
      problem "$where: #$anchor: $dest is not Markdown, only line anchors (#L12) reach into it"
    fi
  done <<<"${parsed[$file]}"
done

if ((problems > 0)); then
  echo "check-doc-links: $problems problem(s) in ${#files[@]} Markdown files ($links links)"
  exit 1
fi
echo "check-doc-links: ${#files[@]} Markdown files, $links links ($external external, not fetched): all resolve"
