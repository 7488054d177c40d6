#!/bin/sh
# Two builds of `pipevm check` side by side on one schedule, for a shared,
# noisy machine: the two binaries run alternately, ROUNDS times each, so
# that load drifts hit both alike; it prints every round, the medians of
# wall and CPU (user + system) time and peak RSS, and new / old. Then one
# run of each under callgrind at a smaller size (instructions executed do
# not depend on the load): the whole command, and the inclusive count of
# `pipevm::check` (parse and expansion excluded). It leaves out perf
# (bench/RESULTS.md says how the profiles were taken) and does not build.
#   bench/check/side_by_side.sh OLD_PIPEVM NEW_PIPEVM SCHEDULE [ROUNDS] [P M] [CALLGRIND_P CALLGRIND_M]
# Defaults: 7 rounds at P = 1024, M = 4096; callgrind at P = 256, M = 1024
# (CALLGRIND_P = 0 skips it).
set -eu
if [ $# -lt 3 ]; then
  echo "usage: $0 OLD_PIPEVM NEW_PIPEVM SCHEDULE [ROUNDS] [P M] [CALLGRIND_P CALLGRIND_M]" >&2
  exit 2
fi
old=$1 new=$2 schedule=$3
rounds=${4:-7} stages=${5:-1024} micro_batches=${6:-4096}
cg_stages=${7:-256} cg_micro_batches=${8:-1024}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# One timed check: appends "wall cpu rss_kib" to $scratch/NAME.
timed() {
  /usr/bin/time -o "$scratch/last" -f "%e %U %S %M" \
    "$2" check "$schedule" --stages "$stages" --micro-batches "$micro_batches" > /dev/null
  awk '{ printf "%.2f %.2f %d\n", $1, $2 + $3, $4 }' "$scratch/last" >> "$scratch/$1"
}

echo "pipevm check $schedule --stages $stages --micro-batches $micro_batches"
echo "old: $old"
echo "new: $new"
echo "round  old wall  old cpu  new wall  new cpu   (s)"
i=1
while [ "$i" -le "$rounds" ]; do
  # Alternate which goes first, so neither always runs on a warmer cache.
  if [ $((i % 2)) -eq 1 ]; then timed old "$old"; timed new "$new"; else timed new "$new"; timed old "$old"; fi
  printf "%5d  %8s  %7s  %8s  %7s\n" "$i" \
    "$(sed -n "${i}p" "$scratch/old" | cut -d' ' -f1)" "$(sed -n "${i}p" "$scratch/old" | cut -d' ' -f2)" \
    "$(sed -n "${i}p" "$scratch/new" | cut -d' ' -f1)" "$(sed -n "${i}p" "$scratch/new" | cut -d' ' -f2)"
  i=$((i + 1))
done

# Median of column $2 of file $1.
median() {
  cut -d' ' -f"$2" "$1" | sort -n | awk '{ v[NR] = $1 } END {
    if (NR % 2) print v[(NR + 1) / 2]; else printf "%.10g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
for column in 1 2 3; do
  o=$(median "$scratch/old" "$column")
  n=$(median "$scratch/new" "$column")
  name=$(echo "wall_s cpu_s peak_rss_kib" | cut -d' ' -f"$column")
  awk -v name="$name" -v o="$o" -v n="$n" \
    'BEGIN { printf "median %-13s old %-10s new %-10s new/old %.3f\n", name, o, n, n / o }'
done

[ "$cg_stages" -gt 0 ] || exit 0
command -v valgrind > /dev/null || { echo "valgrind not found: no callgrind counts" >&2; exit 0; }
echo "callgrind: pipevm check $schedule --stages $cg_stages --micro-batches $cg_micro_batches"
for which in old new; do
  binary=$old
  [ "$which" = new ] && binary=$new
  valgrind --tool=callgrind --callgrind-out-file="$scratch/$which.callgrind" \
    "$binary" check "$schedule" --stages "$cg_stages" --micro-batches "$cg_micro_batches" \
    > /dev/null 2> "$scratch/$which.valgrind"
  total=$(awk '/^totals:/ { print $2 }' "$scratch/$which.callgrind")
  checker=$(callgrind_annotate --inclusive=yes "$scratch/$which.callgrind" 2> /dev/null |
    awk '/pipevm::check\(/ { gsub(",", "", $1); print $1; exit }')
  echo "$which Ir: total $total, pipevm::check ${checker:-0}"
  echo "$total ${checker:-0}" > "$scratch/$which.ir"
done
awk 'NR == 1 { t = $1; c = $2 } NR == 2 {
  printf "new/old Ir: total %.3f, pipevm::check %s\n", $1 / t, (c > 0 ? sprintf("%.3f", $2 / c) : "?") }' \
  "$scratch/old.ir" "$scratch/new.ir"
