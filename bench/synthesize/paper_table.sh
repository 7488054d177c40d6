#!/bin/bash
# The Zero Bubble paper's twelve rows through `pipevm synthesize` at memory
# limits p and 2p (M_B per stage), one markdown row each: the synthesized
# bubble rate (the paper's definition) beside ZB-1p / ZB-2p, and the wall
# time. Results in bench/RESULTS.md ("synthesize").
#   bench/synthesize/paper_table.sh PIPEVM [TIME_LIMIT_SECONDS]
set -euo pipefail
pipevm=${1:?usage: paper_table.sh PIPEVM [TIME_LIMIT_SECONDS]}
time_limit=${2:-0}
rows=$(dirname "$0")/zero_bubble_rows.txt
echo "| model | p | m | limit | synthesized | paper | grew from | wall s |"
echo "|---|---|---|---|---|---|---|---|"
grep -v '^#' "$rows" | while read -r model p m fwd bwd_input bwd_weight comm ratio zb_1p zb_2p; do
  for factor in 1 2; do
    published=$([ "$factor" = 1 ] && echo "ZB-1p $zb_1p" || echo "ZB-2p $zb_2p")
    started=$(date +%s.%N)
    header=$("$pipevm" synthesize -p "$p" -m "$m" \
      --cost "fwd=$fwd,bwd-input=$bwd_input,bwd-weight=$bwd_weight,send=$comm" \
      --weight-memory "$ratio" --memory-limit $((factor * p)) --time-limit "$time_limit" | grep '^#')
    ended=$(date +%s.%N)
    rate=$(grep -o 'Zero Bubble rate [0-9.e-]*' <<<"$header" | awk '{print $4}')
    origin=$(grep -o 'from [^;]*' <<<"$header" | cut -c6-)
    printf '| %s | %s | %s | %sp | %.4f | %s | %s | %.1f |\n' "$model" "$p" "$m" "$factor" "$rate" \
      "$published" "$origin" "$(echo "$ended - $started" | bc)"
  done
done
