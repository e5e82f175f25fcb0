#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/scripts/check_doc_links.sh fails, naming the file, the line and the link, on each way of
# breaking a link: a relative link to a file that is not there, an anchor no heading has (in the
# same file and in another), a link out of the repository, a malformed external URL, an anchor into
# a file that is not Markdown, a link to a file git does not know; and on a README.md of 400 lines.
# It passes a tree whose links all resolve, GitHub's anchor rule included (punctuation, code, links
# and repeated headings), and ignores what only looks like a link in code. Everything happens in a
# temporary directory, removed at the end.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
check=$repo/tests/scripts/check_doc_links.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/ibcni-doc-links.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
passes=0 fails=0
pass() { echo "PASS $*"; passes=$((passes + 1)); }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
run() { out=$("$check" "$work" 2>&1); rc=$?; }
# expect_broken WHAT PATTERN: the check fails and its output has a line matching PATTERN.
expect_broken() {
  run
  if [[ $rc -eq 1 ]] && grep -Eq -- "$2" <<<"$out"; then
    pass "$1"
  else
    fail "$1 (rc $rc): $out"
  fi
}

# A tree whose links all resolve.
mkdir -p "$work/docs" "$work/deploy/examples"
echo 'kind: x' >"$work/deploy/examples/net.yaml"
cat >"$work/README.md" <<'EOF'
# Title

See [the guide](docs/guide.md), [its setup](docs/guide.md#set-up-ipam-node-local--cluster),
[a repeated heading](docs/guide.md#notes-1), [code in a heading](docs/guide.md#ibcni-doctor---config),
[a linked heading](docs/guide.md#the-chart), ![an image](deploy/examples/net.yaml),
[a folder](deploy/examples/), [a line](deploy/examples/net.yaml#L1), [here](#title),
[Ünïcode](docs/guide.md#ünïcode-à-la-carte), <https://example.com/a?b=c#d> and
[upstream](https://github.com/k8snetworkplumbingwg/multus-cni#readme "Multus").

[ref]: docs/guide.md#notes

Not links: `[x](missing.md)` and ``[y](gone.md#z)``.

```md
[z](nowhere.md)
# not a heading
```
EOF
cat >"$work/docs/guide.md" <<'EOF'
# Guide

## Set up: IPAM (node-local / cluster)

## Notes

## Notes

## `ibcni doctor --config`

## The [chart](../deploy/examples/net.yaml)

## Ünïcode à la carte

Back to the [README](../README.md#title), to [a note](#notes) and [to root](/README.md).
EOF
run
[[ $rc -eq 0 ]] && pass "a tree whose links and anchors all resolve passes" || fail "a good tree failed (rc $rc): $out"

cp "$work/README.md" "$work/README.good"
cp "$work/docs/guide.md" "$work/guide.good"
restore() { cp "$work/README.good" "$work/README.md"; cp "$work/guide.good" "$work/docs/guide.md"; }
# The line a line appended to README.md or docs/guide.md gets.
r=$(($(wc -l <"$work/README.md") + 1)) g=$(($(wc -l <"$work/docs/guide.md") + 1))

echo 'And [the missing page](docs/missing.md).' >>"$work/README.md"
expect_broken "a link to a file that does not exist fails, naming file and line" \
  "^README\\.md:$r: link \"docs/missing\\.md\": docs/missing\\.md does not exist\$"
restore

echo 'And [a wrong anchor](docs/guide.md#no-such-heading).' >>"$work/README.md"
expect_broken "a link to an anchor no heading of the other file has fails" \
  "^README\\.md:$r: link \"docs/guide\\.md#no-such-heading\": no heading of docs/guide\\.md has the anchor #no-such-heading\$"
restore

echo 'And [up](#guide-2).' >>"$work/docs/guide.md"
expect_broken "an anchor missing in the same file fails" \
  "^docs/guide\\.md:$g: link \"#guide-2\": no heading of docs/guide\\.md has the anchor #guide-2\$"
restore

echo 'And [a moved heading](docs/guide.md#set-up-ipam-node-local-cluster).' >>"$work/README.md"
expect_broken "an anchor slugged without GitHub's rule (one hyphen for ' / ') fails" \
  'no heading of docs/guide\.md has the anchor #set-up-ipam-node-local-cluster'
restore

echo 'And [out](../../etc/passwd).' >>"$work/README.md"
expect_broken "a link out of the repository fails" \
  "^README\\.md:$r: link \"\\.\\./\\.\\./etc/passwd\": leaves the repository\$"
restore

echo 'And [bad](https://exa mple.com).' >>"$work/README.md"
expect_broken "an external URL with a space in it fails" 'link "https://exa mple\.com": not a well-formed http\(s\) URL'
restore
echo 'And [worse](http:/x).' >>"$work/README.md"
expect_broken "an external URL without its host fails" 'link "http:/x": neither a relative link nor an http\(s\) URL'
restore

echo 'And [a yaml anchor](deploy/examples/net.yaml#spec).' >>"$work/README.md"
expect_broken "an anchor into a file that is not Markdown fails" 'net\.yaml is not Markdown'
restore

for ((i = r; i <= 400; i++)); do echo "line $i"; done >>"$work/README.md"  # 400 lines
expect_broken "a README.md of 400 lines fails" '^README\.md: 400 lines: keep the user.s page under 400 lines'
sed -i '$d' "$work/README.md"
run
[[ $rc -eq 0 ]] && pass "a README.md of 399 lines passes" || fail "399 lines failed (rc $rc): $out"
restore

# In a git work tree a link must name something git knows (GitHub shows nothing else).
expected=11
if command -v git >/dev/null; then
  expected=13
  git -C "$work" init -q && git -C "$work" add README.md docs deploy
  echo 'New: [draft](docs/draft.md).' >>"$work/README.md"
  echo '# Draft' >"$work/docs/draft.md"
  expect_broken "in a git work tree, a link to a file git does not know fails" \
    'link "docs/draft\.md": docs/draft\.md is not in git'
  git -C "$work" add docs/draft.md
  run
  [[ $rc -eq 0 ]] && pass "once added to git, it passes" || fail "an added file failed (rc $rc): $out"
  rm -rf "$work/.git" "$work/docs/draft.md"
  restore
else
  echo "SKIP the git rule: git is not installed"
fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 && $passes -eq $expected ]]
