"""`pipevm costs --from-torch-trace` on real torch.profiler traces: a two-stage
pipeline written in plain PyTorch, each pass labelled as PyTorch's pipelining
runtime labels it, profiled on the CPU. The medians pipevm writes must be
those computed here from the same JSON."""

import json
import statistics
import subprocess
from collections import defaultdict

import pytest

from conftest import PIPEVM_EXE, SOURCE_DIR, run_cli

torch = pytest.importorskip("torch")
yaml = pytest.importorskip("yaml")

KEYS = {"F": "fwd", "I": "bwd-input", "W": "bwd-weight"}
STEPS = 4
MICRO_BATCHES = 3


def profile_pipeline(path):
    """Writes the Chrome trace of STEPS steps of a 2-stage pipeline, each
    backward split into its input half (I) and its weight half (W)."""
    torch.manual_seed(0)
    stages = [torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU()),
              torch.nn.Linear(48, 10)]
    batches = [torch.randn(8, 32) for _ in range(MICRO_BATCHES)]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(STEPS):
            for mb, batch in enumerate(batches):
                inputs = [batch.requires_grad_(True)]
                outputs = []
                for s, stage in enumerate(stages):
                    with torch.profiler.record_function(f"PP:{s}F{mb}"):
                        outputs.append(stage(inputs[-1]))
                    inputs.append(outputs[-1].detach().requires_grad_(True))
                grad = torch.ones_like(outputs[-1])
                for s in reversed(range(len(stages))):
                    with torch.profiler.record_function(f"PP:{s}I{mb}"):
                        (grad_in,) = torch.autograd.grad(outputs[s], inputs[s], grad,
                                                         retain_graph=True)
                    with torch.profiler.record_function(f"PP:{s}W{mb}"):
                        torch.autograd.grad(outputs[s], list(stages[s].parameters()), grad)
                    grad = grad_in
    prof.export_chrome_trace(str(path))


def events_of(trace):
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def expected_medians(trace, skip_steps):
    """Per stage and key, the median duration of the labelled events after
    the first skip_steps occurrences of each label."""
    seen = defaultdict(int)
    durations = defaultdict(list)
    labelled = [e for e in events_of(trace) if e.get("ph") == "X"
                and e.get("name", "").startswith("PP:")]
    for e in sorted(labelled, key=lambda e: e["ts"]):
        name = e["name"]
        seen[name] += 1
        if seen[name] > skip_steps:
            durations[(int(name[3]), KEYS[name[4]])].append(float(e["dur"]))
    return {key: statistics.median(values) for key, values in durations.items()}


def written_stages(path):
    """The per-stage entries of a cost file pipevm wrote, as dictionaries."""
    with open(path) as f:
        return yaml.safe_load(f)["stages"]


def assert_costs_match(trace, costs_path, skip_steps):
    expected = expected_medians(trace, skip_steps)
    stages = written_stages(costs_path)
    assert len(stages) == 2
    for (stage, key), value in expected.items():
        assert stages[stage][key] == pytest.approx(value, rel=0.01), (stage, key)


def test_medians_of_a_real_trace(tmp_path):
    trace_path = tmp_path / "trace.json"
    profile_pipeline(trace_path)
    trace = json.loads(trace_path.read_text())
    status, _ = run_cli("costs", "--from-torch-trace", trace_path, "-o", tmp_path / "costs.yaml")
    assert status == 0
    assert_costs_match(trace, tmp_path / "costs.yaml", skip_steps=1)

    status, out = run_cli("simulate", SOURCE_DIR / "schedules" / "zb-h1.pipe", "-p", "2", "-m", "4",
                          "--costs", tmp_path / "costs.yaml")
    assert status == 0
    assert "makespan" in out


def test_kineto_object_with_fractional_timestamps(tmp_path):
    trace_path = tmp_path / "trace.json"
    profile_pipeline(trace_path)
    events = events_of(json.loads(trace_path.read_text()))
    for e in events:
        if "ts" in e:
            e["ts"] = e["ts"] + 0.375
            e["cat"] = "user_annotation"
    kineto = {"schemaVersion": 1, "traceEvents": events}
    (tmp_path / "kineto.json").write_text(json.dumps(kineto))
    status, _ = run_cli("costs", "--from-torch-trace", tmp_path / "kineto.json", "--skip-steps", "2",
                        "-o", tmp_path / "costs.yaml")
    assert status == 0
    assert_costs_match(kineto, tmp_path / "costs.yaml", skip_steps=2)


def test_a_trace_without_labels_is_refused_with_what_to_add(tmp_path):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.nn.Linear(4, 4)(torch.randn(2, 4))
    prof.export_chrome_trace(str(tmp_path / "plain.json"))
    done = subprocess.run([PIPEVM_EXE, "costs", "--from-torch-trace", str(tmp_path / "plain.json")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "record_function" in done.stderr
