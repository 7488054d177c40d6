#!/usr/bin/env python3
"""Checks or rewrites the expected diagnostics of tests/dsl/golden/*.pipe.

Each golden file is a schedule that must fail. It carries, in comments:
    # config: stages=2 micro_batches=3 [chunks=1] [dp=1] [max_instructions=N]
    # expect: PV1003 @ 4:9
one `expect` line per error, in the order pipevm reports them (notes are not
listed). The default configuration is stages=4 micro_batches=8. Expect lines
stand at the end of the file, so that rewriting them moves no position above.

    tests/dsl/update_golden.py [--pipevm build/pipevm]            # check
    tests/dsl/update_golden.py [--pipevm build/pipevm] --update   # rewrite

The C++ test dsl.golden checks the same files through the library.
"""
import argparse
import pathlib
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CONFIG = re.compile(r"^# config:(.*)$")
EXPECT = re.compile(r"^# expect: (PV\d+) @ (\d+):(\d+)\s*$")
ERROR = re.compile(r"^(.*):(\d+):(\d+): error: .* \[(PV\d+)\]$")
OPTION = {"stages": "--stages", "micro_batches": "--micro-batches", "chunks": "--chunks",
          "dp": "--dp", "max_instructions": "--max-instructions"}


def config_of(lines):
    config = {"stages": "4", "micro_batches": "8"}
    for line in lines:
        match = CONFIG.match(line)
        if match:
            for item in match.group(1).split():
                key, value = item.split("=")
                config[key] = value
    return config


def actual(pipevm, path, config):
    args = [pipevm, "expand", str(path), "--format", "json"]
    for key, value in config.items():
        args += [OPTION[key], value]
    run = subprocess.run(args, capture_output=True, text=True)
    found = []
    for line in run.stderr.splitlines():
        match = ERROR.match(line)
        if match:
            found.append(f"{match.group(4)} @ {match.group(2)}:{match.group(3)}")
    return run.returncode, found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipevm", default=str(ROOT / "build" / "pipevm"))
    parser.add_argument("--update", action="store_true", help="rewrite the expect lines")
    options = parser.parse_args()
    failures = 0
    for path in sorted((HERE / "golden").glob("*.pipe")):
        lines = path.read_text().splitlines()
        expected = [f"{m.group(1)} @ {m.group(2)}:{m.group(3)}"
                    for m in map(EXPECT.match, lines) if m]
        status, found = actual(options.pipevm, path, config_of(lines))
        if status != 1 or not found:
            print(f"{path.name}: expected a failing program (exit 1), got exit {status}")
            failures += 1
            continue
        if found == expected:
            continue
        if not options.update:
            print(f"{path.name}: expected {expected}, got {found}")
            failures += 1
            continue
        # An error at the end of the file moves with the expect lines: repeat
        # until the positions no longer change.
        for _ in range(3):
            lines = rewrite(lines, found)
            path.write_text("\n".join(lines) + "\n")
            status, again = actual(options.pipevm, path, config_of(lines))
            if again == found:
                break
            found = again
        print(f"{path.name}: updated {expected} -> {found}")
    return 1 if failures else 0


def rewrite(lines, found):
    """Replaces the expect lines with `found`, keeping every other line where it was.

    Positions in the expectations refer to the file with its expect lines, so
    the number of lines before the code must not change: new expect lines are
    appended at the end of the file instead of inserted at the top.
    """
    kept = [line for line in lines if not EXPECT.match(line)]
    while kept and kept[-1] == "":
        kept.pop()
    return kept + [f"# expect: {item}" for item in found]


if __name__ == "__main__":
    sys.exit(main())
