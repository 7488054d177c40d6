"""pipevm.synthesize and pipevm.lower: the schedule's text passes pipevm.check,
its bubble is no worse than ZB-H1's at the same costs, the header is the
CLI's, and impossible requests raise ScheduleError with the CLI's message."""

import subprocess

import pytest
from conftest import PIPEVM_EXE, SOURCE_DIR

import pipevm

COSTS = {"fwd": 1, "bwd-input": 1, "bwd-weight": 1}
ZB_H1 = SOURCE_DIR / "schedules" / "zb-h1.pipe"


@pytest.fixture(scope="module")
def synthesized():
    return pipevm.synthesize(stages=4, micro_batches=8, costs=COSTS, memory_limit=4,
                             time_limit=0.5)


def test_text_passes_check(synthesized):
    result = pipevm.check(synthesized.text, stages=4, micro_batches=8, name="synthesized.pipe")
    assert result.ok, [str(f) for f in result.findings]
    assert pipevm.check(synthesized.text, stages=4, micro_batches=8, name="synthesized.pipe",
                        p2p_order="posted").ok


def test_bubble_at_most_zb_h1s(synthesized):
    zb_h1 = pipevm.simulate(ZB_H1, stages=4, micro_batches=8, costs=COSTS)
    assert synthesized.bubble_fraction <= zb_h1.bubble_fraction + 1e-9
    assert synthesized.makespan <= zb_h1.makespan + 1e-9
    again = pipevm.simulate(synthesized.text, name="synthesized.pipe", costs=COSTS)
    assert again.makespan == pytest.approx(synthesized.makespan)


def test_figures(synthesized):
    assert synthesized.configuration.stages == 4
    assert synthesized.placement == "looped"
    assert len(synthesized.peak_memory) == 4
    assert max(synthesized.peak_memory) <= 4
    assert 0 <= synthesized.bubble_rate_zb < 1
    assert synthesized.lower_bound <= synthesized.longest_span
    assert synthesized.optimal == (synthesized.longest_span <= synthesized.lower_bound * (1 + 1e-9))
    assert synthesized.evaluations > 0


def test_header_is_the_clis(synthesized):
    lines = synthesized.text.splitlines()
    assert lines[0] == "# Synthesized by `pipevm synthesize` (docs/synthesize.md)."
    assert lines[1].startswith("# command: pipevm.synthesize(stages=4, micro_batches=8")
    cli = subprocess.run([PIPEVM_EXE, "synthesize", "-p", "4", "-m", "8", "--cost",
                          "fwd=1,bwd-input=1,bwd-weight=1", "--memory-limit", "4",
                          "--time-limit", "0.5"], capture_output=True, text=True, check=True)
    cli_lines = cli.stdout.splitlines()
    # The inputs line is the same whichever door asked.
    assert lines[2] == cli_lines[2]
    assert "schedule synthesized" in lines


def test_torch_csv(synthesized):
    table = synthesized.to_torch_csv()
    assert len(table.splitlines()) == 4
    assert "SEND_F" in table


def test_impossible_memory_limit_raises_the_clis_message():
    with pytest.raises(pipevm.ScheduleError) as raised:
        pipevm.synthesize(stages=4, micro_batches=8, costs=COSTS, memory_limit=0.5)
    cli = subprocess.run([PIPEVM_EXE, "synthesize", "-p", "4", "-m", "8", "--memory-limit", "0.5"],
                         capture_output=True, text=True, check=False)
    assert cli.returncode == 2
    assert cli.stderr.strip() == "pipevm synthesize: " + str(raised.value)
    assert "below what any schedule needs" in str(raised.value)


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match="placement"):
        pipevm.synthesize(stages=4, micro_batches=8, placement="mirror")
    with pytest.raises(ValueError, match="transfer"):
        pipevm.synthesize(stages=4, micro_batches=8, transfer="pigeon")
    with pytest.raises(pipevm.ScheduleError, match="chunks 2"):
        pipevm.synthesize(stages=4, micro_batches=8, placement="v", time_limit=0)


def test_memory_limit_in_bytes_as_the_cli_takes_it():
    roomy = pipevm.synthesize(stages=2, micro_batches=4, costs=COSTS, time_limit=0,
                              memory_limit="1GiB")
    assert len(roomy.peak_bytes) == 2
    most = max(roomy.peak_bytes)
    tight = pipevm.synthesize(stages=2, micro_batches=4, costs=COSTS, time_limit=0,
                              memory_limit=f"{most - 1}B", p2p_order="posted")
    assert max(tight.peak_bytes) <= most - 1
    assert "p2p order posted" in tight.text
    cli = subprocess.run([PIPEVM_EXE, "synthesize", "-p", "2", "-m", "4", "--cost",
                          "fwd=1,bwd-input=1,bwd-weight=1", "--time-limit", "0",
                          "--memory-limit", f"{most - 1}B", "--p2p-order", "posted"],
                         capture_output=True, text=True, check=True)
    assert tight.text.splitlines()[2] == cli.stdout.splitlines()[2]
    for bad in ("12 parsecs", "-1", True, [2]):
        with pytest.raises(ValueError, match="memory_limit"):
            pipevm.synthesize(stages=2, micro_batches=4, memory_limit=bad)
    with pytest.raises(ValueError, match="p2p_order"):
        pipevm.synthesize(stages=2, micro_batches=4, p2p_order="nccl")


def test_max_moves_gives_the_same_schedule_every_time():
    runs = [pipevm.synthesize(stages=3, micro_batches=6, costs=COSTS, memory_limit=3,
                              time_limit=60, max_moves=200) for _ in range(2)]
    assert runs[0].text == runs[1].text
    with pytest.raises(ValueError, match="max_moves"):
        pipevm.synthesize(stages=2, micro_batches=4, max_moves=-1)


def test_cost_file(tmp_path):
    costs = tmp_path / "costs.yaml"
    costs.write_text("fwd: 1\nbwd-input: 1\nbwd-weight: 1\n")
    from_file = pipevm.synthesize(stages=2, micro_batches=4, costs=costs, time_limit=0)
    from_dict = pipevm.synthesize(stages=2, micro_batches=4, costs=COSTS, time_limit=0)
    assert from_file.makespan == from_dict.makespan
    with pytest.raises(ValueError):
        pipevm.synthesize(stages=2, micro_batches=4, costs=str(tmp_path / "none.yaml"))


def test_lower_keeps_zb_h1s_order():
    lowered = pipevm.lower(ZB_H1, stages=4, micro_batches=8, costs=COSTS)
    assert lowered.origin == "given order"
    assert pipevm.check(lowered.text, name="lowered.pipe").ok
    zb_h1 = pipevm.simulate(ZB_H1, stages=4, micro_batches=8, costs=COSTS)
    assert lowered.order_makespan == pytest.approx(zb_h1.makespan)
    with pytest.raises(pipevm.ScheduleError):
        pipevm.lower("not a schedule\n", stages=2, micro_batches=2)


def test_never_worse_than_the_shipped_schedules_that_fit():
    # Issue 35's looped case: at interleaved-zb.pipe's peak (5.5 M_B) the
    # result is no worse than it, and meets its bound; the result grew from
    # a seed and is never longer than it.
    shipped = pipevm.simulate(SOURCE_DIR / "schedules" / "interleaved-zb.pipe", stages=4,
                              micro_batches=16, chunks=2, costs=COSTS)
    best = pipevm.synthesize(stages=4, micro_batches=16, chunks=2, costs=COSTS,
                             memory_limit=5.5, time_limit=0)
    assert best.bubble_rate_zb <= shipped.bubble_rate_zb
    assert best.bubble_rate_zb == 0 and best.optimal
    assert best.longest_span <= best.seed_span
    assert best.origin and best.lower_bound_term == "stage work"


def test_v_zb_row_has_no_bubble():
    # The controllable-memory paper's V-ZB row: zero bubble at 1F1B's
    # memory (p M_B, 2p chunk activations) when m >= 2p.
    best = pipevm.synthesize(stages=8, micro_batches=16, chunks=2, placement="v", costs=COSTS,
                             memory_limit=8, time_limit=0)
    assert best.bubble_rate_zb == 0
    assert best.origin == "V-ZB"


def test_memory_policy_reports_its_choices():
    # Issue 36: under a limit of 1 M_B on 2 stages (half of 1F1B's), `any`
    # offloads where the host link hides the copy; `keep` is the keep-only
    # search; `recompute` never offloads and is never better than `any`.
    costs = {"fwd": 1, "bwd": 2, "recompute": 1, "host-latency": 0.5}
    chosen = pipevm.synthesize(stages=2, micro_batches=4, costs=costs, memory_limit=1,
                               time_limit=0)
    assert pipevm.check(chosen.text, name="synthesized.pipe").ok
    assert len(chosen.memory_policies) == 2
    assert sum(offloaded for _, _, offloaded in chosen.memory_policies) > 0
    assert "memory policy any" in chosen.text
    assert len(chosen.device_peak_bytes) == 2 and max(chosen.host_peak_bytes) > 0
    kept = pipevm.synthesize(stages=2, micro_batches=4, costs=costs, memory_limit=1,
                             time_limit=0, memory_policy="keep")
    assert kept.memory_policies == [] and "Recompute" not in kept.text
    assert "memory_policy='keep'" in kept.text
    recomputed = pipevm.synthesize(stages=2, micro_batches=4, costs=costs, memory_limit=1,
                                   time_limit=0, memory_policy="recompute")
    assert "Offload" not in recomputed.text
    assert (chosen.longest_span, chosen.makespan) <= (recomputed.longest_span,
                                                      recomputed.makespan)
    with pytest.raises(ValueError, match="memory_policy"):
        pipevm.synthesize(stages=2, micro_batches=4, memory_limit=1, memory_policy="checkpoint")
