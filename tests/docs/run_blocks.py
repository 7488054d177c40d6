#!/usr/bin/env python3
"""Runs every command block of a Markdown file that is marked runnable.

A block is runnable when the line before its opening fence is
`<!-- runnable -->`. A ```python block runs with the Python that runs this
script (CTest's, the one the module is built for); any other block
runs with `bash -e -o pipefail` (each line a command, `#` comments allowed).
Blocks run in order, in one scratch directory shared by the file's blocks
(so a later block may use what an earlier one wrote), with the build
directory's `pipevm` reachable as `./pipevm` and on PATH, `schedules/`
beside it, and the Python module importable. The first block that fails
stops the run with its text, its output and its exit status.

usage: run_blocks.py FILE.md BUILD_DIR SOURCE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = "<!-- runnable -->"


def runnable_blocks(text):
    """(language, code, line) of each marked block, in order."""
    lines = text.split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == MARKER and i + 1 < len(lines):
            fence = re.match(r"^(```+)\s*(\w*)\s*$", lines[i + 1])
            if not fence:
                sys.exit(f"line {i + 1}: {MARKER} is not followed by a ``` fence")
            end = i + 2
            while end < len(lines) and lines[end].strip() != fence.group(1):
                end += 1
            blocks.append((fence.group(2), "\n".join(lines[i + 2:end]), i + 2))
            i = end
        i += 1
    return blocks


def main():
    markdown, build_dir, source_dir = sys.argv[1:4]
    with open(markdown, encoding="utf-8") as f:
        blocks = runnable_blocks(f.read())
    if not blocks:
        sys.exit(f"{markdown}: no block marked {MARKER}")
    scratch = tempfile.mkdtemp(prefix="pipevm-docs-")
    try:
        os.symlink(os.path.join(build_dir, "pipevm"), os.path.join(scratch, "pipevm"))
        for shared in ("schedules", "examples"):
            os.symlink(os.path.join(source_dir, shared), os.path.join(scratch, shared))
        env = dict(os.environ)
        env["PATH"] = build_dir + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = os.path.join(build_dir, "python")
        # Open MPI as root and with more ranks than cores, as README says.
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_rmaps_base_oversubscribe": "1"})
        for language, code, line in blocks:
            command = [sys.executable, "-c", code] if language == "python" else \
                      ["bash", "-e", "-o", "pipefail", "-c", code]
            run = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True,
                                 timeout=600)
            if run.returncode != 0:
                sys.exit(f"{markdown}:{line}: the block exits {run.returncode}:\n{code}\n"
                         f"--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}")
            print(f"{markdown}:{line}: ok ({language or 'shell'})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
