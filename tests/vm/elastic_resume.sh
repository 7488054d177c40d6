#!/bin/sh
# elastic_resume.sh WORKDIR COMPARE PIPEVM MPIEXEC "A" "B" -- FLAGS...
#
# One epoch under layout A (`MPIEXEC -n N pipevm run SCHEDULE [flags]`,
# A given as "N SCHEDULE [flags]"), a checkpoint after it, then the second
# epoch resumed under layout B; the saved model must be within 1e-5 of an
# uninterrupted 2-epoch sequential run (one process, the same micro-batches),
# and the resumed run must say what changed. FLAGS go to every run.
set -u
work=$1 compare=$2 pipevm=$3 mpiexec=$4 from=$5 to=$6
shift 6
[ "$1" = "--" ] && shift
fail() {
  echo "elastic_resume: $*" >&2
  exit 1
}
launch() { # NP SCHEDULE [flags]...: pipevm run under mpiexec
  np=$1
  schedule=$2
  shift 2
  $mpiexec -n "$np" --oversubscribe --allow-run-as-root "$pipevm" run \
    "$(dirname "$0")/../../schedules/$schedule.pipe" "$@"
}

rm -rf "$work"
mkdir -p "$work" || fail "cannot create $work"
# shellcheck disable=SC2086 # A and B are word lists on purpose
launch $from "$@" --epochs 1 --checkpoint "$work/checkpoint" --checkpoint-every 0 >"$work/a.log" 2>&1 ||
  { cat "$work/a.log"; fail "the run under A ($from) failed"; }
# shellcheck disable=SC2086
launch $to "$@" --epochs 2 --resume "$work/checkpoint" --save "$work/resumed.safetensors" \
  >"$work/b.log" 2>&1 || { cat "$work/b.log"; fail "the resumed run under B ($to) failed"; }
grep '^resumed from' "$work/b.log" || fail "the resumed run did not say what changed"
grep -q '; now ' "$work/b.log" || fail "no '; now ...' on the resumed line"
"$pipevm" run "$(dirname "$0")/../../schedules/gpipe.pipe" "$@" --epochs 2 \
  --save "$work/sequential.safetensors" >"$work/sequential.log" 2>&1 ||
  { cat "$work/sequential.log"; fail "the sequential run failed"; }
"$compare" "$work/resumed.safetensors" "$work/sequential.safetensors" 1e-5 ||
  fail "the resumed run's weights are not the sequential run's"
rm -rf "$work"
