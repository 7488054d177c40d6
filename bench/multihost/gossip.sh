#!/usr/bin/env bash
# Gossip against all-reduce across 4 hosts with rate-limited links
# (bench/RESULTS.md, "multihost: gossip across 4 hosts"): for each RATE, a
# test cluster of 4 hosts whose links tbf limits to RATE, one rank per
# host; then ROUNDS rounds of `gossip.pipe --dp 4 --topology ring` and
# `dp.pipe --dp 4`, each a two-epoch run with --profile of the model in
# CONFIG (default link_model.yaml beside this script). The measured step is
# the second epoch's s/epoch / steps; the simulated one is `pipevm
# simulate` of the same schedule with that run's profile, the 8-byte
# latency, the link's payload rate and allreduce=0, as in
# sim_vs_measured.sh. A gossip program carries its exchange into the next
# step and is simulated over two steps: its step is the time between the
# two steps' OptimizerStep on rank 0 (the steady state; the makespan adds
# the last exchange, which nothing overlaps). Medians over the rounds.
# Needs root (network namespaces); a Release build with bench/ built.
#   bench/multihost/gossip.sh BUILD_DIR [ROUNDS] [RATE...]
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source-path=SCRIPTDIR source=links.sh
source "$here/links.sh"
# Off the cluster: this script again on a fresh cluster of 4 hosts per rate.
per_rate_cluster 4 "CONFIG" "$@"
rate=$PIPEVM_RATE
bytes_per_us=$(payload_bytes_per_us "$rate")
pipevm=$build/pipevm
source_dir=$(readlink -f "$here/../..")
across_hosts 4
config=$(readlink -f "${CONFIG:-$here/link_model.yaml}")
samples=$(sed -n 's/^ *synthetic_train: *\([0-9]*\).*/\1/p' "$config")
batch=$(sed -n 's/^ *batch_size: *\([0-9]*\).*/\1/p' "$config")
steps=$((samples / ${batch:-128}))
log=$(mktemp -d)
latency=$(one_way_latency "$build")
echo "rate $rate: payload $bytes_per_us bytes/us; 8-byte one-way latency $latency us; $steps steps per epoch (load $(load))"
links="cross-host-send=$latency,cross-host-bandwidth=$bytes_per_us,allreduce=0"

for ((round = 1; round <= rounds; round++)); do
  for schedule in gossip dp; do
    case $schedule in
      gossip) run=(schedules/gossip.pipe --dp 4 --topology ring) ;;
      dp) run=(schedules/dp.pipe --dp 4) ;;
    esac
    before=$(load)
    profile=$log/$schedule-$round.yaml
    epoch=$(cd "$source_dir" && "${across[@]}" "$pipevm" run "${run[@]}" --config "$config" --epochs 2 \
      --no-progress --profile "$profile" | sed -n 's/.* \([0-9.]*\) s\/epoch .*/\1/p' | tail -n 1)
    measured=$(awk -v e="$epoch" -v s="$steps" 'BEGIN { printf "%.0f", e * 1e6 / s }')
    (cd "$source_dir" && "$pipevm" simulate "${run[0]}" --stages 1 "${run[@]:1}" --config "$config" \
      --micro-batches 4 --hosts 4 --costs "$profile" --cost "$links" --format json \
      --trace "$log/trace.json" >"$log/simulation.json")
    if [[ $schedule == gossip ]]; then
      simulated=$(grep -o '"name":"OptimizerStep","ph":"X","pid":0,"tid":0,"ts":[0-9.e+]*' "$log/trace.json" |
        sed 's/.*"ts"://' | awk 'NR == 1 { first = $1 } NR == 2 { printf "%.0f", $1 - first }')
    else
      simulated=$(sed -n 's/.*"makespan": \([0-9.e+]*\).*/\1/p' "$log/simulation.json" |
        awk '{ printf "%.0f", $1 }')
    fi
    echo "$measured $simulated" >>"$log/$schedule"
    printf '%-6s round %d: measured %s us/step (%s s/epoch), simulated %s us  (load %s)\n' \
      "$schedule" "$round" "$measured" "$epoch" "$simulated" "$before"
  done
done
for schedule in gossip dp; do
  m=$(cut -d' ' -f1 "$log/$schedule" | median)
  s=$(cut -d' ' -f2 "$log/$schedule" | median)
  printf '| %s | %s | %s | %s | %s |\n' "$rate" "$schedule" "$m" "$s" \
    "$(awk -v m="$m" -v s="$s" 'BEGIN { printf "%+.1f%%", (s - m) * 100 / m }')"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$log"
