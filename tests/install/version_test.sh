#!/usr/bin/env bash
# version_test.sh PIPEVM VERSION SOURCE_DIR [GIT]
# `pipevm --version` prints "pipevm VERSION (commit C)", C the commit of
# SOURCE_DIR as `git describe --always` names it (a "-dirty" suffix when the
# tree had changes at build time), or "unknown" when SOURCE_DIR is not a git
# checkout of its own or there is no git.
set -euo pipefail
pipevm=$1 version=$2 source_dir=$3 git=${4:-}
fail() { echo "FAIL: $*" >&2; exit 1; }

printed=$("$pipevm" --version)
echo "$printed"
expected_commit=unknown
if [[ -n $git ]] && top=$("$git" -C "$source_dir" rev-parse --show-toplevel 2>/dev/null) &&
  [[ $(readlink -f "$top") == $(readlink -f "$source_dir") ]]; then
  expected_commit=$("$git" -C "$source_dir" describe --always)
fi
[[ $printed =~ ^pipevm\ ([^ ]+)\ \(commit\ ([^ ]+)\)$ ]] ||
  fail "not 'pipevm VERSION (commit C)': $printed"
[[ ${BASH_REMATCH[1]} == "$version" ]] || fail "version ${BASH_REMATCH[1]}, the project's is $version"
commit=${BASH_REMATCH[2]}
[[ ${commit%-dirty} == "$expected_commit" ]] ||
  fail "commit $commit, the sources are at $expected_commit (rebuild after a commit?)"
echo "names version $version and commit $commit"
