#!/usr/bin/env bash
# completion_test.sh PIPEVM COMPLETION_SCRIPT
# The bash completion, as bash calls it: commands, a command's options,
# the options of `pipevm FILE` (run), and an option's choices.
set -euo pipefail
pipevm=$1 script=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=/dev/null
source "$script"

# complete_line WORD... : COMPREPLY for the command line WORDS, the cursor
# on the last word.
complete_line() {
  COMP_WORDS=("$pipevm" "$@")
  COMP_CWORD=$#
  COMPREPLY=()
  _pipevm
}
expect() {
  local want=$1
  shift
  complete_line "$@"
  printf '%s\n' "${COMPREPLY[@]}" | grep -qx -- "$want" ||
    fail "pipevm $*<TAB> does not offer $want: ${COMPREPLY[*]}"
}
expect_not() {
  local unwanted=$1
  shift
  complete_line "$@"
  ! printf '%s\n' "${COMPREPLY[@]}" | grep -qx -- "$unwanted" ||
    fail "pipevm $*<TAB> offers $unwanted"
}

expect check ch
expect simulate ""
expect --stages check schedule.pipe --st
expect --micro-batches check --mi
expect --with-comms expand x.pipe --wi
expect_not --with-comms check x.pipe --wi
expect --dp x.pipe --d
expect --checkpoint x.pipe --check
expect sarif check x.pipe --format ""
expect torch-csv expand x.pipe --format t
echo "completes commands, options and choices"
