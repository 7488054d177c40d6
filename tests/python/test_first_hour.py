"""A new user's first hour from Python (issue 39): wrong argument types and
ranges name the argument, every result prints its key figures, a
ScheduleError is one line with the details apart, errors about a
pipeline_order name the rank and the action, and keywords name one
configuration; cost files that do not fit the program are refused at their
place, and costs left unset are warned of."""

import pytest
from conftest import SOURCE_DIR

import pipevm

ONE_F_ONE_B = str(SOURCE_DIR / "schedules" / "1f1b.pipe")
CORPUS = SOURCE_DIR / "tests" / "check" / "corpus"


def test_wrong_types_and_ranges_name_the_argument():
    with pytest.raises(OverflowError, match="stages=1000000000000 is out of range"):
        pipevm.check(ONE_F_ONE_B, stages=10**12, micro_batches=8)
    with pytest.raises(TypeError, match="stages must be an int or a .first, last. pair of ints, not str"):
        pipevm.check(ONE_F_ONE_B, stages="4", micro_batches=8)
    with pytest.raises(TypeError, match="micro_batches must be an int"):
        pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=(1, "8"))
    with pytest.raises(TypeError, match="schedule must be a path .* not bytes: decode it first"):
        pipevm.check(b"schedule x\n")
    with pytest.raises(ValueError, match="stages must be an int"):
        pipevm.check(ONE_F_ONE_B, stages=0, micro_batches=8)


def test_every_result_prints_its_figures():
    checked = pipevm.check(ONE_F_ONE_B, stages=4, micro_batches=8)
    simulation = pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=8)
    expansion = pipevm.expand(ONE_F_ONE_B, stages=2, micro_batches=2)
    values = [checked, checked.memory[0], checked.per_rank[0], simulation, simulation.ranks[0],
              simulation.stages[0], simulation.per_rank[0], expansion, simulation.configuration]
    for value in values:
        assert " object at 0x" not in repr(value), repr(value)
    assert "makespan 33" in repr(simulation)
    assert "peak_bytes" in repr(checked.per_rank[0])
    assert "peak_activations" in repr(checked.memory[0])


def test_keywords_name_one_configuration_with_its_memory():
    result = pipevm.check(ONE_F_ONE_B, stages=4, micro_batches=8)
    assert result.checked == 1
    assert [m.stage for m in result.memory] == [0, 1, 2, 3]


def test_a_schedule_error_is_one_line_with_the_details_apart():
    with pytest.raises(pipevm.ScheduleError) as raised:
        pipevm.simulate(str(CORPUS / "deadlock_receive_first.pipe"), stages=2, micro_batches=4)
    assert "\n" not in str(raised.value)
    assert raised.value.details.startswith(str(raised.value))


def test_pipeline_order_errors_name_the_rank_and_the_action():
    order = {0: ["0F0", "0F1", "0F2", None, "0B0", "0B1", "0B2"],
             1: [None, "1F0", "1F1", "1B0", "1F2", "1B1", "1B2"]}
    with pytest.raises(pipevm.ScheduleError,
                       match="n_microbatches=2, but the order's actions name 3 micro-batches "
                             r"\(rank 0's action at step 2, '0F2', is the first beyond it\)"):
        pipevm.check_pipeline_order(order, num_stages=2, n_microbatches=2)


def test_cost_files_with_wrong_stage_counts_and_unset_costs(tmp_path):
    six = tmp_path / "six.yaml"
    six.write_text("fwd: 1\nbwd: 2\nstages:\n" + "  - fwd: 1\n" * 6)
    where = r"six\.yaml:3:1: the costs give 6 `stages:` entries, for a program of 4 stages"
    with pytest.raises(ValueError, match=where):
        pipevm.simulate(ONE_F_ONE_B, stages=4, micro_batches=8, costs=str(six))
    with pytest.raises(ValueError, match=where):
        pipevm.synthesize(stages=4, micro_batches=8, costs=str(six))
    with pytest.warns(UserWarning, match="'bwd-weight' unset: BwdWeight takes no time"):
        pipevm.synthesize(stages=2, micro_batches=4, costs={"fwd": 1, "bwd-input": 1})


def test_a_program_synthesized_with_per_layer_costs_says_its_defaults_differ():
    program = str(SOURCE_DIR / "tests" / "vm" / "synthesized-cut-p2-m4.pipe")
    with pytest.warns(UserWarning, match="synthesized with per-stage or per-layer costs"):
        pipevm.simulate(program)
