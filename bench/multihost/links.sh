# Sourced by sim_vs_measured.sh and gossip.sh, run on a host of a test
# cluster (tests/cluster/cluster.sh): what they share about the cluster's
# links and their figures.
# shellcheck shell=bash disable=SC2034 # across is read by the scripts that source this

# The bytes per microsecond of TCP payload that a link limited by tbf to
# RATE carries: tc's units are decimal (bytes per us = bits per s / 8e6),
# and tbf counts whole Ethernet frames, of which TCP carries MTU - 52 bytes
# (IPv4, TCP and timestamp headers) in MTU + 14 (1448 in 1514 at MTU 1500).
payload_bytes_per_us() { # rate
  local mtu
  mtu=$(cat "/sys/class/net/$CLUSTER_INTERFACE/mtu")
  awk -v r="$1" -v mtu="$mtu" 'BEGIN {
    n = r + 0; u = substr(r, length(n "") + 1)
    m = (u == "gbit") ? 1e9 : (u == "mbit") ? 1e6 : (u == "kbit") ? 1e3 : 1
    printf "%.4g", n * m / 8e6 * (mtu - 52) / (mtu + 14) }'
}

# mpirun of N ranks, one per host, on the cluster's interface.
across_hosts() { # ranks
  across=(mpirun --hostfile "$CLUSTER_HOSTFILE" --map-by node -n "$1"
    --mca btl_tcp_if_include "$CLUSTER_INTERFACE" --mca oob_tcp_if_include "$CLUSTER_INTERFACE"
    --mca mpi_yield_when_idle 1)
}

# The 8-byte one-way latency between the first two hosts, in microseconds.
one_way_latency() { # build
  "${across[@]}" "$1/bench/multihost/pipevm_pingpong" 8 200 9 |
    sed -n 's/.*latency \([0-9.]*\) us.*/\1/p'
}

load() { cut -d' ' -f1 /proc/loadavg; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# The arguments BUILD_DIR [ROUNDS] [RATE...] of the calling script: sets
# build and rounds. Off a cluster, runs the script again on a fresh test
# cluster of HOSTS hosts for each rate (default 1gbit and 200mbit), with
# PIPEVM_RATE and the named environment variables passed on, and exits.
per_rate_cluster() { # hosts "VARIABLE..." build [rounds] [rate...]
  local hosts=$1 variables=$2 name rate
  shift 2
  build=$(readlink -f "${1:?usage: $(basename "$0") BUILD_DIR [ROUNDS] [RATE...]}")
  rounds=${2:-3}
  [[ ${CLUSTER_NAME:-} == "" ]] || return 0
  shift $(($# < 2 ? $# : 2))
  local -a rates=("$@") passed=()
  ((${#rates[@]})) || rates=(1gbit 200mbit)
  for name in $variables; do passed+=("$name=${!name:-}"); done
  for rate in "${rates[@]}"; do
    "$(dirname "${BASH_SOURCE[0]}")/../../tests/cluster/cluster.sh" with "$hosts" --rate "$rate" -- \
      env PIPEVM_RATE="$rate" "${passed[@]}" "$0" "$build" "$rounds"
  done
  exit 0
}
