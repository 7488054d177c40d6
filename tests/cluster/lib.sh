# lib.sh: what the multi-host tests share; sourced by tests/cluster/*_test.sh.
# A test script runs itself on a fresh cluster (on_fresh_cluster), then on
# its first host runs mpirun across the hosts as docs/multihost.md writes
# it. Leaves out the cluster itself (cluster.sh).
# shellcheck shell=bash
cluster=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/cluster.sh

# Re-runs the calling script on host h1 of a fresh cluster of HOSTS hosts
# (HOSTSxSLOTS: with SLOTS slots each; default 2), removed however the
# script ends; returns when already on one. Exit status 77 (CTest's skip)
# with the reason where no cluster can be made.
on_fresh_cluster() { # hosts[xslots] script args...
  [[ -z ${CLUSTER_NAME:-} ]] || return 0
  local hosts=${1%x*} slots=2
  [[ $1 != *x* ]] || slots=${1#*x}
  shift
  exec "$cluster" with "$hosts" --slots "$slots" -- "$@"
}

# mpirun across the cluster: its hostfile, its interface for messages (btl)
# and for Open MPI's own traffic (oob), ranks that yield while they wait
# (all the hosts share this machine's cores: docs/multihost.md), and the
# OOB keepalive that lets mpirun see a lost host in seconds
# (examples/mca-params.conf). Remote ranks see only what mpirun forwards:
# under the sanitizer preset, its options.
cluster_mpirun() {
  local forward=()
  [[ -z ${ASAN_OPTIONS:-} ]] || forward+=(-x ASAN_OPTIONS)
  [[ -z ${LSAN_OPTIONS:-} ]] || forward+=(-x LSAN_OPTIONS)
  mpirun --hostfile "$CLUSTER_HOSTFILE" --mca btl_tcp_if_include "$CLUSTER_INTERFACE" \
    --mca oob_tcp_if_include "$CLUSTER_INTERFACE" --mca mpi_yield_when_idle 1 \
    --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 \
    "${forward[@]}" "$@"
}

# Where pipevm placed its ranks, from the placement rank 0 prints
# ("  h1: rank 0 (stage 0, replica 0), rank 2 (...)"): "h1:0,2 h2:1,3".
placement_map() { # file with pipevm's output
  sed -n 's/^  \(h[0-9]*\): \(rank .*\)$/\1 \2/p' "$1" |
    awk '{ ranks = ""
           for (i = 2; i < NF; ++i) if ($i == "rank" && $(i - 1) != "MPI") ranks = ranks (ranks == "" ? "" : ",") $(i + 1)
           print $1 ":" ranks }' |
    paste -sd' '
}

# Process ids of the programs named NAME running on HOST.
processes_on() { # host name
  local pid
  for pid in $("$cluster" pids "$1"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) != "$2" ]] || echo "$pid"
  done
}

# The first rank of pipevm on HOST, once there is one, while JOB runs
# (else fails with LOG); at most 30 s.
first_rank_on() { # host job log
  local rank
  for _ in $(seq 1500); do
    kill -0 "$2" 2>/dev/null || { cat "$3"; fail "the run ended before it started on $1"; }
    rank=$(processes_on "$1" pipevm | head -n 1)
    [[ -z $rank ]] || { echo "$rank"; return 0; }
    sleep 0.02
  done
  fail "no rank on $1 within 30 s"
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
