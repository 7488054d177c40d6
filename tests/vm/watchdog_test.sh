#!/bin/sh
# watchdog_test.sh WORKDIR TIMEOUT VICTIM COMMAND...
#
# The watchdog on one host. COMMAND is a whole `mpiexec ... pipevm run ...
# --timeout TIMEOUT` launch that would train far longer than the test
# lasts. Once it trains, the process of world rank VICTIM is stopped
# (SIGSTOP): a rank that stalls without dying, which no schedule that
# passed the checker does by itself. Passes when
#   - mpiexec exits non-zero within TIMEOUT + 8 s of the stop (the
#     watchdog's timeout, its 2 s grace, Open MPI bringing the ranks down);
#   - a rank reported the hang at its instruction's place in the schedule
#     (file:line:col: error: rank R: INSTRUCTION: no progress for ...),
#     naming the stopped rank as the peer it waits for, with its stage and
#     host;
#   - the stopped process is gone too.
# The victim is found by this script's marker and Open MPI's
# OMPI_COMM_WORLD_RANK in its environment (rank_process.sh).
set -u
work=$1
timeout=$2
victim=$3
shift 3
allowed=$((timeout + 8))

fail() {
  echo "watchdog_test: $*" >&2
  exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

rm -rf "$work"
mkdir -p "$work" || fail "cannot create $work"
PIPEVM_WATCHDOG_TEST=$$
export PIPEVM_WATCHDOG_TEST
"$@" >"$work/run.log" 2>&1 &
run=$!
trap 'kill "$run" 2>/dev/null' EXIT

# shellcheck source=rank_process.sh
. "$(dirname "$0")/rank_process.sh"
find_victim() { rank_process "PIPEVM_WATCHDOG_TEST=$$" "$victim" "$work/environ"; }
# Training runs once rank 0 reported an epoch.
tries=0
pid=
until [ -n "$pid" ] && grep -q '^epoch 1/' "$work/run.log"; do
  kill -0 "$run" 2>/dev/null || { cat "$work/run.log"; fail "the run ended before the stop"; }
  tries=$((tries + 1))
  [ "$tries" -lt 1500 ] || { cat "$work/run.log"; fail "no epoch within 30 s"; }
  sleep 0.02
  [ -n "$pid" ] || pid=$(find_victim)
done
kill -STOP "$pid" || fail "cannot stop rank $victim (pid $pid)"
stopped=$(now_ms)
echo "stopped rank $victim (pid $pid)"

while kill -0 "$run" 2>/dev/null && [ $(($(now_ms) - stopped)) -le $((allowed * 1000 + 20000)) ]; do
  sleep 0.1
done
if kill -0 "$run" 2>/dev/null; then
  kill -CONT "$pid"
  kill "$run"
  cat "$work/run.log"
  fail "mpiexec still ran $((allowed + 20)) s after rank $victim stopped"
fi
wait "$run"
status=$?
elapsed=$(($(now_ms) - stopped))
trap - EXIT
grep -v '^epoch' "$work/run.log"
echo "mpiexec exited with status $status $elapsed ms after the stop (--timeout $timeout)"
[ "$status" -ne 0 ] || fail "mpiexec reported success"
[ "$elapsed" -le $((allowed * 1000)) ] || fail "the ranks took more than $allowed s to exit"
grep -Eq "\.pipe:[0-9]+:[0-9]+: error: rank [0-9]+: [A-Za-z]+ .*: no progress for [0-9.]+ s \(timeout $timeout s\) on host [^:]+: waiting .*rank $victim \(stage [0-9]+, replica [0-9]+, host [^)]+\)" \
  "$work/run.log" || fail "no rank reported its wait for rank $victim at its instruction"
if kill -0 "$pid" 2>/dev/null && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
  kill -KILL "$pid"
  fail "the stopped rank $victim (pid $pid) was left running"
fi
echo "a rank named the stopped rank $victim as its peer; every rank exited"
rm -rf "$work"
