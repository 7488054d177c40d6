#!/usr/bin/env bash
# same_weights_test.sh HOSTS MAP REFERENCE SAVED [MPIRUN_OPTIONS...] -- PIPEVM_RUN_ARGS...
# pipevm trains across HOSTS hosts of a fresh test cluster, its ranks placed
# by MPIRUN_OPTIONS (Open MPI's mapping); passes when they were placed as
# MAP (e.g. "h1:0,2 h2:1,3": host, ranks) and the model saved is the same
# bytes as REFERENCE, saved by the same run on one host. Skips (77) where
# no cluster can be made.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$(readlink -f "$0")")/lib.sh"
on_fresh_cluster "$1" "$0" "$@"

map=$2 reference=$3 saved=$4
shift 4
options=()
while (($# > 0)) && [[ $1 != -- ]]; do
  options+=("$1")
  shift
done
(($# > 1)) || fail "no pipevm command after --"
shift
[[ -f $reference ]] || fail "no reference model $reference (the single-host run)"
rm -f "$saved"
output=$(mktemp)
trap 'rm -f "$output"' EXIT
status=0
cluster_mpirun --display-map "${options[@]}" "$@" --save "$saved" >"$output" 2>&1 || status=$?
grep -v -e '^[[:space:]]*Process OMPI jobid' -e '^[[:space:]]*Data for' -e '^[[:space:]]*=*$' \
  -e 'JOB MAP' "$output" || true # the map, once, below
((status == 0)) || fail "mpirun exited with status $status"
placed=$(job_map "$output")
[[ $placed == "$map" ]] || fail "ranks placed as '$placed', expected '$map'"
echo "ranks placed as $placed"
cmp "$saved" "$reference" || fail "$saved differs from the single-host run's $reference"
echo "same bytes as $reference"
