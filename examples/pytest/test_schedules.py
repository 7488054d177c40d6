"""The project's CI: every schedule it ships is proved free of deadlock for
the shapes it is used with, and the simulator's bubble is no worse than the
schedule promises. Run with `pytest examples/pytest` once pipevm is
importable (installed, or PYTHONPATH=<build>/python)."""

import pytest

pipevm = pytest.importorskip("pipevm")

from schedules import SCHEDULES, one_f_one_b  # noqa: E402

SHAPES = [(2, 2), (2, 8), (4, 4), (4, 8), (8, 16)]


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("num_stages,n_microbatches", SHAPES)
def test_schedule_is_free_of_deadlock(name, num_stages, n_microbatches):
    order = SCHEDULES[name](num_stages, n_microbatches)
    result = pipevm.check_pipeline_order(order, num_stages=num_stages,
                                         n_microbatches=n_microbatches, placement="looped")
    assert result.ok, "\n".join(str(finding) for finding in result.findings)


def test_a_backward_too_early_is_caught():
    order = one_f_one_b(4, 8)
    # Rank 3 runs the backward of micro-batch 1 before its forward.
    row = order[3]
    first_forward, first_backward = row.index("3F1"), row.index("3B1")
    row[first_forward], row[first_backward] = row[first_backward], row[first_forward]
    result = pipevm.check_pipeline_order(order)
    assert not result.ok
    assert any(finding.rank == 3 for finding in result.findings)


def test_a_typo_is_a_schedule_error():
    order = one_f_one_b(2, 2)
    order[1][2] = "1Q0"
    with pytest.raises(pipevm.ScheduleError) as raised:
        pipevm.check_pipeline_order(order)
    assert (raised.value.rank, raised.value.step) == (1, 2)


def test_one_f_one_b_bubble():
    # The textbook bubble of 1F1B with equal stage times: (P - 1) / (M + P - 1).
    num_stages, n_microbatches = 4, 8
    rows = one_f_one_b(num_stages, n_microbatches)
    table = "\n".join(",".join(a or "" for a in rows[r]) for r in range(num_stages)) + "\n"
    simulation = pipevm.simulate(table, name="1f1b.csv", costs={"fwd": 1, "bwd": 2})
    compute = simulation.makespan - sum(s.idle for s in simulation.stages) / num_stages
    assert compute > 0
    bound = (num_stages - 1) / (n_microbatches + num_stages - 1)
    assert simulation.bubble_fraction <= bound + 0.05
