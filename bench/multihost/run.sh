#!/usr/bin/env bash
# The figures of bench/RESULTS.md "## multihost": two ranks on two hosts of
# the test cluster (tests/cluster/cluster.sh, unlimited links) against the
# same two ranks on one host over TCP (its loopback, `--mca btl tcp,self`),
# each with Open MPI's default wait (spin) and with mpi_yield_when_idle 1:
# the 8-byte ping-pong's one-way latency and `dp.pipe --dp 2` seconds per
# epoch on Fashion-MNIST; and, across hosts with mpi_yield_when_idle 1,
# dp with Open MPI's own TCP flags (its put protocol, which pipevm turns
# off unless told: runtime/mpi_comm.cpp); and dp across hosts with each
# rank bound to a core (`--bind-to core`, what Open MPI did on the test
# cluster before cluster.sh turned binding off: both hosts' ranks on core
# 0). Configurations alternate within each round, so
# that the machine's load changes hit all of them alike; the medians over
# ROUNDS rounds are printed last, with the load average seen by each run.
# Needs root (network namespaces); a Release build with bench/ built.
#   bench/multihost/run.sh BUILD_DIR [ROUNDS] [EPOCHS]
set -euo pipefail
build=$(readlink -f "${1:?usage: run.sh BUILD_DIR [ROUNDS] [EPOCHS]}")
rounds=${2:-3}
epochs=${3:-1}
here=$(dirname "$(readlink -f "$0")")
source_dir=$(readlink -f "$here/../..")

if [[ ${CLUSTER_NAME:-} == "" ]]; then # not yet on the cluster: make one
  exec "$source_dir/tests/cluster/cluster.sh" with 2 -- "$0" "$build" "$rounds" "$epochs"
fi

pingpong=$build/bench/multihost/pipevm_pingpong
pipevm=$build/pipevm
across=(mpirun --hostfile "$CLUSTER_HOSTFILE" --map-by node -n 2
  --mca btl_tcp_if_include "$CLUSTER_INTERFACE" --mca oob_tcp_if_include "$CLUSTER_INTERFACE")
one_host=(mpirun -n 2 --mca btl "tcp,self")
open_mpi_tcp_flags=send,put,inplace,need-ack,need-csum,hetero-rdma # Open MPI 4.1's default
dp=("$pipevm" run "$source_dir/schedules/dp.pipe" --dp 2 --epochs "$epochs" --no-progress)
log=$(mktemp -d)

load() { cut -d' ' -f1 /proc/loadavg; }

# One run: label, then the command; appends "value load" to $log/label.
measure() {
  local label=$1 value
  shift
  local before
  before=$(load)
  case $label in
    pingpong*) value=$("$@" "$pingpong" 8 200 9 | sed -n 's/.*latency \([0-9.]*\) us.*/\1/p') ;;
    dp*) value=$("$@" "${dp[@]}" | sed -n 's/.* \([0-9.]*\) s\/epoch .*/\1/p' | tail -n 1) ;;
  esac
  echo "$value $before" >>"$log/$label"
  printf '%-28s %10s   (load %s)\n' "$label" "$value" "$before"
}

echo "cluster $CLUSTER_NAME, $rounds rounds, $epochs epoch(s) per dp run; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 1; round <= rounds; round++)); do
  for yield in 0 1; do
    measure "pingpong-2hosts-yield$yield" "${across[@]}" --mca mpi_yield_when_idle "$yield"
    measure "pingpong-1host-yield$yield" "${one_host[@]}" --mca mpi_yield_when_idle "$yield"
    measure "dp-2hosts-yield$yield" "${across[@]}" --mca mpi_yield_when_idle "$yield"
    measure "dp-1host-yield$yield" "${one_host[@]}" --mca mpi_yield_when_idle "$yield"
  done
  measure "dp-2hosts-yield1-put" "${across[@]}" --mca mpi_yield_when_idle 1 --mca btl_tcp_flags "$open_mpi_tcp_flags"
  for yield in 0 1; do
    measure "dp-2hosts-yield$yield-bound" "${across[@]}" --mca mpi_yield_when_idle "$yield" --bind-to core
  done
done

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo
echo "| measure | mpi_yield_when_idle | 2 hosts (namespaces) | 1 host, TCP loopback | ratio | load during runs |"
echo "|---|---|---|---|---|---|"
for what in pingpong dp; do
  for yield in 0 1; do
    across_median=$(cut -d' ' -f1 "$log/$what-2hosts-yield$yield" | median)
    one_median=$(cut -d' ' -f1 "$log/$what-1host-yield$yield" | median)
    loads=$(cut -d' ' -f2 "$log/$what-2hosts-yield$yield" "$log/$what-1host-yield$yield" | sort -n |
      sed -n '1p;$p' | paste -sd-)
    unit=$([[ $what == dp ]] && echo "s/epoch" || echo "us one-way")
    printf '| %s (%s) | %s | %s | %s | %s | %s |\n' "$what" "$unit" "$yield" "$across_median" \
      "$one_median" "$(awk -v a="$across_median" -v b="$one_median" 'BEGIN { printf "%.2f", a / b }')" \
      "$loads"
  done
done
put=$(cut -d' ' -f1 "$log/dp-2hosts-yield1-put" | median)
without=$(cut -d' ' -f1 "$log/dp-2hosts-yield1" | median)
printf 'dp across hosts, mpi_yield_when_idle 1: %s s/epoch with the put protocol, %s without (%s)\n' \
  "$put" "$without" "$(awk -v a="$put" -v b="$without" 'BEGIN { printf "%.2fx", a / b }')"
for yield in 0 1; do
  bound=$(cut -d' ' -f1 "$log/dp-2hosts-yield$yield-bound" | median)
  unbound=$(cut -d' ' -f1 "$log/dp-2hosts-yield$yield" | median)
  printf 'dp across hosts, mpi_yield_when_idle %s: %s s/epoch bound to a core, %s unbound (%s)\n' \
    "$yield" "$bound" "$unbound" "$(awk -v a="$bound" -v b="$unbound" 'BEGIN { printf "%.2fx", a / b }')"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$log"
