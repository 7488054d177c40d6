#!/usr/bin/env python3
"""Compare or rewrite the `# expect:` lines of the checker's golden corpus.

Each tests/check/corpus/*.pipe names its configuration in a `# config:` line
and the diagnostics `pipevm check` must report, in order, as
`# expect: CODE @ LINE:COL` lines (`# expect: none` for a clean program).

    update_expectations.py [--pipevm build/pipevm] [--update] [FILE...]

Without --update, prints the files whose expectations differ and exits 1.
With --update, rewrites their expect lines, which stand at the end of the
file so that rewriting them moves no other line.
"""
import argparse
import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
FLAGS = {"stages": "--stages", "micro_batches": "--micro-batches", "dp": "--dp", "chunks": "--chunks"}


def configuration(lines):
    for line in lines:
        if line.startswith("# config:"):
            pairs = (word.split("=") for word in line[len("# config:"):].split())
            return {key: value for key, value in pairs}
    raise ValueError("no `# config:` line")


def actual_expectations(pipevm, path, config):
    command = [pipevm, "check", str(path), "--format", "json"]
    for key, value in config.items():
        command += [FLAGS[key], value]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode == 2:
        raise RuntimeError(f"{path}: pipevm check failed: {run.stderr.strip()}")
    report = json.loads(run.stdout)
    diagnostics = list(report.get("diagnostics", []))
    for result in report["results"]:
        diagnostics += result["diagnostics"]
    out = []
    for d in diagnostics:
        where = f" @ {d['line']}:{d['column']}" if "line" in d else ""
        out.append(f"# expect: {d['code']}{where}")
    return out or ["# expect: none"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipevm", default=str(HERE.parents[1] / "build" / "pipevm"))
    parser.add_argument("--update", action="store_true", help="rewrite the expect lines")
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    args = parser.parse_args()
    files = args.files or sorted((HERE / "corpus").glob("*.pipe"))
    differing = 0
    for path in files:
        lines = path.read_text().splitlines()
        expected = actual_expectations(args.pipevm, path, configuration(lines))
        current = [line for line in lines if line.startswith("# expect:")]
        if current == expected:
            continue
        differing += 1
        print(f"{path.name}: {current} -> {expected}")
        if args.update:
            kept = [line for line in lines if not line.startswith("# expect:")]
            while kept and not kept[-1].strip():
                kept.pop()
            path.write_text("\n".join(kept + expected) + "\n")
    if differing and not args.update:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
