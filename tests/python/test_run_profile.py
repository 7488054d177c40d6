"""`pipevm run --profile` writes `layers:` beside its per-stage medians:
one entry per model layer, each pass timed (positive), and the bytes the
model's shape gives, for the MLP and the ViT; the file is a cost file that
`pipevm simulate` reads."""

import re

import pytest
from conftest import SOURCE_DIR, run_cli

yaml = pytest.importorskip("yaml")

GPIPE = SOURCE_DIR / "schedules" / "gpipe.pipe"
FLOAT = 4


def profile(tmp_path, *arguments):
    path = tmp_path / "profile.yaml"
    status, out = run_cli("run", GPIPE, "--data", "synthetic", "--epochs", "1", "--no-progress",
                          "--profile", path, "--profile-steps", "2", *arguments)
    assert status == 0, out
    return yaml.safe_load(path.read_text()), out, path


def test_the_mlp_profile_has_each_layers_passes_and_bytes(tmp_path):
    widths = [784, 48, 32, 10]
    written, _, path = profile(tmp_path, "--model", ",".join(map(str, widths)))
    assert written["fwd"] > 0  # the per-stage medians are still there
    layers = written["layers"]
    assert len(layers) == len(widths) - 1
    rows = 128 // 4  # the default batch over the default micro-batches
    for index, layer in enumerate(layers):
        assert layer["fwd"] > 0 and layer["bwd-weight"] > 0
        if index > 0:  # the first layer's input half has no input gradient to compute
            assert layer["bwd-input"] > 0
        inputs, outputs = widths[index], widths[index + 1]
        assert layer["activation-bytes"] == rows * inputs * FLOAT
        assert layer["weight-activation-bytes"] == rows * inputs * FLOAT
        assert layer["parameter-bytes"] == (inputs * outputs + outputs) * FLOAT
        assert layer["output-bytes"] == rows * outputs * FLOAT
    status, out = run_cli("simulate", GPIPE, "-p", "2", "-m", "4", "--costs", path)
    assert status == 0
    assert "the even cut 0-1,2 (the program declares no cut)" in out


def test_the_vit_profile_has_each_blocks_passes_and_bytes(tmp_path):
    written, out, _ = profile(tmp_path, "--config", SOURCE_DIR / "tests" / "vm" / "report_vit.yaml")
    layers = written["layers"]
    assert len(layers) == 4  # the configuration's four blocks
    for layer in layers:
        assert layer["fwd"] > 0 and layer["bwd-input"] > 0 and layer["bwd-weight"] > 0
        assert layer["activation-bytes"] > 0
        assert 0 < layer["weight-activation-bytes"] <= layer["activation-bytes"]
    parameters = int(re.search(r"\((\d+) parameters\)", out).group(1))
    assert sum(layer["parameter-bytes"] for layer in layers) == parameters * FLOAT
    rows = 64 // 4  # batch 64 over 4 micro-batches; 4 tokens of width 8 between blocks
    assert [layer["output-bytes"] for layer in layers[:-1]] == [rows * 4 * 8 * FLOAT] * 3
    assert layers[-1]["output-bytes"] == rows * 10 * FLOAT  # the classes
