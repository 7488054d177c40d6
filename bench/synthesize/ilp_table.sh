#!/bin/bash
# The instances of docs/synthesize.md ("Local search or ILP") through
# pipevm_ilp_vs_search: the library's search at 1 s and 10 s beside the
# time-indexed ILP under CBC (60 s each, single-threaded), cold; then, where
# the search leaves a gap, CBC started from the search's schedule and CBC
# asked for a span one step shorter (infeasible would prove the search
# optimal). One markdown table on stdout.
#   bench/synthesize/ilp_table.sh BENCH [ILP_SECONDS]
set -euo pipefail
bench=${1:?usage: ilp_table.sh BENCH [ILP_SECONDS]}
seconds=${2:-60}
even="fwd=1,bwd-input=1,bwd-weight=1"
dear_forward="fwd=2,bwd-input=1,bwd-weight=1"
fused="fwd=1,bwd=2,send=0.1"
# CBC checks its time limit between phases only: a run past three times the
# limit is cut and gets a row saying so.
run() {
  timeout $((3 * seconds + 15)) "$bench" --weight-memory 0.4 --search-seconds 1,10 \
    --ilp-seconds "$seconds" "$@" || echo "| $* | cut after $((3 * seconds + 15)) s |"
}
run --header -p 2 -m 4 --cost "$even" --memory-limit 2
for instance in "2 4 $even" "4 8 $even" "4 8 $dear_forward" "4 12 $dear_forward"; do
  read -r p m cost <<<"$instance"
  for limit in "$p" $((2 * p)); do
    [ "$p $m $cost $limit" = "2 4 $even 2" ] && continue
    run -p "$p" -m "$m" --cost "$cost" --memory-limit "$limit"
  done
done
run -p 2 -m 4 --cost "$fused" --memory-limit 2
run -p 4 -m 8 --cost "$fused" --memory-limit 4
for instance in "4 8 $dear_forward" "4 12 $dear_forward" "4 8 $fused"; do
  read -r p m cost <<<"$instance"
  run -p "$p" -m "$m" --cost "$cost" --memory-limit "$p" --warm-start
  run -p "$p" -m "$m" --cost "$cost" --memory-limit "$p" --strictly-shorter
done
