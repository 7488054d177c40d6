"""Shared fixtures of the Python module's tests: where the sources and the
pipevm executable are (set by CTest), and the CLI's verdict to compare with."""

import csv
import os
import subprocess
from pathlib import Path

import pytest

pipevm = pytest.importorskip("pipevm")

SOURCE_DIR = Path(os.environ.get("PIPEVM_SOURCE_DIR", Path(__file__).resolve().parents[2]))
PIPEVM_EXE = os.environ.get("PIPEVM_EXE", "pipevm")
TABLES = SOURCE_DIR / "tests" / "pytorch" / "data"


@pytest.fixture
def source_dir():
    return SOURCE_DIR


def run_cli(*arguments):
    """The pipevm executable's exit status and standard output."""
    done = subprocess.run([PIPEVM_EXE, *map(str, arguments)], capture_output=True, text=True,
                          check=False)
    return done.returncode, done.stdout


def read_order(path):
    """A PyTorch CSV table as the pipeline_order dictionary it was dumped from."""
    with open(path, newline="") as table:
        rows = list(csv.reader(table))
    return {rank: [cell or None for cell in row] for rank, row in enumerate(rows) if row}
