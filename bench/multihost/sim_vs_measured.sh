#!/usr/bin/env bash
# Simulated against measured step time across two hosts with rate-limited
# links (bench/RESULTS.md, "multihost: simulated vs measured"): for each
# RATE, a test cluster of 2 hosts whose links tbf limits to RATE; the
# 8-byte one-way latency between them (pipevm_pingpong); then ROUNDS rounds
# of `dp.pipe --dp 2` and `1f1b.pipe` on 2 stages, one rank per host, each
# a two-epoch run with --profile of the model in CONFIG (default
# link_model.yaml beside this script: synthetic data, batch 512, 10 steps
# per epoch; CONFIG=none trains the default model on Fashion-MNIST, 398
# steps; BATCH=N overrides the batch size). The measured step is the second
# epoch's s/epoch / steps (the first epoch's first step also opens Open
# MPI's connections); the simulated one is `pipevm simulate` of the same
# schedule with that run's profile (compute, per stage), the measured
# latency, the link's payload rate and allreduce=0 (the profile's
# all-reduce is its transfer, which the link model prices). The payload
# rate is the tbf rate x the TCP payload of a frame over the frame that tbf
# counts: MTU - 52 bytes of IPv4, TCP and timestamp headers over MTU + 14
# of Ethernet header (1448 / 1514 at MTU 1500). Medians over the rounds.
# Needs root (network namespaces); a Release build with bench/ built.
#   bench/multihost/sim_vs_measured.sh BUILD_DIR [ROUNDS] [RATE...]
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source-path=SCRIPTDIR source=links.sh
source "$here/links.sh"
# Off the cluster: this script again on a fresh cluster of 2 hosts per rate.
per_rate_cluster 2 "CONFIG BATCH" "$@"
rate=$PIPEVM_RATE
bytes_per_us=$(payload_bytes_per_us "$rate")
mtu=$(cat "/sys/class/net/$CLUSTER_INTERFACE/mtu")
pipevm=$build/pipevm
source_dir=$(readlink -f "$here/../..")
across_hosts 2
config=${CONFIG:-$here/link_model.yaml}
if [[ $config == none ]]; then
  model=() samples=51000 batch=128 # Fashion-MNIST's 51,000 training samples
else
  model=(--config "$(readlink -f "$config")")
  samples=$(sed -n 's/^ *synthetic_train: *\([0-9]*\).*/\1/p' "$config")
  batch=$(sed -n 's/^ *batch_size: *\([0-9]*\).*/\1/p' "$config")
fi
batch=${BATCH:-${batch:-128}}
model+=(--batch-size "$batch")
steps=$((samples / batch))
log=$(mktemp -d)
latency=$(one_way_latency "$build")
echo "rate $rate: payload $bytes_per_us bytes/us at MTU $mtu; 8-byte one-way latency $latency us; batch $batch, $steps steps per epoch (load $(load))"
links="cross-host-send=$latency,cross-host-bandwidth=$bytes_per_us,allreduce=0"

for ((round = 1; round <= rounds; round++)); do
  for schedule in dp 1f1b; do
    case $schedule in
      dp) run=(schedules/dp.pipe --dp 2) simulate=(schedules/dp.pipe --stages 1 --dp 2) ;;
      1f1b) run=(schedules/1f1b.pipe) simulate=(schedules/1f1b.pipe --stages 2) ;;
    esac
    before=$(load)
    profile=$log/$schedule-$round.yaml
    epoch=$(cd "$source_dir" && "${across[@]}" "$pipevm" run "${run[@]}" "${model[@]}" --epochs 2 --no-progress \
      --profile "$profile" | sed -n 's/.* \([0-9.]*\) s\/epoch .*/\1/p' | tail -n 1)
    measured=$(awk -v e="$epoch" -v s="$steps" 'BEGIN { printf "%.0f", e * 1e6 / s }')
    simulated=$(cd "$source_dir" && "$pipevm" simulate "${simulate[@]}" "${model[@]}" --micro-batches 4 \
      --hosts 2 --costs "$profile" --cost "$links" --format json |
      sed -n 's/.*"makespan": \([0-9.e+]*\).*/\1/p')
    simulated=$(awk -v v="$simulated" 'BEGIN { printf "%.0f", v }')
    echo "$measured $simulated" >>"$log/$schedule"
    printf '%-5s round %d: measured %s us/step (%s s/epoch), simulated %s us  (load %s)\n' \
      "$schedule" "$round" "$measured" "$epoch" "$simulated" "$before"
  done
done
for schedule in dp 1f1b; do
  m=$(cut -d' ' -f1 "$log/$schedule" | median)
  s=$(cut -d' ' -f2 "$log/$schedule" | median)
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$rate" "$batch" "$schedule" "$latency" "$m" "$s" \
    "$(awk -v m="$m" -v s="$s" 'BEGIN { printf "%+.1f%%", (s - m) * 100 / m }')"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$log"
