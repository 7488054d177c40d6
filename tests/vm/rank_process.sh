# shellcheck shell=sh
# rank_process.sh: sourced by the tests that signal one rank's process from
# outside (kill_and_resume.sh, watchdog_test.sh). Leaves out the signals.
#
# rank_process MARKER RANK SCRATCH: the process id of the pipevm rank whose
# environment holds MARKER (NAME=VALUE, exported by the test: mpiexec passes
# it to the ranks it starts on this host) and Open MPI's
# OMPI_COMM_WORLD_RANK=RANK; empty while there is none. SCRATCH is a file it
# may overwrite.
rank_process() {
  for dir in /proc/[0-9]*; do
    read -r name <"$dir/comm" 2>/dev/null || continue
    [ "$name" = pipevm ] || continue
    tr '\0' '\n' <"$dir/environ" 2>/dev/null >"$3" || continue
    if grep -qx "$1" "$3" && grep -qx "OMPI_COMM_WORLD_RANK=$2" "$3"; then
      echo "${dir#/proc/}"
    fi
  done
}
