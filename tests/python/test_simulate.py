"""pipevm.simulate: the figures of `pipevm simulate --format json`, the SVG
and the trace."""

import json

import pytest
from conftest import SOURCE_DIR, TABLES, run_cli

import pipevm

ONE_F_ONE_B = SOURCE_DIR / "schedules" / "1f1b.pipe"


def test_figures_equal_the_clis():
    status, out = run_cli("simulate", ONE_F_ONE_B, "-p", 4, "-m", 8, "--cost", "fwd=1,bwd=2",
                          "--format", "json")
    assert status == 0
    simulation = pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=8,
                                 costs={"fwd": 1, "bwd": 2})
    assert simulation.to_json() == json.loads(out)
    assert simulation.makespan == json.loads(out)["makespan"]
    assert simulation.configuration.stages == 4
    assert len(simulation.ranks) == 4
    assert 0 < simulation.bubble_fraction < 1


def test_costs_as_text_and_default():
    as_text = pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=8, costs="fwd=1,bwd=2")
    as_dict = pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=8, costs={"fwd": 1, "bwd": 2})
    assert as_text.makespan == as_dict.makespan
    # The textbook default: fwd=1, bwd=2 (as input and weight halves).
    assert pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=8).makespan == as_dict.makespan
    with pytest.raises(ValueError):
        pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=8, costs={"no-such-key": 1})


def test_timeline_and_text():
    simulation = pipevm.simulate(ONE_F_ONE_B, stages=2, micro_batches=2)
    events = simulation.timeline()
    assert {e["rank"] for e in events} == {0, 1}
    assert max(e["ended"] for e in events) == simulation.makespan
    assert "makespan" in simulation.text(width=60)


def test_svg_and_trace_are_written(tmp_path):
    svg, trace = tmp_path / "t.svg", tmp_path / "t.json"
    simulation = pipevm.simulate(ONE_F_ONE_B, stages=2, micro_batches=2, svg=str(svg),
                                 trace=str(trace))
    assert svg.read_text().startswith("<svg") or "<svg" in svg.read_text()[:200]
    assert "traceEvents" in json.loads(trace.read_text())
    with pytest.raises(OSError):
        simulation.write_svg(str(tmp_path / "no-such-dir" / "t.svg"))


def test_hosts():
    simulation = pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=4, hosts=[0, 0, 1, 1])
    assert simulation.makespan > 0
    with pytest.raises(ValueError, match="4 ranks"):
        pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=4, hosts=[0, 1])


def test_a_table_is_simulated():
    assert pipevm.simulate(TABLES / "zb1p_2rank_2stagep_compute.csv").makespan > 0


def test_a_deadlock_raises():
    deadlock = SOURCE_DIR / "tests" / "check" / "corpus" / "deadlock_receive_first.pipe"
    with pytest.raises(pipevm.ScheduleError) as raised:
        pipevm.simulate(deadlock, stages=2, micro_batches=1)
    assert raised.value.line is not None
