# lib.sh: what the multi-host tests share; sourced by tests/cluster/*_test.sh.
# A test script runs itself on a fresh cluster (on_fresh_cluster), then on
# its first host runs mpirun across the hosts as docs/multihost.md writes
# it. Leaves out the cluster itself (cluster.sh).
# shellcheck shell=bash
cluster=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/cluster.sh

# Re-runs the calling script on host h1 of a fresh cluster of HOSTS hosts
# (removed however the script ends); returns when already on one. Exit
# status 77 (CTest's skip) with the reason where no cluster can be made.
on_fresh_cluster() { # hosts script args...
  [[ -z ${CLUSTER_NAME:-} ]] || return 0
  local hosts=$1
  shift
  exec "$cluster" with "$hosts" -- "$@"
}

# mpirun across the cluster: its hostfile, its interface for messages (btl)
# and for Open MPI's own traffic (oob), ranks that yield while they wait
# (all the hosts share this machine's cores: docs/multihost.md). Remote
# ranks see only what mpirun forwards: under the sanitizer preset, its
# options.
cluster_mpirun() {
  local forward=()
  [[ -z ${ASAN_OPTIONS:-} ]] || forward=(-x ASAN_OPTIONS)
  mpirun --hostfile "$CLUSTER_HOSTFILE" --mca btl_tcp_if_include "$CLUSTER_INTERFACE" \
    --mca oob_tcp_if_include "$CLUSTER_INTERFACE" --mca mpi_yield_when_idle 1 "${forward[@]}" "$@"
}

# Where mpirun --display-map put the ranks: "h1:0,2 h2:1,3" (mpirun may
# print the map more than once).
job_map() { # file with mpirun's output
  awk '/Data for node:/ { node = $4 }
       /Process rank:/ { for (i = 1; i < NF; ++i) if ($i == "rank:") print node, $(i + 1) }' "$1" |
    sort -u -k1,1 -k2,2n |
    awk '{ if ($1 in ranks) ranks[$1] = ranks[$1] "," $2; else ranks[$1] = $2 }
         END { for (node in ranks) print node ":" ranks[node] }' |
    sort | paste -sd' '
}

# Process ids of the programs named NAME running on HOST.
processes_on() { # host name
  local pid
  for pid in $("$cluster" pids "$1"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) != "$2" ]] || echo "$pid"
  done
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
