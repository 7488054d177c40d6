#!/usr/bin/env bash
# What the watchdog costs in the steady state (bench/RESULTS.md "## multihost",
# "The watchdog's cost"): `dp.pipe --dp 2` on 2 ranks of one host, synthetic
# data, with a pipevm built before the watchdog (BEFORE), and with this one
# (AFTER) at its default timeout (300 s: every wait tests in a loop, the
# all-reduce is non-blocking) and at --timeout 0 (the blocking waits of
# before). The three alternate within each round, so that the machine's
# load changes hit them alike. Each run trains 2 epochs of 128 steps and
# reports the second epoch's seconds (the first warms up and is profiled)
# and the AllReduce's median time from --profile; medians over ROUNDS
# rounds are printed last, with the load average seen by each run.
#   bench/multihost/watchdog.sh BEFORE_PIPEVM AFTER_PIPEVM [ROUNDS]
set -euo pipefail
before=$(readlink -f "${1:?usage: watchdog.sh BEFORE_PIPEVM AFTER_PIPEVM [ROUNDS]}")
after=$(readlink -f "${2:?usage: watchdog.sh BEFORE_PIPEVM AFTER_PIPEVM [ROUNDS]}")
rounds=${3:-10}
here=$(dirname "$(readlink -f "$0")")
schedule=$(readlink -f "$here/../../schedules/dp.pipe")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/config.yaml" <<'EOF'
data: {source: synthetic, synthetic_train: 16384, synthetic_test: 256}
training: {epochs: 2}
EOF

# One run: label, pipevm, extra flags; appends "seconds allreduce_us load" to $work/label.
measure() {
  local label=$1 pipevm=$2 load seconds allreduce
  shift 2
  load=$(cut -d' ' -f1 /proc/loadavg)
  seconds=$(mpirun -n 2 --oversubscribe --allow-run-as-root "$pipevm" run "$schedule" --dp 2 \
    --config "$work/config.yaml" --no-progress --profile "$work/profile.yaml" "$@" |
    sed -n 's/^epoch 2\/2 .* \([0-9.]*\) s\/epoch .*/\1/p')
  allreduce=$(sed -n 's/^allreduce: \([0-9.]*\)/\1/p' "$work/profile.yaml")
  echo "$seconds $allreduce $load" >>"$work/$label"
  printf '%-22s %8s s/epoch  all-reduce %8s us  (load %s)\n' "$label" "$seconds" "$allreduce" "$load"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

for ((round = 1; round <= rounds; round++)); do
  measure before "$before"
  measure after "$after"
  measure after-timeout-0 "$after" --timeout 0
done
echo
printf '%-22s %12s %16s %12s\n' configuration "s/epoch" "all-reduce (us)" "load"
for label in before after after-timeout-0; do
  printf '%-22s %12s %16s %12s\n' "$label" "$(cut -d' ' -f1 "$work/$label" | median)" \
    "$(cut -d' ' -f2 "$work/$label" | median)" \
    "$(cut -d' ' -f3 "$work/$label" | sort -g | sed -n '1p;$p' | paste -sd-)"
done
