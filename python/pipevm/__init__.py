"""pipevm: pipeline-parallel training schedules as checked programs.

Check a schedule for deadlock and mismatched communication, simulate its
timeline, expand it into each rank's instruction stream, check PyTorch's
in-memory ``pipeline_order`` by the same rules as ``pipevm check TABLE.csv``,
and synthesize the least-bubble schedule for costs and a memory limit::

    import pipevm
    result = pipevm.check("schedules/1f1b.pipe", stages=4, micro_batches=8)
    assert result.ok, [str(f) for f in result.findings]

    order = {0: ["0F0", "0F1", "0B0", "0B1"], 1: [None, "1F0", "1B0", "1F1", "1B1"]}
    pipevm.check_pipeline_order(order, num_stages=2, n_microbatches=2)

    best = pipevm.synthesize(stages=4, micro_batches=8, memory_limit=4,
                             costs={"fwd": 1, "bwd-input": 1, "bwd-weight": 1})
    print(best.makespan, best.bubble_rate_zb)
    open("best.pipe", "w").write(best.text)

Bad input (a syntax error, a malformed action, no configuration) raises
:class:`ScheduleError` with its position; a schedule that reads but is wrong
is a result with ``ok == False`` and its findings. docs/python.md has more.
"""

from ._pipevm import (
    CheckResult,
    Configuration,
    Expansion,
    Finding,
    Note,
    RankBytes,
    RankFigures,
    ScheduleError,
    Simulation,
    StageFigures,
    StageMemory,
    Synthesis,
    __version__,
    check,
    check_pipeline_order,
    expand,
    lower,
    lower_pipeline_order,
    simulate,
    synthesize,
)
from ._torch_profile import LayerCost, TorchProfile, profile_torch

__all__ = [
    "CheckResult",
    "Configuration",
    "Expansion",
    "Finding",
    "LayerCost",
    "Note",
    "RankBytes",
    "RankFigures",
    "ScheduleError",
    "Simulation",
    "StageFigures",
    "StageMemory",
    "Synthesis",
    "TorchProfile",
    "__version__",
    "check",
    "check_pipeline_order",
    "expand",
    "lower",
    "lower_pipeline_order",
    "profile_torch",
    "simulate",
    "synthesize",
]
