#!/usr/bin/env bash
# What a portable build costs: runs bench_runtime_epoch from several build
# directories (one per PIPEVM_ARCH) in turn, ROUNDS times, so that the load
# of a shared machine falls on all of them alike, and prints per build the
# median CPU seconds of all its epochs, the GEMM chain's rate and the ratio
# to the first build. Results: bench/RESULTS.md ("Portable builds").
#
#   bench/runtime/compare_arch.sh ROUNDS EPOCHS BUILD_DIR...
#   bench/runtime/compare_arch.sh 5 3 build/arch-native build/arch-x86-64-v3 ...
set -euo pipefail
rounds=$1 epochs=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  for dir in "$@"; do
    name=$(basename "$dir")
    "$dir/bench/runtime/bench_runtime_epoch" --epochs "$epochs" > "$out/run.txt"
    # epoch lines: epoch wall_s cpu_s samples/s ...; the chain: "GEMM chain alone: X GFLOP/s"
    awk '$1 ~ /^[0-9]+$/ && NF == 7 { print $3 }' "$out/run.txt" >> "$out/$name.cpu"
    sed -n 's/^GEMM chain alone: \([0-9.]*\) GFLOP.*/\1/p' "$out/run.txt" >> "$out/$name.gflops"
  done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf "%-24s %8s %14s %16s %10s\n" build epochs "median cpu_s" "chain GFLOP/s" "x first"
first=""
for dir in "$@"; do
  name=$(basename "$dir")
  cpu=$(median "$out/$name.cpu")
  first=${first:-$cpu}
  printf "%-24s %8d %14.3f %16.1f %10.2f\n" "$name" "$(wc -l < "$out/$name.cpu")" "$cpu" \
    "$(median "$out/$name.gflops")" "$(awk -v a="$cpu" -v b="$first" 'BEGIN { print a / b }')"
done
