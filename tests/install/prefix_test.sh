#!/usr/bin/env bash
# prefix_test.sh CMAKE BUILD_DIR PREFIX PYTHON_DIR [PYTHON]
# `cmake --install BUILD_DIR --prefix PREFIX` (PREFIX is emptied first; it
# lies in the build tree) puts every part where docs/installing.md says, and
# the installed pipevm, run from a directory without schedules/, checks an
# installed schedule. With PYTHON (the module is built), `import pipevm`
# from PREFIX/PYTHON_DIR works and loads the installed module.
set -euo pipefail
cmake=$1 build=$2 prefix=$3 python_dir=$4 python=${5:-}
fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$prefix.log" 2>&1 || { cat "$prefix.log"; fail "cmake --install failed"; }
for file in bin/pipevm share/pipevm/schedules/1f1b.pipe share/pipevm/examples/default.yaml \
  share/pipevm/examples/puzzles/README.md share/doc/pipevm/README.md share/doc/pipevm/checker.md \
  share/doc/pipevm/img/simulate-1f1b.svg share/man/man1/pipevm.1 \
  share/bash-completion/completions/pipevm; do
  [[ -f $prefix/$file ]] || fail "$file is not installed"
done
[[ -x $prefix/bin/pipevm ]] || fail "bin/pipevm is not executable"
[[ ! -e $prefix/share/doc/pipevm/pipevm.1 ]] || fail "the man page is also among the docs"

cd "$prefix"
"$prefix/bin/pipevm" check "$prefix/share/pipevm/schedules/1f1b.pipe" --stages 4 --micro-batches 8 ||
  fail "the installed pipevm does not pass the installed 1f1b.pipe"
[[ $("$prefix/bin/pipevm" --version) == $("$build/pipevm" --version) ]] ||
  fail "the installed pipevm is not the one built"
# The GEMMs' library is the sequential OpenBLAS, as in the build tree.
blas=$(ldd "$prefix/bin/pipevm" | awk '$1 == "libopenblas.so.0" { print $3 }')
[[ $blas == */openblas-serial/* ]] || fail "the installed pipevm loads $blas, not OpenBLAS's sequential build"

if [[ -n $python ]]; then
  module_dir=$prefix/$python_dir
  PYTHONPATH=$module_dir "$python" -c "
import sys, pipevm
assert pipevm.__file__.startswith(sys.argv[1]), pipevm.__file__
print('import pipevm:', pipevm.__file__)
" "$module_dir" || fail "python3 cannot import the installed module from $module_dir"
else
  echo "the Python module is not built: import not tried"
fi
echo "installed into $prefix and checked there"
