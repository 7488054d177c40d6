#!/usr/bin/env bash
# man_test.sh PIPEVM MAN_PAGE
# The man page renders without a warning (groff -ww; skips, 77, without
# groff) and names, as a bold word, every command `pipevm --help` lists.
set -euo pipefail
pipevm=$1 page=$2
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v groff >/dev/null || { echo "no groff: cannot render $page"; exit 77; }
warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
[[ -z $warnings ]] || fail "groff warns: $warnings"
mapfile -t commands < <("$pipevm" --help | sed -n '/^[Ss][Uu][Bb][Cc][Oo][Mm][Mm][Aa][Nn][Dd][Ss]:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
((${#commands[@]} >= 5)) || fail "found ${#commands[@]} commands in pipevm --help"
for command in "${commands[@]}"; do
  grep -q -E "^\.B (pipevm )?$command$" "$page" || fail "the man page has no .B $command"
done
echo "renders cleanly and names ${commands[*]}"
