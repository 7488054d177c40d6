#!/usr/bin/env bash
# deb_test.sh CPACK BUILD_DIR WORK
# The Debian package: `cpack -G DEB` from BUILD_DIR's configuration into
# WORK (emptied first; it lies in the build tree), its Depends are Debian
# packages (dpkg-shlibdeps found the libraries' packages; Open MPI's
# launcher added), it holds the installed layout under /usr, and it
# installs with dpkg into a scratch root (WORK/root: an empty dpkg
# database, so the dependencies are forced) where the installed pipevm,
# run on this machine's libraries, checks an installed schedule. Skips (77)
# without dpkg-deb or dpkg-shlibdeps (package dpkg-dev).
# tests/install/deb_chroot.sh goes further: apt-get install in a clean
# Debian root.
set -euo pipefail
cpack=$1 build=$2 work=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in dpkg dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "no $tool (dpkg-dev): no .deb"; exit 77; }
done

rm -rf "$work"
mkdir -p "$work"
start=$(date +%s%N)
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$work/package" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack failed"; }
echo "cpack: $((($(date +%s%N) - start) / 1000000)) ms"
debs=("$work"/package/pipevm_*.deb)
[[ -f ${debs[0]} ]] || fail "no pipevm_*.deb in $work/package"
deb=${debs[0]}
echo "$(basename "$deb"): $(du -k "$deb" | cut -f1) KiB"

depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for package in libopenmpi3 libopenblas0-serial libyaml-cpp0.7 libstdc++6 libc6 openmpi-bin; do
  [[ $depends == *"$package"* ]] || fail "Depends does not name $package"
done
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for file in ./usr/bin/pipevm ./usr/share/pipevm/schedules/1f1b.pipe ./usr/share/man/man1/pipevm.1 \
  ./usr/share/doc/pipevm/README.md ./usr/share/bash-completion/completions/pipevm; do
  grep -qx -- "$file" <<<"$contents" || fail "the package does not hold $file"
done

root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
dpkg --root="$root" --force-depends --force-script-chrootless -i "$deb" >"$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log"; fail "dpkg -i into $root failed"; }
dpkg --root="$root" -s pipevm | grep -qx 'Status: install ok installed' ||
  fail "dpkg does not list pipevm as installed in $root"
"$root/usr/bin/pipevm" check "$root/usr/share/pipevm/schedules/1f1b.pipe" --stages 4 --micro-batches 8 ||
  fail "the packaged pipevm does not pass the packaged 1f1b.pipe"
"$root/usr/bin/pipevm" --version
echo "the .deb installs into a scratch root and runs"
