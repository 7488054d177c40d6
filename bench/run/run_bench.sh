#!/bin/sh
# The figures of bench/RESULTS.md "## run": seconds per epoch of `pipevm run`
# on Fashion-MNIST (the default model and batch: 128 in 4 micro-batches)
# for 1 rank, --dp 2 on 2 ranks, GPipe and 1F1B over 2 stages, and GPipe
# over 4 stages (4 ranks on the 2 cores) with both wait modes; the
# median over RUNS runs of the last epoch's training time (evaluation
# excluded), all in one session so that they share one baseline.
#   bench/run/run_bench.sh BUILD_DIR [RUNS] [EPOCHS]
set -eu
build=${1:?usage: run_bench.sh BUILD_DIR [RUNS] [EPOCHS]}
runs=${2:-3}
epochs=${3:-2}
mpi="mpiexec --oversubscribe --allow-run-as-root -n"
cd "$build"

# s/epoch of the last epoch of one run of: NP ARGS...
last_epoch_seconds() {
  np=$1
  shift
  $mpi "$np" ./pipevm "$@" --epochs "$epochs" --no-progress |
    sed -n 's/.* \([0-9.]*\) s\/epoch .*/\1/p' | tail -n 1
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

measure() {
  label=$1
  shift
  times=""
  i=0
  while [ "$i" -lt "$runs" ]; do
    times="$times $(last_epoch_seconds "$@")"
    i=$((i + 1))
  done
  m=$(printf '%s\n' $times | median)
  printf '| %s | %s | %s |\n' "$label" "$m" "$(echo $times)"
  echo "$m" > "/tmp/pipevm_bench_$(echo "$label" | tr -c 'a-z0-9' _)"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| configuration | s/epoch (median) | runs |"
echo "|---|---|---|"
measure "1 rank, gpipe (sequential)" 1 schedules/gpipe.pipe
measure "2 ranks, gpipe --dp 2" 2 schedules/gpipe.pipe --dp 2
measure "2 ranks, gpipe, 2 stages" 2 schedules/gpipe.pipe
measure "2 ranks, 1f1b, 2 stages" 2 schedules/1f1b.pipe
measure "4 ranks, gpipe, 4 stages" 4 schedules/gpipe.pipe
measure "4 ranks, gpipe, 4 stages, --mpi-wait spin" 4 schedules/gpipe.pipe --mpi-wait spin
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
