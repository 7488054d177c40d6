#!/usr/bin/env bash
# deb_chroot.sh DEB [MIRROR]
# The .deb on a fresh Debian 12: debootstrap a minimal bookworm root (from
# MIRROR, default http://deb.debian.org/debian), `apt-get install ./DEB`
# in it, which must find every dependency in Debian, then, inside the root,
# `pipevm --version`, `pipevm check` of a packaged schedule, and a one-epoch
# training run on 2 MPI ranks of synthetic data. Prints how long each part
# took. Needs root, debootstrap and the network, and downloads the base
# system and the dependencies (about 150 MB): a script to run by hand, not
# a test (docs/installing.md). The root is a fresh directory under
# /var/tmp, removed at the end unless KEEP_ROOT=1.
set -euo pipefail
deb=$(readlink -f "$1")
mirror=${2:-http://deb.debian.org/debian}
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ -f $deb ]] || fail "no package $deb"
((EUID == 0)) || fail "debootstrap and chroot need root"
command -v debootstrap >/dev/null || fail "no debootstrap (apt-get install debootstrap)"

root=$(mktemp -d /var/tmp/pipevm-deb-root.XXXXXX)
cleanup() {
  umount "$root/proc" 2>/dev/null || true
  [[ ${KEEP_ROOT:-0} == 1 ]] && echo "root kept: $root" || rm -rf "$root"
}
trap cleanup EXIT
seconds_since() { echo $(($(date +%s) - $1)); }

start=$(date +%s)
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
  { tail -n 20 "$root.debootstrap.log"; fail "debootstrap failed"; }
rm -f "$root.debootstrap.log"
echo "debootstrap: $(seconds_since "$start") s"
mount -t proc proc "$root/proc"
cp "$deb" "$root/tmp/"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }

start=$(date +%s)
in_root apt-get update -q >/dev/null
in_root apt-get install -y -q "/tmp/$(basename "$deb")" >"$root/tmp/apt.log" 2>&1 ||
  { tail -n 30 "$root/tmp/apt.log"; fail "apt-get install of the package failed"; }
echo "apt-get install ./$(basename "$deb"): $(seconds_since "$start") s, $(grep -c '^Setting up' "$root/tmp/apt.log") packages set up"

in_root pipevm --version
in_root pipevm check /usr/share/pipevm/schedules/1f1b.pipe --stages 4 --micro-batches 8
in_root mpirun --allow-run-as-root --oversubscribe -n 2 pipevm /usr/share/pipevm/schedules/gpipe.pipe \
  --data synthetic --epochs 1 --no-progress
echo "the package installs with apt-get in a fresh Debian 12 root and runs"
