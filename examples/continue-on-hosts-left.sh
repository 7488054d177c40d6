#!/bin/sh
# continue-on-hosts-left.sh HOSTFILE LOST_HOST CHECKPOINT_DIR RANKS_LEFT [run flags...]
#
# A job lost a host for good (docs/multihost.md, "When a host is lost"):
# continue its training on the hosts that are left, from the last
# checkpoint in CHECKPOINT_DIR (on a shared file system), writing the next
# ones there too. RANKS_LEFT is the number of ranks the remaining hosts
# run; the schedule is synthesized for them as a pipeline of that many
# stages of MICRO_BATCHES (default 4) micro-batches. Pass the run's own flags (--config FILE, and the launch options
# your cluster needs go in MPIRUN_OPTIONS). For example, after losing h2:
#
#   examples/continue-on-hosts-left.sh hosts h2 runs/a 2 --config run.yaml
set -eu
hostfile=$1 lost=$2 checkpoint=$3 ranks=$4
shift 4
pipevm=${PIPEVM:-pipevm}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$pipevm" synthesize -p "$ranks" -m "${MICRO_BATCHES:-4}" -o "$work/left.pipe"
grep -v "^$lost[ 	]" "$hostfile" >"$work/hosts.left"
# shellcheck disable=SC2086 # MPIRUN_OPTIONS is a list of options
mpirun --hostfile "$work/hosts.left" -n "$ranks" ${MPIRUN_OPTIONS:-} \
  "$pipevm" run "$work/left.pipe" --resume "$checkpoint" --checkpoint "$checkpoint" "$@"
