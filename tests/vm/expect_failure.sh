#!/bin/sh
# expect_failure.sh [--status N] PATTERN COMMAND...: passes when COMMAND exits
# non-zero (with status N, when given) and its output (stdout and stderr)
# matches the extended regular expression PATTERN. The test's TIMEOUT bounds
# how long the failure may take.
expected=
if [ "$1" = "--status" ]; then
  expected=$2
  shift 2
fi
pattern=$1
shift
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$status" -eq 0 ]; then
  echo "expect_failure: the command succeeded; expected a failure" >&2
  exit 1
fi
if [ -n "$expected" ] && [ "$status" -ne "$expected" ]; then
  echo "expect_failure: exit status $status, expected $expected" >&2
  exit 1
fi
if ! printf '%s\n' "$output" | grep -Eq -- "$pattern"; then
  echo "expect_failure: exit status $status, but no line matches: $pattern" >&2
  exit 1
fi
exit 0
