"""pipevm.profile_torch on a small model of Linear, ReLU and attention pieces,
on the CPU: positive times, bytes that are the tensors' numel x element size
where they can be counted exactly, and a cost file that reads back."""

import pytest
from conftest import SOURCE_DIR

import pipevm

torch = pytest.importorskip("torch")
yaml = pytest.importorskip("yaml")

BATCH, WIDTH, HIDDEN = 8, 32, 48
FLOAT = 4


class SelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(HIDDEN, 4, batch_first=True)

    def forward(self, x):
        tokens = x.view(BATCH, 4, HIDDEN // 4).repeat(1, 1, 4)
        return self.attention(tokens, tokens, tokens, need_weights=False)[0].reshape(BATCH, -1)


def model():
    torch.manual_seed(0)
    return [torch.nn.Linear(WIDTH, HIDDEN), torch.nn.ReLU(), SelfAttention(),
            torch.nn.Linear(4 * HIDDEN, 10)]


def test_times_and_exact_bytes():
    profile = pipevm.profile_torch(model(), torch.randn(BATCH, WIDTH), repeats=3, warmup=1)
    assert len(profile.layers) == 4
    linear, relu, attention, head = profile.layers
    for layer in (linear, attention, head):
        assert layer.fwd > 0 and layer.bwd_input > 0 and layer.bwd_weight > 0
        assert layer.bwd_weight < layer.bwd_input + layer.bwd_weight
    assert relu.fwd > 0 and relu.bwd_input > 0 and relu.bwd_weight == 0
    # A Linear saves its input for both halves; its weight is a parameter.
    assert linear.activation_bytes == BATCH * WIDTH * FLOAT
    assert linear.weight_activation_bytes == BATCH * WIDTH * FLOAT
    assert linear.parameter_bytes == (WIDTH * HIDDEN + HIDDEN) * FLOAT
    assert linear.output_bytes == BATCH * HIDDEN * FLOAT
    # ReLU saves its output for its input gradient, and has no weight half.
    assert relu.activation_bytes == BATCH * HIDDEN * FLOAT
    assert relu.weight_activation_bytes == 0 and relu.parameter_bytes == 0
    assert head.activation_bytes == BATCH * 4 * HIDDEN * FLOAT
    assert head.output_bytes == BATCH * 10 * FLOAT
    assert attention.activation_bytes > 0
    assert attention.parameter_bytes == sum(p.numel() * FLOAT for p in model()[2].parameters())
    assert "4 layers on cpu" in repr(profile)


def test_token_ids_have_no_input_gradient():
    embedding = torch.nn.Embedding(100, WIDTH)
    profile = pipevm.profile_torch([embedding], torch.randint(0, 100, (BATCH, 5)), repeats=2,
                                   warmup=0)
    (layer,) = profile.layers
    assert layer.bwd_input == 0 and layer.bwd_weight > 0
    assert layer.output_bytes == BATCH * 5 * WIDTH * FLOAT


def test_the_written_file_reads_back(tmp_path):
    profile = pipevm.profile_torch(model(), torch.randn(BATCH, WIDTH), repeats=2, warmup=0)
    profile.write(tmp_path / "layers.yaml")
    written = yaml.safe_load((tmp_path / "layers.yaml").read_text())
    assert len(written["layers"]) == 4
    for entry, layer in zip(written["layers"], profile.layers):
        assert entry["name"] == layer.name
        assert entry["fwd"] == layer.fwd
        assert entry["bwd-input"] == layer.bwd_input
        assert entry["bwd-weight"] == layer.bwd_weight
        assert entry["activation-bytes"] == layer.activation_bytes
        assert entry["weight-activation-bytes"] == layer.weight_activation_bytes
        assert entry["parameter-bytes"] == layer.parameter_bytes
        assert entry["output-bytes"] == layer.output_bytes


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="repeats"):
        pipevm.profile_torch(model(), torch.randn(BATCH, WIDTH), repeats=0)
    with pytest.raises(TypeError, match=r"layers\[1\]"):
        pipevm.profile_torch([torch.nn.ReLU(), "relu"], torch.randn(BATCH, WIDTH))
    with pytest.raises(TypeError, match="example"):
        pipevm.profile_torch(model(), [1, 2, 3])
    with pytest.raises(ValueError, match="empty"):
        pipevm.profile_torch([], torch.randn(BATCH, WIDTH))


def test_the_written_file_times_the_simulation(tmp_path):
    """The file profile_torch writes is a cost file simulate reads: on one
    stage and one micro-batch the makespan is the layers' summed passes."""
    profile = pipevm.profile_torch(model(), torch.randn(BATCH, WIDTH), repeats=2, warmup=0)
    path = tmp_path / "layers.yaml"
    profile.write(path)
    simulated = pipevm.simulate(SOURCE_DIR / "schedules" / "gpipe.pipe", stages=1, micro_batches=1,
                                costs=path)
    total = sum(layer.fwd + layer.bwd_input + layer.bwd_weight for layer in profile.layers)
    assert simulated.makespan == pytest.approx(total, rel=1e-9)
