"""pipevm.check_pipeline_order: PyTorch's in-memory schedules read by the
CSV reader's rules, with the verdicts of `pipevm check TABLE.csv`."""

import pytest
from conftest import TABLES, read_order, run_cli

import pipevm

GOOD_TABLES = sorted(p for p in TABLES.glob("*.csv") if p.name != "bad_cell.csv")


@pytest.mark.parametrize("table", GOOD_TABLES, ids=lambda p: p.stem)
def test_verdicts_equal_the_clis(table):
    status, _ = run_cli("check", table)
    assert status in (0, 1)
    result = pipevm.check_pipeline_order(read_order(table))
    assert result.ok == (status == 0)
    assert result.ok == pipevm.check(table).ok


def test_the_table_layout_is_checked_against_the_arguments():
    order = read_order(TABLES / "zb1p_2rank_2stagep_compute.csv")
    assert pipevm.check_pipeline_order(order, num_stages=4, n_microbatches=8, placement="looped").ok
    assert pipevm.check_pipeline_order(order, placement={0: 0, 1: 1, 2: 0, 3: 1}).ok
    with pytest.raises(pipevm.ScheduleError, match="num_stages=2"):
        pipevm.check_pipeline_order(order, num_stages=2)
    with pytest.raises(pipevm.ScheduleError, match="n_microbatches=4"):
        pipevm.check_pipeline_order(order, n_microbatches=4)
    with pytest.raises(pipevm.ScheduleError, match="placement='v'"):
        pipevm.check_pipeline_order(order, placement="v")


def test_a_v_placement():
    order = read_order(TABLES / "dualpipev_4rank_10mb.csv")
    result = pipevm.check_pipeline_order(order, num_stages=8, n_microbatches=10, placement="v")
    assert result.ok


def test_a_list_of_rows_is_an_order():
    order = read_order(TABLES / "zb1p_2rank_2stagep_comms.csv")
    assert pipevm.check_pipeline_order([order[0], order[1]]).ok


def test_a_mutated_order_names_the_rank_and_action():
    order = read_order(TABLES / "zb1p_2rank_2stagep_comms.csv")
    # Rank 1 now waits for its second gradient before it sends its first.
    row = order[1]
    first, second = row.index("1SEND_B0"), row.index("1RECV_B1")
    row[first], row[second] = row[second], row[first]
    result = pipevm.check_pipeline_order(order)
    assert not result.ok
    named = [f for f in result.findings if f.rank is not None and f.action is not None]
    assert named, [str(f) for f in result.findings]
    finding = named[0]
    assert order[finding.rank][finding.step] == finding.action
    assert finding.file == "<pipeline_order>"


def test_a_compute_order_that_cannot_be_lowered_is_a_finding():
    order = {0: ["0F0", "0B0"], 1: ["1B0", "1F0"]}
    result = pipevm.check_pipeline_order(order)
    assert not result.ok
    assert any(f.rank is not None and f.action for f in result.findings)


def test_a_malformed_action_raises_with_its_place():
    order = read_order(TABLES / "zb1p_2rank_2stagep_compute.csv")
    order[1][3] = "3X0"
    with pytest.raises(pipevm.ScheduleError) as raised:
        pipevm.check_pipeline_order(order)
    error = raised.value
    assert (error.rank, error.step, error.action) == (1, 3, "3X0")
    assert error.code == "PV1001"


def test_a_comma_in_an_action_raises():
    with pytest.raises(pipevm.ScheduleError, match="rank 0, step 1"):
        pipevm.check_pipeline_order({0: ["0F0", "0B0,1"]})


def test_keys_must_be_the_ranks():
    with pytest.raises(ValueError, match="ranks 0..1"):
        pipevm.check_pipeline_order({0: ["0F0"], 2: ["1F0"]})


def test_actions_are_their_str():
    class Action:
        def __init__(self, text):
            self.text = text

        def __str__(self):
            return self.text

    order = read_order(TABLES / "zb1p_2rank_2stagep_compute.csv")
    wrapped = {rank: [None if a is None else Action(a) for a in row] for rank, row in order.items()}
    assert pipevm.check_pipeline_order(wrapped).ok


def test_lowering_is_pytorchs():
    compute = read_order(TABLES / "zb1p_2rank_2stagep_compute.csv")
    comms = read_order(TABLES / "zb1p_2rank_2stagep_comms.csv")
    assert pipevm.lower_pipeline_order(compute) == comms
