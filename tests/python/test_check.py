"""pipevm.check: the verdicts, findings and figures of `pipevm check`."""

import json

import pytest
from conftest import SOURCE_DIR, run_cli

import pipevm

SCHEDULES = SOURCE_DIR / "schedules"
CORPUS = SOURCE_DIR / "tests" / "check" / "corpus"


def test_one_f_one_b_is_ok():
    assert pipevm.check(str(SCHEDULES / "1f1b.pipe"), stages=4, micro_batches=8).ok
    # The schedule declares dp 1..2: with dp given, one configuration and its figures.
    result = pipevm.check(str(SCHEDULES / "1f1b.pipe"), stages=4, micro_batches=8, dp=1)
    assert result.ok
    assert result.findings == []
    assert result.checked == 1
    assert [m.stage for m in result.memory] == [0, 1, 2, 3]
    assert len(result.per_rank) == 4
    assert all(r.peak_bytes > 0 for r in result.per_rank)


def test_memory_figures_match_the_cli():
    path = SCHEDULES / "1f1b.pipe"
    status, out = run_cli("check", path, "-p", 4, "-m", 8, "--dp", 1, "--format", "json")
    assert status == 0
    expected = json.loads(out)["files"][0]
    result = pipevm.check(path, stages=4, micro_batches=8, dp=1)
    assert result.instructions == expected["instructions"]
    assert [r.peak_bytes for r in result.per_rank] == [
        r["peak_bytes"] for r in expected["per_rank"]]
    assert [m.peak_activations for m in result.memory] == [
        m["peak_activations"] for m in expected["memory"]]


def test_offloaded_bytes_are_host_memory_apart_from_the_peak():
    path = SCHEDULES / "1f1b-offload.pipe"
    status, out = run_cli("check", path, "-p", 4, "-m", 8, "--dp", 1, "--format", "json")
    assert status == 0
    expected = json.loads(out)["files"][0]["per_rank"]
    result = pipevm.check(path, stages=4, micro_batches=8, dp=1)
    assert [(r.peak_bytes, r.host, r.peak_host_bytes) for r in result.per_rank] == [
        (r["peak_bytes"], r["host"], r["peak_host_bytes"]) for r in expected]
    assert result.per_rank[0].peak_host_bytes > 0
    plain = pipevm.check(SCHEDULES / "1f1b.pipe", stages=4, micro_batches=8, dp=1)
    assert result.per_rank[0].peak_bytes < plain.per_rank[0].peak_bytes
    assert all(r.peak_host_bytes == 0 for r in plain.per_rank)


def test_a_sweep_counts_configurations():
    result = pipevm.check(SCHEDULES / "1f1b.pipe", stages=(2, 4), micro_batches=(1, 4))
    assert result.ok
    assert result.checked == 12
    assert result.memory == []


def test_declared_configurations_need_no_arguments():
    status, _ = run_cli("check", SCHEDULES / "zb-h1.pipe")
    assert pipevm.check(SCHEDULES / "zb-h1.pipe").ok == (status == 0)


def test_a_deadlock_is_a_finding_with_its_position():
    result = pipevm.check(CORPUS / "deadlock_receive_first.pipe", stages=2, micro_batches=1)
    assert not result.ok
    deadlock = result.findings[0]
    assert deadlock.code == "PV2001"
    assert deadlock.class_ == "deadlock"
    assert deadlock.name == "Deadlock"
    assert deadlock.severity == "error"
    assert (deadlock.line, deadlock.column) == (7, 5)
    assert deadlock.rank == 0
    assert deadlock.file.endswith("deadlock_receive_first.pipe")
    assert deadlock.notes[0].line == 14
    assert deadlock.configuration.stages == 2
    assert str(deadlock).startswith(deadlock.file + ":7:5: error: deadlock")


def test_text_is_checked_under_its_name():
    text = (SCHEDULES / "gpipe.pipe").read_text()
    result = pipevm.check(text, stages=2, micro_batches=4, name="mine.pipe")
    assert result.ok
    assert result.file == "mine.pipe"


def test_a_syntax_error_raises_with_its_position():
    with pytest.raises(pipevm.ScheduleError) as raised:
        pipevm.check("stage 0 {\n  Fwd (\n}\n", stages=1, micro_batches=1)
    error = raised.value
    assert error.file == "<string>"
    assert error.line == 2
    assert error.code.startswith("PV1")
    assert "<string>:2:" in str(error)


def test_no_configuration_raises():
    # A flat program gives its stages, not its micro-batches.
    with pytest.raises(pipevm.ScheduleError, match="--micro-batches"):
        pipevm.check(CORPUS / "deadlock_receive_first.pipe")


def test_an_unreadable_file_raises():
    with pytest.raises(pipevm.ScheduleError, match="cannot read"):
        pipevm.check(SCHEDULES / "no-such-schedule.pipe", stages=2, micro_batches=2)


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError):
        pipevm.check(SCHEDULES / "1f1b.pipe", stages=0, micro_batches=2)
    with pytest.raises(ValueError):
        pipevm.check(SCHEDULES / "1f1b.pipe", stages=2, micro_batches=2, p2p_order="nccl")


def test_posted_order_is_the_clis():
    path = CORPUS / "deadlock_receive_first.pipe"
    for order in ("independent", "posted"):
        status, _ = run_cli("check", path, "-p", 2, "-m", 1, "--p2p-order", order)
        assert pipevm.check(path, stages=2, micro_batches=1, p2p_order=order).ok == (status == 0)


def test_version():
    assert pipevm.__version__.count(".") == 2
