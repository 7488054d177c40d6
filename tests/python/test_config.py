"""config=: check, simulate and synthesize read a `pipevm run` YAML file (or a
dict of its sections) as `--config` does, and report the bytes the CLI
reports for the MLP and the ViT; its costs section under costs=."""

import json
import subprocess

import pytest
from conftest import PIPEVM_EXE, SOURCE_DIR, run_cli

import pipevm

SCHEDULES = SOURCE_DIR / "schedules"
VIT = SOURCE_DIR / "tests" / "vm" / "report_vit.yaml"
MLP = SOURCE_DIR / "tests" / "vm" / "report.yaml"
VIT_DICT = {
    "model": {"kind": "vit", "image_side": 8, "patch": 4, "width": 8, "blocks": 4, "heads": 2,
              "hidden": 16},
    "training": {"batch_size": 64, "micro_batches": 4, "optimizer": "adam"},
}
FIELDS = ("rank", "stage", "weights", "gradients", "optimizer", "activations",
          "activation_gradients", "messages", "peak_bytes")


def as_json(per_rank):
    return [{field: getattr(rank, field) for field in FIELDS} for rank in per_rank]


def cli_per_rank(*arguments):
    status, out = run_cli(*arguments, "--format", "json")
    assert status == 0
    return json.loads(out)


@pytest.mark.parametrize("schedule", ["1f1b", "zb-h1"])
@pytest.mark.parametrize("config", [VIT, MLP], ids=["vit", "mlp"])
def test_simulate_bytes_equal_the_clis(schedule, config):
    path = SCHEDULES / f"{schedule}.pipe"
    simulation = pipevm.simulate(path, stages=2, micro_batches=4, config=str(config))
    cli = cli_per_rank("simulate", path, "--stages", 2, "--micro-batches", 4, "--config", config)
    assert as_json(simulation.per_rank) == [{f: r[f] for f in FIELDS} for r in cli["per_rank"]]
    assert simulation.to_json() == cli


def test_check_bytes_equal_the_clis():
    path = SCHEDULES / "zb-h1.pipe"
    result = pipevm.check(path, stages=4, micro_batches=8, dp=1, chunks=1, config=VIT)
    cli = cli_per_rank("check", path, "--stages", 4, "--micro-batches", 8, "--dp", 1, "--chunks", 1,
                       "--config", VIT)
    per_rank = cli["files"][0]["per_rank"]
    assert result.ok
    assert as_json(result.per_rank) == [{f: r[f] for f in FIELDS} for r in per_rank]


def test_the_vit_counts_more_than_the_default_mlp():
    path = SCHEDULES / "1f1b.pipe"
    default = pipevm.simulate(path, stages=2, micro_batches=4)
    vit = pipevm.simulate(path, stages=2, micro_batches=4, config=VIT)
    assert [r.peak_bytes for r in vit.per_rank] != [r.peak_bytes for r in default.per_rank]


def test_a_dict_is_read_as_the_file_is():
    path = SCHEDULES / "1f1b.pipe"
    from_file = pipevm.simulate(path, stages=2, micro_batches=4, config=VIT)
    from_dict = pipevm.simulate(path, stages=2, micro_batches=4, config=VIT_DICT)
    assert as_json(from_dict.per_rank) == as_json(from_file.per_rank)


def test_config_costs_come_under_costs_as_the_clis(tmp_path):
    config = tmp_path / "costs.yaml"
    config.write_text("model:\n  sizes: [16, 12, 10]\ncosts:\n  fwd: 2\n  bwd: 5\n")
    path = SCHEDULES / "gpipe.pipe"
    alone = pipevm.simulate(path, stages=2, micro_batches=4, config=config)
    assert alone.to_json() == cli_per_rank("simulate", path, "-p", 2, "-m", 4, "--config", config)
    over = pipevm.simulate(path, stages=2, micro_batches=4, config=config, costs="fwd=1")
    assert over.to_json() == cli_per_rank("simulate", path, "-p", 2, "-m", 4, "--config", config,
                                          "--cost", "fwd=1")
    assert over.makespan < alone.makespan


def test_synthesize_counts_the_configs_model():
    status, out = run_cli("check", SCHEDULES / "1f1b.pipe", "-p", 2, "-m", 4, "--dp", 1,
                          "--chunks", 1, "--config", VIT, "--format", "json")
    assert status == 0
    limit = max(r["peak_bytes"] for r in json.loads(out)["files"][0]["per_rank"])
    arguments = dict(stages=2, micro_batches=4, time_limit=0, memory_limit=f"{limit}B")
    python = pipevm.synthesize(config=str(VIT), **arguments)
    assert max(python.peak_bytes) <= limit
    cli = subprocess.run([PIPEVM_EXE, "synthesize", "-p", "2", "-m", "4", "--time-limit", "0",
                          "--memory-limit", f"{limit}B", "--config", str(VIT)],
                         capture_output=True, text=True, check=True)
    # The header's inputs line (the line after the command) and the program agree.
    assert python.text.splitlines()[2:] == cli.stdout.splitlines()[2:]
    # The default MLP needs more than the tiny ViT's peak: the limit was counted for the ViT.
    with pytest.raises(pipevm.ScheduleError, match="below what any schedule needs"):
        pipevm.synthesize(**arguments)


def test_bad_config_names_the_place(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  kind: vit\n  heads: 5\n")
    with pytest.raises(ValueError, match="bad.yaml:2:9: the ViT's sizes"):
        pipevm.simulate(SCHEDULES / "1f1b.pipe", stages=2, micro_batches=4, config=bad)
    with pytest.raises(ValueError, match="unknown key 'model.wdith'"):
        pipevm.check(SCHEDULES / "1f1b.pipe", stages=2, micro_batches=4,
                     config={"model": {"wdith": 3}})


def test_p2p_order_and_transfer_as_the_clis():
    path = SCHEDULES / "gpipe.pipe"
    for order in ("independent", "any", "posted"):
        cli = cli_per_rank("simulate", path, "-p", 4, "-m", 8, "--p2p-order", order,
                           "--transfer", "rendezvous", "--cost", "fwd=1,bwd=2,send=0.5")
        simulation = pipevm.simulate(path, stages=4, micro_batches=8, p2p_order=order,
                                     transfer="rendezvous", costs="fwd=1,bwd=2,send=0.5")
        assert simulation.to_json() == cli
    with pytest.raises(ValueError, match="p2p_order"):
        pipevm.simulate(path, stages=4, micro_batches=8, p2p_order="nccl")
    with pytest.raises(ValueError, match="transfer"):
        pipevm.simulate(path, stages=4, micro_batches=8, transfer="pigeon")
