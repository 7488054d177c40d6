#!/bin/sh
# kill_and_resume.sh WORKDIR VICTIM MIN_STEP COMMAND...
#
# The crash test of checkpoints. COMMAND is a whole `mpiexec ... pipevm run
# SCHEDULE [flags]` launch; this script adds --save, --checkpoint and
# --resume to it. It
#   1. runs COMMAND to the end, saving the uninterrupted weights;
#   2. runs it again with --checkpoint, waits (from outside) until a
#      committed manifest records at least MIN_STEP steps, in the middle of
#      an epoch, then SIGKILLs the process of world rank VICTIM; Open MPI
#      brings the other ranks down;
#   3. resumes with --resume from what the killed run left behind;
#   4. passes when the resumed run's weights are byte-identical to 1's.
# The rank's process is found by its environment: the marker variable this
# script exports (mpiexec passes it to the ranks it starts on this host) and
# Open MPI's OMPI_COMM_WORLD_RANK.
set -u
work=$1
victim=$2
min_step=$3
shift 3

fail() {
  echo "kill_and_resume: $*" >&2
  exit 1
}
seconds() { date +%s.%N; }
elapsed() { echo "$1 $(seconds)" | awk '{ printf "%.1f", $2 - $1 }'; }

rm -rf "$work"
mkdir -p "$work" || fail "cannot create $work"
started=$(seconds)

# 1. The uninterrupted run.
"$@" --save "$work/uninterrupted.safetensors" >"$work/uninterrupted.log" 2>&1 ||
  { cat "$work/uninterrupted.log"; fail "the uninterrupted run failed"; }
echo "uninterrupted run: $(elapsed "$started") s"

# 2. The same run, killed in the middle of an epoch.
PIPEVM_KILL_AND_RESUME=$$
export PIPEVM_KILL_AND_RESUME
killed_at=$(seconds)
"$@" --checkpoint "$work/checkpoint" --save "$work/resumed.safetensors" \
  >"$work/killed.log" 2>&1 &
run=$!
trap 'kill "$run" 2>/dev/null' EXIT

# The process of rank $victim: a pipevm process with this script's marker
# and the rank in its environment.
find_victim() {
  for dir in /proc/[0-9]*; do
    read -r name <"$dir/comm" 2>/dev/null || continue
    [ "$name" = pipevm ] || continue
    tr '\0' '\n' <"$dir/environ" 2>/dev/null >"$work/environ" || continue
    if grep -qx "PIPEVM_KILL_AND_RESUME=$$" "$work/environ" &&
      grep -qx "OMPI_COMM_WORLD_RANK=$victim" "$work/environ"; then
      echo "${dir#/proc/}"
    fi
  done
}
tries=0
pid=
while [ -z "$pid" ]; do
  kill -0 "$run" 2>/dev/null || { cat "$work/killed.log"; fail "the run ended before the kill"; }
  tries=$((tries + 1))
  [ "$tries" -lt 1000 ] || fail "no process of rank $victim within 20 s"
  sleep 0.02
  pid=$(find_victim)
done

# The victim runs in slices of 10 ms and is stopped (SIGSTOP) while the
# manifest is read, so it is killed before the run can end however fast
# the machine: the other ranks cannot finish without it.
manifest="$work/checkpoint/manifest.json"
tries=0
while :; do
  kill -STOP "$pid" 2>/dev/null || { cat "$work/killed.log"; fail "the run ended before the kill"; }
  if [ -f "$manifest" ]; then
    step=$(sed -n 's/^ *"step": *\([0-9][0-9]*\).*/\1/p' "$manifest" | head -n 1)
    in_epoch=$(sed -n 's/^ *"step_in_epoch": *\([0-9][0-9]*\).*/\1/p' "$manifest" | head -n 1)
    # A checkpoint in the middle of an epoch, so that the resume starts there.
    [ -n "$step" ] && [ "$step" -ge "$min_step" ] && [ "${in_epoch:-0}" -ne 0 ] && break
  fi
  kill -CONT "$pid"
  tries=$((tries + 1))
  [ "$tries" -lt 3000 ] || fail "no checkpoint of $min_step steps within 60 s"
  sleep 0.01
done
kill -KILL "$pid" || fail "cannot kill rank $victim (pid $pid)"
echo "killed rank $victim (pid $pid) once the checkpoint of step $step was committed"

wait "$run"
status=$?
trap - EXIT
echo "the killed run exited with status $status after $(elapsed "$killed_at") s"
[ "$status" -ne 0 ] || { cat "$work/killed.log"; fail "the killed run reported success"; }
[ ! -e "$work/resumed.safetensors" ] || fail "the killed run finished before the kill"
unset PIPEVM_KILL_AND_RESUME

# 3. Resume from the last complete checkpoint.
resumed_at=$(seconds)
"$@" --checkpoint "$work/checkpoint" --resume "$work/checkpoint" \
  --save "$work/resumed.safetensors" >"$work/resumed.log" 2>&1 ||
  { cat "$work/resumed.log"; fail "the resumed run failed"; }
grep '^resumed from' "$work/resumed.log"
echo "resumed run: $(elapsed "$resumed_at") s"

# 4. The same bytes.
cmp "$work/uninterrupted.safetensors" "$work/resumed.safetensors" ||
  fail "the resumed weights differ from the uninterrupted run's"
echo "the resumed run saved the uninterrupted run's bytes ($(elapsed "$started") s in all)"
rm -rf "$work"
