"""pipevm.synthesize given per-layer costs (issue 37): a TorchProfile or a cost
file with `layers:` gives the same cut and program as `pipevm synthesize
--costs` does; the cut can be fixed; a byte limit is met; bad cuts and
impossible limits are refused. Needs no torch: the profile is built by hand."""

import pytest
from conftest import run_cli

import pipevm


def profile():
    widths = [9.0, 30.0, 12.0, 11.0, 25.0, 8.0, 14.0]
    return pipevm.TorchProfile(
        layers=[pipevm.LayerCost(name=f"layer {i}", fwd=w, bwd_input=1.1 * w, bwd_weight=0.5 * w,
                                 activation_bytes=1000 * (7 - i), weight_activation_bytes=200,
                                 parameter_bytes=4000, output_bytes=256)
                for i, w in enumerate(widths)],
        device="cpu", repeats=1)


def test_profile_and_its_file_give_the_cli_result(tmp_path):
    path = tmp_path / "layers.yaml"
    profile().write(path)
    from_profile = pipevm.synthesize(stages=3, micro_batches=6, costs=profile(), time_limit=0)
    from_file = pipevm.synthesize(stages=3, micro_batches=6, costs=str(path), time_limit=0)
    assert from_profile.cut == from_file.cut != ""
    assert from_profile.makespan == from_file.makespan
    status, text = run_cli("synthesize", "-p", "3", "-m", "6", "--costs", path, "--time-limit", "0")
    assert status == 0
    assert f"# cut: {from_file.cut}," in text
    body = lambda t: [line for line in t.splitlines() if not line.startswith("# command:")]
    assert body(text) == body(from_file.text)


def test_the_program_passes_check_and_records_its_cut():
    result = pipevm.synthesize(stages=3, micro_batches=6, costs=profile(), time_limit=0)
    pieces = result.cut.split(",")
    assert len(pieces) == 3 and all(pieces)
    assert f"\ncut {result.cut}\n" in result.text
    assert pipevm.expand(result.text, name="synthesized.pipe").cut == result.cut
    assert pipevm.check(result.text, name="synthesized.pipe").ok


def test_a_fixed_cut():
    even = pipevm.synthesize(stages=3, micro_batches=6, costs=profile(), time_limit=0, cut="even")
    assert even.cut == "0-2,3-4,5-6"
    given = pipevm.synthesize(stages=3, micro_batches=6, costs=profile(), time_limit=0,
                              cut="0,1-3,4-6")
    assert given.cut == "0,1-3,4-6"
    chosen = pipevm.synthesize(stages=3, micro_batches=6, costs=profile(), time_limit=0)
    assert chosen.makespan <= even.makespan + 1e-9


def test_a_byte_limit_is_met():
    free = pipevm.synthesize(stages=3, micro_batches=6, costs=profile(), time_limit=0)
    limit = max(free.peak_bytes) * 7 // 10
    limited = pipevm.synthesize(stages=3, micro_batches=6, costs=profile(), time_limit=0,
                                memory_limit=limit)
    assert max(limited.peak_bytes) <= limit
    assert f"memory limit {limit} bytes per stage" in limited.text


def test_refusals():
    with pytest.raises(ValueError, match="must end at layer 6"):
        pipevm.synthesize(stages=3, micro_batches=6, costs=profile(), cut="0-1,2-3,4-5")
    with pytest.raises(ValueError, match="needs per-layer costs"):
        pipevm.synthesize(stages=3, micro_batches=6, costs={"fwd": 1}, cut="even")
    with pytest.raises(pipevm.ScheduleError, match="the least that works is"):
        pipevm.synthesize(stages=3, micro_batches=6, costs=profile(), memory_limit="1kB")
    with pytest.raises(pipevm.ScheduleError, match="cannot cut 7 layers into 8"):
        pipevm.synthesize(stages=8, micro_batches=8, costs=profile())
