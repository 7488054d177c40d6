#!/usr/bin/env bash
# skip_test.sh: where network namespaces cannot be made, every multi-host
# test skips with the reason: `cluster.sh check`, `cluster.sh with` (which
# must not run its command) and a test script each exit 77, CTest's
# SKIP_RETURN_CODE, saying why. As root the test drops CAP_NET_ADMIN and
# CAP_SYS_ADMIN (setpriv), and also runs as the user nobody where nobody
# can read this folder; as another user it runs as that user.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
marker=$(mktemp -u)
trap 'rm -f "$marker"' EXIT

expect_skip() { # description command...
  local description=$1 status=0 output
  shift
  output=$("$@" 2>&1) || status=$?
  printf '%s\n' "$output"
  ((status == 77)) || fail "$description: exit status $status, expected 77 (skip)"
  [[ $output == *"cannot build a test cluster here: "* ]] || fail "$description: no reason given"
  echo "$description: skipped with the reason"
}

ways=("as $(id -un)")
if (($(id -u) == 0)); then
  ways=("without CAP_NET_ADMIN and CAP_SYS_ADMIN")
  if setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$here/lib.sh"; then
    ways+=("as nobody")
  fi
fi
for way in "${ways[@]}"; do
  case $way in
    without*) unprivileged=(setpriv --bounding-set "-net_admin,-sys_admin") ;;
    "as nobody") unprivileged=(setpriv --reuid=65534 --regid=65534 --clear-groups) ;;
    *) unprivileged=() ;;
  esac
  expect_skip "cluster.sh check, $way" "${unprivileged[@]}" "$cluster" check
  expect_skip "cluster.sh with, $way" "${unprivileged[@]}" "$cluster" with 2 -- touch "$marker"
  [[ ! -e $marker ]] || fail "cluster.sh with ran its command without a cluster"
  expect_skip "remote_kill_test.sh, $way" "${unprivileged[@]}" "$here/remote_kill_test.sh" \
    /no/pipevm /no/schedule
done
