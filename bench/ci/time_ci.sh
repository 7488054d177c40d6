#!/usr/bin/env bash
# time_ci.sh REPOSITORY COMMIT OUT.tsv
# Times each step of .ci/run as it stands at COMMIT, from a fresh clone and
# without ccache: every line of that .ci/run that starts with `cmake`,
# `ctest` or `fuzz/run.sh` (the release configure and build, the tests,
# the fuzz configure and build, the fuzz run), in order, each once. Not
# the package installs, the SARIF validator or the cluster probe: those
# depend on the network and the host, not on the code. Appends to OUT.tsv
# one line per step: commit, step, wall seconds, CPU seconds of the step's
# processes (user + system), exit status, the load average at the start.
# The machine may be shared: compare runs made back to back, and read the
# CPU seconds beside the wall seconds.
set -uo pipefail
repository=$1 commit=$2 out=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$repository" "$work/src" && git -C "$work/src" checkout -q "$commit" || exit 2
cd "$work/src" || exit 2
export CCACHE_DISABLE=1
short=$(git rev-parse --short HEAD)
grep -E '^(cmake|ctest|fuzz/run\.sh)' .ci/run | while IFS= read -r step; do
  load=$(cut -d' ' -f1 /proc/loadavg)
  start=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$work/cpu" bash -c "$step" < /dev/null > "$work/step.log" 2>&1
  status=$?
  end=$(date +%s.%N)
  read -r user system < <(tail -1 "$work/cpu")
  printf '%s\t%s\t%.0f\t%.0f\t%s\t%s\n' "$short" "${step//$'\t'/ }" "$(echo "$end - $start" | bc)" \
    "$(echo "$user + $system" | bc)" "$status" "$load" >> "$out"
  if [ "$status" != 0 ]; then tail -20 "$work/step.log" >&2; fi
done
