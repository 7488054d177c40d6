#!/usr/bin/env bash
# link_down_test.sh PIPEVM SCHEDULE CONFIG REFERENCE WORKDIR
# The watchdog across hosts. pipevm trains SCHEDULE --dp 2 (CONFIG, with
# checkpoints into WORKDIR) on 2 hosts of a fresh test cluster, its stages
# split across them (--layout dp-inner: every activation and gradient
# crosses the link), --timeout 5. Once a checkpoint in the middle of an
# epoch is committed, h2's link goes down. Passes when
#   - every rank, on h1 and on h2, is gone within the timeout + 10 s: the
#     ranks on h2 cannot reach mpirun, each ends by its own watchdog;
#   - both ranks on h1 reported the hang with the watchdog's message, and
#     one names its peer on h2;
#   - with the link back up, mpirun exits non-zero and nothing is left on
#     h2 (Open MPI's daemon there stays while the link is down). A
#     --timeout of 5 s is shorter than the OOB keepalive's 11 s: a rank's
#     abort comes first, and mpirun's order to h2's daemon then waits on
#     TCP's retransmission, not on the keepalive. With a longer --timeout,
#     mpirun ends with the link still down: link_lost_test.sh;
#   - resuming from the last checkpoint on the healed cluster saves the
#     bytes of REFERENCE, the same run uninterrupted.
# The link goes down while a rank on h2 is stopped (SIGSTOP), as
# tests/vm/kill_and_resume.sh kills: so the run cannot end before it
# however fast the machine. Skips (77) where no cluster can be made.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$(readlink -f "$0")")/lib.sh"
on_fresh_cluster 2 "$0" "$@"

pipevm=$1 schedule=$2 config=$3 reference=$4 work=$5
readonly timeout=5 min_step=40
readonly allowed_seconds=$((timeout + 10))
[[ -f $reference ]] || fail "no reference model $reference (the uninterrupted run)"
rm -rf "$work"
mkdir -p "$work"
now_ms() { echo $(($(date +%s%N) / 1000000)); }
run=(run "$schedule" --config "$config" --dp 2 --layout dp-inner --no-progress
  --timeout "$timeout" --checkpoint "$work/checkpoint")

cluster_mpirun -n 4 "$pipevm" "${run[@]}" --save "$work/cut.safetensors" >"$work/cut.log" 2>&1 &
job=$!
trap 'kill -9 "$job" 2>/dev/null || true' EXIT

# A rank on h2, run in slices of 10 ms and stopped while the manifest is read.
victim=$(first_rank_on h2 "$job" "$work/cut.log")
manifest=$work/checkpoint/manifest.json
step=""
for _ in $(seq 3000); do
  kill -STOP "$victim" 2>/dev/null || { cat "$work/cut.log"; fail "the run ended before the link went down"; }
  if [[ -f $manifest ]]; then
    step=$(sed -n 's/^ *"step": *\([0-9][0-9]*\).*/\1/p' "$manifest" | head -n 1)
    in_epoch=$(sed -n 's/^ *"step_in_epoch": *\([0-9][0-9]*\).*/\1/p' "$manifest" | head -n 1)
    if [[ -n $step ]] && ((step >= min_step && ${in_epoch:-0} != 0)); then
      # A few steps on, so that the ranks are past the checkpoint's commit.
      kill -CONT "$victim"
      sleep 0.005
      "$cluster" link h2 down
      break
    fi
  fi
  step=""
  kill -CONT "$victim"
  sleep 0.01
done
down_at=$(now_ms)
kill -CONT "$victim" 2>/dev/null || true
[[ -n $step ]] || fail "no checkpoint of $min_step steps within 60 s"
echo "h2's link down once the checkpoint of step $step was committed"

# Every rank ends by its watchdog, the link still down.
for _ in $(seq $((allowed_seconds * 10 + 100))); do
  left=$(processes_on h1 pipevm; processes_on h2 pipevm)
  [[ -n $left ]] || break
  sleep 0.1
done
gone_ms=$(($(now_ms) - down_at))
echo "every rank gone $gone_ms ms after the link went down (--timeout $timeout)"
echo "on h2 while its link is down: $(for pid in $("$cluster" pids h2); do cat "/proc/$pid/comm"; done | sort | uniq -c | paste -sd' ')"
[[ -z $left ]] || { cat "$work/cut.log"; fail "ranks still running: $left"; }
((gone_ms <= allowed_seconds * 1000)) || fail "the ranks took more than $allowed_seconds s to exit"

# The ranks on h1 (0 and 2) said so, at their instruction in the schedule
# (file:line:col: error: rank R: INSTRUCTION: no progress ...) or, between
# steps, at their step (pipevm run: error: rank R at epoch E, step S/N ...);
# those on h2 are heard once the link is back.
reports=$(grep -E "error: rank [02][: ].*no progress for [0-9.]+ s \(timeout $timeout s\) on host h1: waiting" \
  "$work/cut.log" || true)
printf '%s\n' "$reports"
for rank in 0 2; do
  [[ $reports == *"error: rank $rank"[:\ ]* ]] || { cat "$work/cut.log"; fail "rank $rank on h1 did not report the hang"; }
done
[[ $reports == *"h2"* ]] || fail "no report names a peer on h2"

"$cluster" link h2 up
status=0
for _ in $(seq 600); do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$job" 2>/dev/null && fail "mpirun still ran 60 s after the link came back"
wait "$job" || status=$?
trap - EXIT
grep -v '^epoch' "$work/cut.log"
echo "mpirun exited with status $status $(($(now_ms) - down_at)) ms after the link went down"
((status != 0)) || fail "mpirun reported success"
[[ ! -e $work/cut.safetensors ]] || fail "the run finished in spite of the link"
for _ in $(seq 50); do
  left=$("$cluster" pids h2)
  [[ -n $left ]] || break
  sleep 0.1
done
[[ -z $left ]] || fail "processes left on h2: $left"
echo "nothing left on h2"

# Resume on the healed cluster.
cluster_mpirun -n 4 "$pipevm" "${run[@]}" --resume "$work/checkpoint" \
  --save "$work/resumed.safetensors" >"$work/resumed.log" 2>&1 ||
  { cat "$work/resumed.log"; fail "the resumed run failed"; }
grep -e '^resumed from' -e '^model digest' "$work/resumed.log"
cmp "$work/resumed.safetensors" "$reference" || fail "the resumed run's weights differ from $reference"
echo "the resumed run saved the uninterrupted run's bytes"
rm -rf "$work"
