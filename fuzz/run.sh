#!/usr/bin/env bash
# Runs the libFuzzer targets of a fuzz build for a fixed time each, from
# their seeds (fuzz/corpus/NAME, the SEEDS directories of
# fuzz/CMakeLists.txt, the crash reproducers of fuzz/regressions/NAME), with
# their dictionaries. Fails on the first finding: the input that failed is
# left as BUILD/fuzz/findings/NAME/crash-* (or leak-, timeout-, oom-).
#
#   fuzz/run.sh [-t SECONDS] [-b BUILD_DIR] [NAME ...]    (default: 30 s, build/fuzz, all)
#   fuzz/run.sh -l [-b BUILD_DIR]                          (the targets' names, one a line)
#
# The targets are those of fuzz/CMakeLists.txt, as the build lists them:
# pipe, run_config, costs, safetensors, checkpoint, torch_csv, torch_trace, lsp,
# topology.
#
# New inputs the fuzzer finds interesting go to BUILD/fuzz/work/NAME, not
# into the checked-in corpus; docs/fuzzing.md says how to minimize and keep
# them. The last line of each run (inputs, coverage, corpus) is printed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=30
build=build/fuzz
list_only=0
while getopts "t:b:l" option; do
  case "$option" in
    t) seconds="$OPTARG" ;;
    b) build="$OPTARG" ;;
    l) list_only=1 ;;
    *) echo "usage: fuzz/run.sh [-t SECONDS] [-b BUILD_DIR] [-l] [NAME ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))

list="$build/fuzz/fuzz-targets.txt"
if [[ ! -f "$list" ]]; then
  echo "no $list: configure and build the fuzz preset first" >&2
  exit 2
fi

if [[ "$list_only" -eq 1 ]]; then
  cut -d'|' -f1 "$list"
  exit 0
fi

status=0
ran=0
while IFS='|' read -r name executable dict seeds; do
  [[ -n "$name" ]] || continue
  if [[ $# -gt 0 && ! " $* " == *" $name "* ]]; then continue; fi
  work="$build/fuzz/work/$name"
  findings="$build/fuzz/findings/$name"
  mkdir -p "$work" "$findings"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192
        -print_final_stats=1 -artifact_prefix="$findings/")
  [[ -n "$dict" ]] && args+=(-dict="$dict")
  regressions="fuzz/regressions/$name"
  seed_dirs=($seeds)
  [[ -d "$regressions" ]] && seed_dirs+=("$regressions")
  echo "== fuzz $name: ${seconds}s from ${seed_dirs[*]}"
  log="$build/fuzz/work/$name.log"
  if "$executable" "${args[@]}" "$work" "${seed_dirs[@]}" >"$log" 2>&1; then
    grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n1 || true
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" || true
  else
    echo "fuzz $name: FINDING (log: $log, inputs: $findings)" >&2
    tail -n 40 "$log" >&2
    status=1
  fi
  ran=$((ran + 1))
done <"$list"

if [[ "$ran" -eq 0 ]]; then
  echo "no fuzz target matched: $*" >&2
  exit 2
fi
exit "$status"
