"""examples/torch/transformer.py as a user runs it: it profiles a small
transformer, lets pipevm.synthesize cut it with the schedule, and writes a
cost file, a program and PyTorch's schedule CSV that pipevm reads back.
Skipped without torch."""

import os
import subprocess
import sys

import pytest
from conftest import SOURCE_DIR

import pipevm

pytest.importorskip("torch")

SCRIPT = SOURCE_DIR / "examples" / "torch" / "transformer.py"


def test_profile_synthesize_and_torch_csv(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--stages", "2", "--micro-batches", "4",
                           "--micro-batch-size", "4", "--out", str(tmp_path)],
                          capture_output=True, text=True, check=False, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert "into 2 stages" in done.stdout
    program = (tmp_path / "schedule.pipe").read_text()
    cut_lines = [line for line in program.splitlines() if line.startswith("# cut: ")]
    assert len(cut_lines) == 1
    assert pipevm.check(program, name="schedule.pipe").ok
    table = pipevm.check(tmp_path / "schedule.csv")
    assert table.ok, [str(f) for f in table.findings]
