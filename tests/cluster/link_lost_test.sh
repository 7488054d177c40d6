#!/usr/bin/env bash
# link_lost_test.sh PIPEVM SCHEDULE WORKDIR
# A host lost for good, with the launch line docs/multihost.md writes
# (cluster_mpirun: Open MPI's OOB keepalive 5 s, then 3 probes 2 s apart).
# pipevm trains SCHEDULE --dp 2 on 2 hosts of a fresh test cluster, its
# stages split across them, with a --timeout longer than the keepalive's
# 11 s, as the default 300 s is; once it trains, h2's link goes down and
# stays down. Passes when
#   - mpirun exits non-zero within the timeout + 15 s, saying it lost the
#     daemon on h2;
#   - nothing is left on h2 (its daemon ends its ranks by the same
#     keepalive) nor on h1.
# The watchdog's own reports, and mpirun when a rank aborts first:
# link_down_test.sh. Skips (77) where no cluster can be made.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$(readlink -f "$0")")/lib.sh"
on_fresh_cluster 2 "$0" "$@"

pipevm=$1 schedule=$2 work=$3
readonly timeout=20
readonly allowed_seconds=$((timeout + 15))
rm -rf "$work"
mkdir -p "$work"
log=$work/lost.log
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Far more epochs than can finish: the run ends only by the lost link.
cluster_mpirun -n 4 "$pipevm" run "$schedule" --data synthetic --dp 2 --layout dp-inner \
  --epochs 10000 --no-progress --timeout "$timeout" >"$log" 2>&1 &
job=$!
trap 'kill -9 "$job" 2>/dev/null || true' EXIT

for _ in $(seq 600); do
  kill -0 "$job" 2>/dev/null || { cat "$log"; fail "the run ended before the link went down"; }
  [[ -z $(processes_on h2 pipevm) ]] || ! grep -q '^epoch' "$log" || break
  sleep 0.05
done
grep -q '^epoch' "$log" || fail "no epoch within 30 s"
"$cluster" link h2 down
down_at=$(now_ms)
echo "h2's link down while training; it stays down"

for _ in $(seq $((allowed_seconds * 10))); do
  kill -0 "$job" 2>/dev/null || break
  (($(now_ms) - down_at <= allowed_seconds * 1000)) || break
  sleep 0.1
done
kill -0 "$job" 2>/dev/null &&
  { grep -v '^epoch' "$log"; fail "mpirun still ran $(($(now_ms) - down_at)) ms after the link went down (--timeout $timeout)"; }
status=0
wait "$job" || status=$?
trap - EXIT
echo "mpirun exited with status $status $(($(now_ms) - down_at)) ms after the link went down (--timeout $timeout)"
((status != 0)) || fail "mpirun reported success"
grep -v '^epoch' "$log"
grep -q 'lost communication with a remote daemon' "$log" || fail "mpirun did not say it lost a daemon"
grep -q 'Remote daemon: .* on node h2' "$log" || fail "mpirun did not name h2"

for _ in $(seq 50); do
  left=$("$cluster" pids h2; processes_on h1 pipevm)
  [[ -n $left ]] || break
  sleep 0.1
done
[[ -z $left ]] || fail "left with the link down: $(for pid in $left; do cat "/proc/$pid/comm"; done | paste -sd' ')"
echo "nothing left on h1 or h2 $(($(now_ms) - down_at)) ms after the link went down, the link still down"
rm -rf "$work"
