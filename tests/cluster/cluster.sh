#!/usr/bin/env bash
# cluster.sh: a test cluster of N hosts on one Linux machine, for running
# pipevm across hosts with Open MPI. Each host h1..hN is a network namespace
# with its own interface pvnet0 (198.18.0.11, .12, ...; 198.18.0.0/15 is
# reserved for benchmarks) plugged into a bridge that lives in a namespace of
# its own, the cluster's switch: nothing is added to the machine's own
# network namespace and nothing is routed off the machine. A command runs on
# a host in that host's namespace and in a UTS namespace whose hostname is
# the host's name, so Open MPI sees N machines. Open MPI's rsh launcher
# starts its daemon (orted) on a host through this script's `agent`, which
# plays ssh: it enters the host and runs the command with a login's bare
# environment. Leaves out: routing between clusters, added delay (netem is
# not in every kernel), per-host file systems (the hosts share the disk).
#
#   cluster.sh check                  can this process build a cluster? 0, or 77 and why
#   cluster.sh up N [--rate R] [--slots S] [--name NAME]
#   cluster.sh down [--name NAME]     remove it: its processes, namespaces, files
#   cluster.sh run [--host H] [--name NAME] CMD...   CMD on H (default h1)
#   cluster.sh with N [--rate R] [--slots S] -- CMD...
#                                     a fresh cluster with a unique name, CMD
#                                     on h1, the cluster removed however CMD
#                                     ends (also on INT, TERM, HUP)
#   cluster.sh link HOST down|up [--name NAME]    unplug or replug a host
#   cluster.sh rate HOST|all R|unlimited [--name NAME]  limit links (tc tbf)
#   cluster.sh pids HOST [--name NAME]   processes running on HOST
#   cluster.sh list | sweep           clusters; remove those whose owner died
#   cluster.sh agent HOST CMD...      Open MPI's plm_rsh_agent (internal)
#
# NAME defaults to $PIPEVM_CLUSTER, else "pipevm". With PIPEVM_CLUSTER_OWNER
# set to a process id, `up` makes a cluster that `sweep` removes once that
# process is gone (as `with` does). Commands run by `run` and
# `with` see PIPEVM_CLUSTER, CLUSTER_NAME, CLUSTER_HOSTFILE,
# CLUSTER_INTERFACE, CLUSTER_DIR and OMPI_MCA_plm_rsh_agent (plus Open MPI's
# permission to run as root, and OMPI_MCA_hwloc_base_binding_policy=none:
# the hosts share the machine's cores, see cluster_environment).
set -euo pipefail

script=$(readlink -f "$0")
readonly script
readonly state_root=/run/pipevm-cluster
readonly interface=pvnet0
readonly subnet_prefix=198.18.0
readonly first_address=11 # host hK has 198.18.0.(10 + K)
readonly skip_status=77   # CTest's SKIP_RETURN_CODE
readonly login_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

name=${PIPEVM_CLUSTER:-pipevm}

die() {
  echo "cluster.sh: $*" >&2
  exit 2
}

valid_name() { [[ $1 =~ ^[a-z0-9][a-z0-9-]{0,19}$ ]]; }
namespace() { echo "pvc-$name-$1"; } # a host hK, or sw for the switch
state_dir() { echo "$state_root/$name"; }
host_count() { cat "$(state_dir)/size"; }

require_cluster() {
  [[ -f $(state_dir)/size ]] || die "no cluster '$name' (start one with: cluster.sh up N)"
}

require_host() {
  local count
  count=$(host_count)
  if ! [[ $1 =~ ^h([1-9][0-9]*)$ ]] || ((BASH_REMATCH[1] > count)); then
    die "cluster '$name' has hosts h1..h$count, not '$1'"
  fi
}

# --- check: everything `up` needs, tried for real -------------------------

cannot() {
  echo "cluster.sh: cannot build a test cluster here: $*" >&2
  exit "$skip_status"
}

check() {
  local tool probe error
  for tool in ip tc unshare nsenter mpirun orted; do
    command -v "$tool" >/dev/null || cannot "'$tool' is not installed (iproute2, util-linux, openmpi-bin)"
  done
  probe="pvc-check-$$"
  # ip netns add needs CAP_SYS_ADMIN (a mount) and the links CAP_NET_ADMIN.
  if ! error=$(ip netns add "$probe" 2>&1); then
    cannot "creating a network namespace failed (needs root, or CAP_SYS_ADMIN and CAP_NET_ADMIN): $error"
  fi
  if ! error=$(ip -n "$probe" link add probe0 type veth peer name probe1 2>&1 &&
    ip -n "$probe" link add probebr type bridge 2>&1 &&
    ip -n "$probe" link set probe0 up gso_max_size 16384 2>&1 &&
    tc -n "$probe" qdisc add dev probe0 root tbf rate 1gbit burst 32kb latency 50ms 2>&1 &&
    ip netns exec "$probe" unshare --uts hostname probe 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    cannot "a veth pair, bridge, GSO limit, tbf qdisc or UTS namespace failed: $error"
  fi
  ip netns del "$probe"
}

# --- rates -------------------------------------------------------------------

# tbf on both ends of a host's link: the host's side limits what it sends,
# the switch's side what it receives. tbf lets a full bucket pass at once,
# faster than the rate, so the bucket is small: 250 us at the rate, at
# least 16 KiB (a message then takes at most 250 us less than at the rate;
# bench/RESULTS.md "multihost: simulated vs measured" measured what a
# bucket of 10 ms did to 131 KB messages). A bucket smaller than a packet
# makes tbf split it, which costs enough CPU to miss the rate at 1gbit on
# two shared cores: the links' GSO packets (by default up to 64 KiB) are
# limited to half the bucket.
readonly default_gso_max_size=65536
set_rate() { # host rate
  local host=$1 rate=$2 burst=0 gso=$default_gso_max_size dev ns
  if [[ $rate != unlimited ]]; then
    burst=$(($(rate_bits "$rate") / 8 / 4000)) # bytes in 250 us
    ((burst >= 16384)) || burst=16384
    ((burst / 2 >= gso)) || gso=$((burst / 2))
  fi
  for dev in "$(namespace "$host"):$interface" "$(namespace sw):$host"; do
    ns=${dev%%:*}
    ip -n "$ns" link set "${dev#*:}" gso_max_size "$gso"
    if [[ $rate == unlimited ]]; then
      tc -n "$ns" qdisc del dev "${dev#*:}" root 2>/dev/null || true
    else
      tc -n "$ns" qdisc replace dev "${dev#*:}" root tbf rate "$rate" burst "$burst" latency 100ms
    fi
  done
}

rate_bits() { # 1gbit, 200mbit, 500kbit, 1000000bit -> bits per second
  [[ $1 =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || die "rate '$1': expected e.g. 1gbit, 200mbit, 500kbit or unlimited"
  local value=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[2]} in
    bit) echo "$value" ;;
    kbit) echo $((value * 1000)) ;;
    mbit) echo $((value * 1000000)) ;;
    gbit) echo $((value * 1000000000)) ;;
  esac
}

# --- up and down ---------------------------------------------------------------

up() { # count rate slots [owner-pid]
  local count=$1 rate=$2 slots=$3 owner=${4:-} dir sw host ns k
  if ! [[ $count =~ ^[1-9][0-9]*$ ]] || ((count > 200)); then
    die "up: host count '$count' (1..200)"
  fi
  [[ $slots =~ ^[1-9][0-9]*$ ]] || die "up: slots '$slots'"
  [[ $rate == unlimited ]] || rate_bits "$rate" >/dev/null
  check
  sweep
  dir=$(state_dir)
  mkdir -p "$state_root"
  mkdir "$dir" 2>/dev/null || die "cluster '$name' exists (cluster.sh down --name $name)"
  [[ -z $owner ]] || echo "$owner $(start_time "$owner")" >"$dir/owner"
  remove_on_exit=1 # until it is complete
  sw=$(namespace sw)
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  : >"$dir/hosts"
  for ((k = 1; k <= count; k++)); do
    host=h$k
    ns=$(namespace "$host")
    ip netns add "$ns"
    ip link add "$interface" netns "$ns" type veth peer name "$host" netns "$sw"
    ip -n "$sw" link set "$host" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet_prefix.$((first_address + k - 1))/24" dev "$interface"
    ip -n "$ns" link set "$interface" up
    echo "$host slots=$slots" >>"$dir/hosts"
    [[ $rate == unlimited ]] || set_rate "$host" "$rate"
  done
  printf '#!/bin/sh\n# Open MPI plm_rsh_agent of test cluster %s\nexec %q agent --name %q "$@"\n' \
    "$name" "$script" "$name" >"$dir/agent"
  chmod +x "$dir/agent"
  echo "$rate" >"$dir/rate"
  echo "$count" >"$dir/size" # last: the cluster is complete
  remove_on_exit=0
  echo "cluster $name: hosts h1..h$count ($subnet_prefix.$first_address-$((first_address + count - 1)) on $interface), $slots slots each, links ${rate/unlimited/unlimited (no tbf)}"
  echo "  hostfile $dir/hosts"
  echo "  agent    $dir/agent (Open MPI's plm_rsh_agent; \`cluster.sh run\` sets it)"
}

# Kills what runs on the cluster's hosts (processes this cluster's users
# started there), then removes the namespaces and the state.
down() {
  local ns pids
  for ns in $(ip netns list | awk -v prefix="pvc-$name-" 'index($1, prefix) == 1 { print $1 }'); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086 # one word per process id
    [[ -z $pids ]] || kill -9 $pids 2>/dev/null || true
    ip netns del "$ns"
  done
  rm -rf "$(state_dir)"
}

down_quietly() { down 2>/dev/null || true; }

start_time() { # field 22 of /proc/PID/stat; empty when the process is gone
  awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null || true
}

# Clusters made by `with` whose owner process is gone (killed with -9, as
# CTest does on a timeout, before its trap could run).
sweep() {
  local dir pid started saved_name=$name
  for dir in "$state_root"/*/; do
    [[ -f $dir/owner ]] || continue
    read -r pid started <"$dir/owner"
    [[ $(start_time "$pid") == "$started" ]] && continue
    name=$(basename "$dir")
    echo "cluster.sh: removing cluster '$name', left by process $pid" >&2
    down
  done
  name=$saved_name
}

list() {
  local dir
  for dir in "$state_root"/*/; do
    [[ -f $dir/size ]] || continue
    echo "$(basename "$dir"): $(cat "$dir/size") hosts, links $(cat "$dir/rate")$([[ -f $dir/owner ]] && echo ", owner pid $(cut -d' ' -f1 "$dir/owner")")"
  done
}

# --- running on a host -----------------------------------------------------

# CMD on HOST: its network namespace, a UTS namespace named after it.
on_host() { # host cmd...
  local host=$1
  shift
  # shellcheck disable=SC2016 # the inner shell expands them
  exec ip netns exec "$(namespace "$host")" unshare --uts -- \
    sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

cluster_environment() {
  local dir
  dir=$(state_dir)
  # PIPEVM_CLUSTER: cluster.sh called from there means this cluster.
  export PIPEVM_CLUSTER=$name CLUSTER_NAME=$name CLUSTER_DIR=$dir CLUSTER_HOSTFILE=$dir/hosts
  export CLUSTER_INTERFACE=$interface OMPI_MCA_plm_rsh_agent=$dir/agent
  # The hosts share this machine's cores, but each host's Open MPI sees all
  # of them as its own, and in a job of at most 2 ranks it binds each rank
  # to a core (its default), counting from core 0 on every host: one rank
  # per host put every host's rank on the same core
  # (dp.pipe --dp 2 on 2 hosts, spinning: 9.6 s/epoch bound, 1.0 s not;
  # bench/RESULTS.md "multihost", 2026-11-25 evening). Unbound, the
  # kernel spreads the ranks over the cores as it would on real hosts. A
  # choice the caller made (--bind-to, or this variable) stands.
  export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# What ssh HOST WORDS... does: WORDS joined by spaces, run by a shell on
# HOST with a login's environment, not the caller's (mpirun's own
# environment reaches remote ranks only as Open MPI forwards it).
agent() { # host words...
  local host=$1
  shift
  require_host "$host"
  on_host "$host" env -i PATH="$login_path" HOME="${HOME:-/}" USER="$(id -un)" \
    LOGNAME="$(id -un)" SHELL=/bin/sh OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    sh -c "$*"
}

run() { # host cmd...
  local host=$1
  shift
  (($# > 0)) || die "run: no command"
  require_host "$host"
  cluster_environment
  on_host "$host" "$@"
}

with() { # count rate slots cmd...
  local count=$1 rate=$2 slots=$3 status=0
  shift 3
  (($# > 0)) || die "with: no command (cluster.sh with N -- CMD...)"
  name=t$$
  remove_on_exit=1
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  up "$count" "$rate" "$slots" "$$" >&2
  remove_on_exit=1
  cluster_environment
  # In the background, so that a signal's trap runs at once (bash runs it
  # only when a foreground command ends); this shell stays to take the
  # cluster down, and with it whatever CMD left running on the hosts.
  (on_host h1 "$@") &
  wait "$!" || status=$?
  exit "$status"
}

link() { # host down|up
  require_host "$1"
  case $2 in
    down | up) ip -n "$(namespace sw)" link set "$1" "$2" ;;
    *) die "link: expected down or up, not '$2'" ;;
  esac
}

# --- command line ----------------------------------------------------------------

usage() {
  sed -n '/^#   cluster.sh/,/^#$/p' "$script" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# shellcheck disable=SC2034 # read by the EXIT trap
remove_on_exit=0 # set by up (until complete) and with
trap '((remove_on_exit == 0)) || down_quietly' EXIT

main() {
  while [[ ${1:-} == --name ]]; do # also before the command
    name=${2:?--name needs a value}
    shift 2
  done
  (($# > 0)) || usage
  local command=$1 rate=unlimited slots=2 host=h1
  local -a words=()
  shift
  # Options anywhere before `--` (with) or the command (run).
  while (($# > 0)); do
    case $1 in
      --name) name=${2:?--name needs a value} && shift 2 ;;
      --rate) rate=${2:?--rate needs a value} && shift 2 ;;
      --slots) slots=${2:?--slots needs a value} && shift 2 ;;
      --host) host=${2:?--host needs a value} && shift 2 ;;
      --) shift && break ;;
      *)
        # run and agent: the first other word starts the command.
        [[ $command != run && $command != agent ]] || break
        [[ $1 != -* ]] || die "unknown option '$1'"
        words+=("$1")
        shift
        ;;
    esac
  done
  valid_name "$name" || die "cluster name '$name': lower-case letters, digits and -, at most 20"
  case $command in
    check) check ;;
    up) up "${words[0]:-}" "$rate" "$slots" "${PIPEVM_CLUSTER_OWNER:-}" ;;
    down) down ;;
    run) require_cluster && run "$host" "$@" ;;
    with) with "${words[0]:-}" "$rate" "$slots" "$@" ;;
    agent) require_cluster && agent "$@" ;;
    link) require_cluster && link "${words[0]:-}" "${words[1]:-}" ;;
    rate)
      require_cluster
      local target=${words[0]:-} k
      [[ -n ${words[1]:-} ]] || die "rate: cluster.sh rate HOST|all RATE|unlimited"
      if [[ $target == all ]]; then
        for ((k = 1; k <= $(host_count); k++)); do set_rate "h$k" "${words[1]}"; done
        echo "${words[1]}" >"$(state_dir)/rate"
      else
        require_host "$target" && set_rate "$target" "${words[1]}"
      fi
      ;;
    pids) require_cluster && require_host "${words[0]:-}" && ip netns pids "$(namespace "${words[0]}")" ;;
    list) list ;;
    sweep) sweep ;;
    *) usage ;;
  esac
}

main "$@"
