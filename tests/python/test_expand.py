"""pipevm.expand: the streams `pipevm expand` prints."""

import pytest
from conftest import SOURCE_DIR, TABLES, run_cli

import pipevm

GPIPE = SOURCE_DIR / "schedules" / "gpipe.pipe"


def test_text_equals_the_clis():
    status, out = run_cli("expand", GPIPE, "-p", 2, "-m", 3)
    assert status == 0
    expansion = pipevm.expand(GPIPE, stages=2, micro_batches=3)
    assert expansion.text == out
    assert expansion.configuration.micro_batches == 3
    assert expansion.placement == "looped"
    assert len(expansion.ranks) == 2
    assert any(line.startswith("Fwd") for line in expansion.ranks[0])


def test_the_text_is_a_schedule():
    expansion = pipevm.expand(GPIPE, stages=2, micro_batches=3)
    assert pipevm.check(expansion.text, name="flat.pipe").ok


def test_a_table_and_back():
    table = TABLES / "zb1p_2rank_2stagep_compute.csv"
    status, out = run_cli("expand", table)
    assert status == 0
    expansion = pipevm.expand(table)
    assert expansion.text == out
    status, out = run_cli("expand", table, "--format", "torch-csv", "--with-comms")
    assert status == 0
    assert expansion.torch_csv(with_comms=True) == out
    assert pipevm.check(expansion.torch_csv(), name="again.csv").ok


def test_expansion_errors_raise():
    with pytest.raises(pipevm.ScheduleError):
        pipevm.expand(GPIPE, stages=2)
    with pytest.raises(pipevm.ScheduleError):
        pipevm.expand(TABLES / "bad_cell.csv")
