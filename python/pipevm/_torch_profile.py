"""Per-layer costs of a PyTorch model, measured the way pipevm's cost files
hold them (``layers:``, docs/simulator.md), so that ``pipevm synthesize`` can
choose where to cut the model together with the schedule.

Each piece is timed on the device its parameters and the example live on
(CUDA events on a GPU, ``time.perf_counter`` on the CPU): its forward, its
input-gradient half (``torch.autograd.grad`` over its input) and its
weight-gradient half (over its parameters), each the median of ``repeats``
runs after ``warmup`` runs. Bytes are counted, not timed: what the forward
saves for the backward (``torch.autograd.graph.saved_tensors_hooks``, the
piece's parameters left out), what a forward whose input needs no gradient
saves (what the weight half still needs), the parameters, and the output
(the message if the model is cut after the piece).

torch is imported when ``profile_torch`` is called, never by ``import pipevm``.
"""

import statistics
import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

# The cost file's per-layer keys, in the order they are written, and the
# attribute of LayerCost that holds each.
_KEYS = (
    ("fwd", "fwd"),
    ("bwd-input", "bwd_input"),
    ("bwd-weight", "bwd_weight"),
    ("activation-bytes", "activation_bytes"),
    ("weight-activation-bytes", "weight_activation_bytes"),
    ("parameter-bytes", "parameter_bytes"),
    ("output-bytes", "output_bytes"),
)


@dataclass
class LayerCost:
    """One piece of the model: times in microseconds, sizes in bytes (per
    micro-batch of the example's size for the activations and the output)."""

    name: str
    fwd: float
    bwd_input: float
    bwd_weight: float
    activation_bytes: int
    weight_activation_bytes: int
    parameter_bytes: int
    output_bytes: int


@dataclass
class TorchProfile:
    """What :func:`profile_torch` measured: one :class:`LayerCost` per piece,
    first piece first. ``write(path)`` writes it as a cost file that
    ``pipevm synthesize --costs`` and ``pipevm.synthesize(costs=...)`` read."""

    layers: List[LayerCost] = field(default_factory=list)
    device: str = "cpu"
    repeats: int = 0

    def to_yaml(self) -> str:
        """The cost file's text: a comment header and the ``layers:`` list."""
        lines = [
            "# pipevm cost model (pipevm simulate --costs FILE); time unit: microseconds",
            f"# measured by pipevm.profile_torch on {self.device}: medians of "
            f"{self.repeats} runs per pass",
            "layers:  # per layer, first layer first",
        ]
        for layer in self.layers:
            lines.append(f"  - name: {_yaml_string(layer.name)}")
            for key, attribute in _KEYS:
                lines.append(f"    {key}: {_number(getattr(layer, attribute))}")
        return "\n".join(lines) + "\n"

    def write(self, path) -> None:
        """Writes :meth:`to_yaml` to ``path``."""
        with open(path, "w", encoding="utf-8") as out:
            out.write(self.to_yaml())

    def __repr__(self) -> str:
        total = sum(layer.fwd + layer.bwd_input + layer.bwd_weight for layer in self.layers)
        return (f"TorchProfile({len(self.layers)} layers on {self.device}, "
                f"{total:.1f} us of compute per micro-batch)")


def _yaml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _number(value) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _tensor_bytes(tensor) -> int:
    return tensor.numel() * tensor.element_size()


class _Clock:
    """Times a callable on the device: CUDA events around it on a GPU, the
    wall clock (after a synchronize) elsewhere. Microseconds."""

    def __init__(self, torch, device):
        self.torch = torch
        self.cuda = device.type == "cuda"

    def time(self, run) -> float:
        if self.cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1000.0
        began = time.perf_counter()
        run()
        return (time.perf_counter() - began) * 1e6


def _saved_bytes(torch, run, parameters) -> int:
    """Bytes of the tensors autograd saves while `run` runs, each storage
    counted once and the parameters left out."""
    parameter_storages = {p.data_ptr() for p in parameters}
    seen = set()
    total = 0

    def pack(tensor):
        nonlocal total
        key = (tensor.data_ptr(), tensor.numel(), tensor.dtype)
        if tensor.data_ptr() not in parameter_storages and key not in seen:
            seen.add(key)
            total += _tensor_bytes(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    return total


def _first_tensor(value, torch):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    raise TypeError(f"profile_torch: a layer returned {type(value).__name__}, not a tensor")


def _profile_layer(torch, clock, layer, example, repeats, warmup, name):
    parameters = [p for p in layer.parameters() if p.requires_grad]
    differentiable = example.is_floating_point()
    x = example.detach().requires_grad_(differentiable)

    def forward():
        return _first_tensor(layer(x), torch)

    output = forward()
    grad = torch.ones_like(output)

    def input_half():
        if differentiable:
            torch.autograd.grad(output, x, grad, retain_graph=True)

    def weight_half():
        if parameters:
            torch.autograd.grad(output, parameters, grad, retain_graph=True)

    def median_time(run):
        for _ in range(warmup):
            run()
        return statistics.median(clock.time(run) for _ in range(repeats))

    fwd = median_time(forward)
    bwd_input = median_time(input_half) if differentiable else 0.0
    bwd_weight = median_time(weight_half) if parameters else 0.0

    activation_bytes = _saved_bytes(torch, forward, parameters)
    frozen_input = example.detach()
    weight_activation_bytes = (
        _saved_bytes(torch, lambda: layer(frozen_input), parameters) if parameters else 0)
    return LayerCost(
        name=name,
        fwd=fwd,
        bwd_input=bwd_input,
        bwd_weight=bwd_weight,
        activation_bytes=activation_bytes,
        weight_activation_bytes=weight_activation_bytes,
        parameter_bytes=sum(_tensor_bytes(p) for p in layer.parameters()),
        output_bytes=_tensor_bytes(output),
    ), output.detach()


def profile_torch(layers: Sequence, example, repeats: int = 20, warmup: int = 3,
                  names: Optional[Sequence[str]] = None) -> TorchProfile:
    """Measures each of ``layers`` (``torch.nn.Module``s, the model's pieces in
    pipeline order) on ``example`` (one micro-batch of the first piece's
    input; each later piece gets the output of the one before).

    Returns a :class:`TorchProfile`: per piece the median forward,
    input-gradient and weight-gradient microseconds, the bytes its forward
    saves for the backward (``activation-bytes``), the bytes a forward saves
    when only the parameters need gradients (``weight-activation-bytes``,
    what the weight half needs: exact for a piece that is one parametrized
    operation, an upper bound for a composite one), its parameter bytes and
    its output bytes. A piece whose input is not floating point (token ids)
    has no input gradient (0); one without parameters no weight gradient.
    """
    import torch

    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"profile_torch: repeats must be a whole number >= 1, not {repeats!r}")
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
        raise ValueError(f"profile_torch: warmup must be a whole number >= 0, not {warmup!r}")
    layers = list(layers)
    if not layers:
        raise ValueError("profile_torch: layers is empty: give the model's pieces in order")
    for i, layer in enumerate(layers):
        if not isinstance(layer, torch.nn.Module):
            raise TypeError(f"profile_torch: layers[{i}] is {type(layer).__name__}, "
                            "not a torch.nn.Module")
    if not isinstance(example, torch.Tensor):
        raise TypeError(f"profile_torch: example is {type(example).__name__}, not a torch.Tensor")
    if names is not None and len(names) != len(layers):
        raise ValueError(f"profile_torch: {len(names)} names for {len(layers)} layers")

    device = example.device
    clock = _Clock(torch, device)
    profile = TorchProfile(device=str(device), repeats=repeats)
    current = example
    for i, layer in enumerate(layers):
        name = names[i] if names is not None else f"{i}: {type(layer).__name__}"
        cost, current = _profile_layer(torch, clock, layer, current, repeats, warmup, name)
        profile.layers.append(cost)
    return profile


__all__ = ["LayerCost", "TorchProfile", "profile_torch"]
