#!/bin/sh
# refuse_bad_checkpoint.sh WORKDIR COMMAND...
#
# COMMAND is a whole `[mpiexec -n 2 ...] pipevm run SCHEDULE [flags]` launch
# of two ranks. It writes one checkpoint, then damages copies of it; every
# resume from a damaged one must stop before training with exit status 2 and
# a message naming the problem (rank 1's piece is the damaged one, so rank 1
# alone knows, and every rank must still exit). Finally the undamaged
# checkpoint resumes.
set -u
work=$1
shift
fail() {
  echo "refuse_bad_checkpoint: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work" || fail "cannot create $work"
"$@" --checkpoint "$work/good" >"$work/good.log" 2>&1 ||
  { cat "$work/good.log"; fail "the run that writes the checkpoint failed"; }

# damaged NAME: a copy of the good checkpoint in $work/NAME.
damaged() {
  rm -rf "${work:?}/$1"
  cp -R "$work/good" "$work/$1"
  piece=$(ls "$work/$1"/step-*/rank-0001.safetensors)
}

# refused PATTERN FLAGS...: the run with FLAGS exits 2 and says PATTERN.
refused() {
  pattern=$1
  shift
  output=$("$@" 2>&1)
  status=$?
  printf '%s\n' "$output"
  [ "$status" -eq 2 ] || fail "exit status $status, expected 2, for: $*"
  printf '%s\n' "$output" | grep -Eq -- "$pattern" || fail "no line matches '$pattern'"
  echo "--- refused as expected: $pattern"
}

damaged no-manifest
rm "$work/no-manifest/manifest.json"
refused "no-manifest holds no checkpoint" "$@" --resume "$work/no-manifest"

damaged truncated
truncate -s -1 "$piece"
# --epochs 3: the checkpoint is of a finished run, which --resume with the
# same epochs refuses first ("nothing to train") before reading a piece.
refused "rank 1: .*rank-0001.safetensors has [0-9]+ bytes.*truncated" "$@" --resume "$work/truncated" \
  --epochs 3

damaged missing
rm "$piece"
refused "rank 1: a piece of the checkpoint is missing: .*rank-0001.safetensors: No such file" \
  "$@" --resume "$work/missing" --epochs 3

refused "the checkpoint was made for .*training.lr 0.05 \(this run: 0.01\)" \
  "$@" --resume "$work/good" --lr 0.01
refused "not divisible by dp x micro-batches = 1 x 3 \(--resume keeps the checkpoint's global batch" \
  "$@" --resume "$work/good" --micro-batches 3
refused "already holds a checkpoint; continue it with --resume" "$@" --checkpoint "$work/good"
refused "no-such-checkpoint holds no checkpoint" "$@" --resume "$work/no-such-checkpoint"

"$@" --resume "$work/good" --epochs 3 >"$work/resumed.log" 2>&1 ||
  { cat "$work/resumed.log"; fail "the undamaged checkpoint did not resume"; }
grep -q '^resumed from' "$work/resumed.log" || fail "the resumed run did not say so"
echo "--- the undamaged checkpoint resumes"
rm -rf "$work"
