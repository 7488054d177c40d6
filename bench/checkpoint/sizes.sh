#!/bin/sh
# sizes.sh PIPEVM [WORKDIR]: the bytes each rank writes into a checkpoint,
# against its share of the model and optimizer state, for the layouts of
# bench/RESULTS.md ("checkpoint sizes"). One epoch of model.yaml (the
# default model with Adam) per layout, a checkpoint after it; prints one
# line per rank: layout, rank, bytes of its file (0: it wrote none), and
# the manifest's bytes once per layout.
set -eu
pipevm=$1
work=${2:-/tmp/pipevm-checkpoint-sizes}
here=$(dirname "$0")
schedules=$here/../../schedules
mpi="mpirun --oversubscribe --allow-run-as-root"
measure() { # label ranks schedule [flags]...
  label=$1 ranks=$2 schedule=$3
  shift 3
  rm -rf "$work/$label"
  $mpi -n "$ranks" "$pipevm" run "$schedules/$schedule.pipe" --config "$here/model.yaml" \
    --no-progress --checkpoint "$work/$label" "$@" >/dev/null
  for rank in $(seq 0 $((ranks - 1))); do
    file=$(printf '%s/step-*/rank-%04d.safetensors' "$work/$label" "$rank")
    # shellcheck disable=SC2086 # the glob names one file or none
    bytes=$(stat -c %s $file 2>/dev/null || echo 0)
    echo "$label rank $rank $bytes"
  done
  echo "$label manifest $(stat -c %s "$work/$label/manifest.json")"
}
measure sequential 1 gpipe
measure dp2 2 dp --dp 2
measure fsdp_x2 2 fsdp --dp 2
measure 1f1b_x2_dp2 4 1f1b --dp 2
measure 1f1b_x4 4 1f1b
rm -rf "$work"
