#!/bin/sh
# The checker's benchmark series for bench/RESULTS.md ("## check"): the
# checker alone at P=1024 for M = 512 .. 4096 (one process per point, so that
# peak RSS is per point; 1F1B requires M >= P, so its series starts at 1024),
# then the whole command line (parse + expand + check) for the largest point,
# each three times.
#   bench/check/run_series.sh [BUILD_DIR]
set -eu
build=${1:-build-release}
for schedule in gpipe 1f1b; do
  for m in 512 1024 2048 4096; do
    if [ "$schedule" = 1f1b ] && [ "$m" -lt 1024 ]; then continue; fi
    "$build/bench/check/pipevm_check_bench" "schedules/$schedule.pipe" 1024 "$m" 3
  done
done
for i in 1 2 3; do
  /usr/bin/time -f "pipevm check: wall_s=%e cpu_s=%U+%S peak_rss_kib=%M" \
    "$build/pipevm" check schedules/1f1b.pipe --stages 1024 --micro-batches 4096 > /dev/null
done
