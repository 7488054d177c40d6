#!/usr/bin/env bash
# shared_cpus_test.sh PIPEVM SCHEDULE CONFIG: dp 2, one rank on each of the 2
# hosts of a fresh test cluster, which share this machine's CPUs. As the
# cluster starts mpirun (no binding: cluster.sh), each rank may run on
# every CPU and pipevm warns of nothing; with `--bind-to core` (Open MPI's
# default for 2 ranks) both hosts' ranks sit on CPU 0 and rank 0 says so
# (PV3010), naming both hosts. Both runs train. Skips (77) where no
# cluster can be made.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$(readlink -f "$0")")/lib.sh"
on_fresh_cluster 2 "$0" "$@"

pipevm=$1 schedule=$2 config=$3
output=$(mktemp)
trap 'rm -f "$output"' EXIT

train() { # mpirun options...
  cluster_mpirun -n 2 --map-by node "$@" "$pipevm" run "$schedule" --config "$config" --dp 2 \
    --epochs 1 --no-progress >"$output" 2>&1 || { cat "$output"; fail "training failed"; }
  cat "$output"
}

[[ $OMPI_MCA_hwloc_base_binding_policy == none ]] ||
  fail "cluster.sh does not turn Open MPI's binding off: '$OMPI_MCA_hwloc_base_binding_policy'"
cpus=$(cluster_mpirun -n 2 --map-by node grep Cpus_allowed_list /proc/self/status | sort -u)
[[ $cpus == "$(grep Cpus_allowed_list /proc/self/status)" ]] ||
  fail "ranks on the cluster are bound: $cpus"

train
grep -q 'model digest' "$output" || fail "no model digest"
! grep -q 'PV3010' "$output" || fail "a warning of shared CPUs without binding"

train --bind-to core
grep -q 'model digest' "$output" || fail "no model digest when bound"
grep -q '^pipevm run: warning: hosts h1 and h2 are one machine (the same kernel boot id), and MPI ranks 0 (h1) and 1 (h2) are both bound to CPU 0 of its .*--bind-to none.* \[PV3010\]$' "$output" ||
  fail "no PV3010 warning naming h1 and h2 when both ranks are bound to CPU 0"
echo "ok: no warning unbound, PV3010 bound"
