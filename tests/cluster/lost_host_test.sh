#!/usr/bin/env bash
# lost_host_test.sh PIPEVM SCHEDULES CONFIG WORKDIR
# A host lost for good, and the job continued on the host that is left
# (docs/multihost.md, "When a host is lost: continue on the hosts left").
# pipevm trains 1F1B on 4 stages, 2 hosts x 2 ranks of a fresh test cluster
# (CONFIG: a checkpoint every 9 steps), --timeout above the OOB keepalive's
# 11 s. Once a checkpoint is committed, h2's link goes down and stays down.
# Passes when
#   - mpirun exits non-zero within the timeout + 15 s;
#   - the recovery, as docs/multihost.md writes it (pipevm synthesize for
#     the 2 ranks left, mpirun on h1 alone with --resume), finishes the
#     training, saying what changed;
#   - its final test accuracy is within 0.5 points of the same training
#     uninterrupted (4 ranks on h1 and h2, before the link goes down).
# The link goes down while a rank on h2 is stopped (SIGSTOP), so that the
# run cannot end first however fast the machine. Skips (77) where no
# cluster can be made.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$(readlink -f "$0")")/lib.sh"
on_fresh_cluster 2 "$0" "$@"

pipevm=$1 schedules=$2 config=$3 work=$4
readonly timeout=12
readonly allowed_seconds=$((timeout + 15))
rm -rf "$work"
mkdir -p "$work"
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# The test accuracy of the last epoch a log reports, in percent.
final_accuracy() { sed -n 's/^epoch .*test accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -n 1; }
run=(run "$schedules/1f1b.pipe" --config "$config" --no-progress --timeout "$timeout")

cluster_mpirun -n 4 "$pipevm" "${run[@]}" >"$work/uninterrupted.log" 2>&1 ||
  { cat "$work/uninterrupted.log"; fail "the uninterrupted run failed"; }
expected=$(final_accuracy "$work/uninterrupted.log")
[[ -n $expected ]] || { cat "$work/uninterrupted.log"; fail "no test accuracy in the uninterrupted run"; }
echo "uninterrupted: test accuracy $expected%"

cluster_mpirun -n 4 "$pipevm" "${run[@]}" --checkpoint "$work/checkpoint" >"$work/cut.log" 2>&1 &
job=$!
trap 'kill -9 "$job" 2>/dev/null || true' EXIT
victim=$(first_rank_on h2 "$job" "$work/cut.log")
step=""
for _ in $(seq 3000); do
  kill -STOP "$victim" 2>/dev/null || { cat "$work/cut.log"; fail "the run ended before the link went down"; }
  if [[ -f $work/checkpoint/manifest.json ]]; then
    step=$(sed -n 's/^ *"step": *\([0-9][0-9]*\).*/\1/p' "$work/checkpoint/manifest.json" | head -n 1)
    if [[ -n $step ]]; then
      "$cluster" link h2 down
      kill -CONT "$victim"
      break
    fi
  fi
  kill -CONT "$victim"
  sleep 0.01
done
down_at=$(now_ms)
[[ -n $step ]] || fail "no checkpoint within 60 s"
echo "h2's link down for good once the checkpoint of step $step was committed"

for _ in $(seq $((allowed_seconds * 10))); do
  kill -0 "$job" 2>/dev/null || break
  (($(now_ms) - down_at <= allowed_seconds * 1000)) || break
  sleep 0.1
done
kill -0 "$job" 2>/dev/null && fail "mpirun still ran $(($(now_ms) - down_at)) ms after the link went down"
status=0
wait "$job" || status=$?
trap - EXIT
echo "the job ended (mpirun status $status) $(($(now_ms) - down_at)) ms after the link went down (--timeout $timeout)"
((status != 0)) || fail "mpirun reported success"
for _ in $(seq 50); do
  [[ -n $(processes_on h1 pipevm) ]] || break
  sleep 0.1
done

# The recovery: a schedule for the 2 ranks left, then h1 alone.
grep '^h1 ' "$CLUSTER_HOSTFILE" >"$work/hosts.left"
(
  set -x
  "$pipevm" synthesize -p 2 -m 4 -o "$work/left.pipe"
  mpirun --hostfile "$work/hosts.left" -n 2 --mca btl_tcp_if_include "$CLUSTER_INTERFACE" \
    --mca oob_tcp_if_include "$CLUSTER_INTERFACE" --mca mpi_yield_when_idle 1 \
    "$pipevm" run "$work/left.pipe" --config "$config" --no-progress \
    --resume "$work/checkpoint" --checkpoint "$work/checkpoint"
) >"$work/recovered.log" 2>&1 || { cat "$work/recovered.log"; fail "the recovery failed"; }
grep -e '^+' -e '^resumed from' -e '^epoch' "$work/recovered.log"
grep -q '^resumed from .*; now synthesized' "$work/recovered.log" ||
  fail "the resumed run did not say what changed"
got=$(final_accuracy "$work/recovered.log")
[[ -n $got ]] || fail "no test accuracy in the recovered run"
awk -v a="$got" -v b="$expected" 'BEGIN { d = a - b; exit !(d <= 0.5 && d >= -0.5) }' ||
  fail "test accuracy $got% after the recovery, $expected% uninterrupted"
echo "recovered on h1 alone: test accuracy $got% (uninterrupted $expected%)"
rm -rf "$work"
