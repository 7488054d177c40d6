# Type stubs of the package pipevm (the compiled pipevm._pipevm re-exported).
import os
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

__version__: str

# An int, or an inclusive (first, last) range that check sweeps.
Range = Union[int, Tuple[int, int]]
Schedule = Union[str, os.PathLike[str]]
# A cost model: {'fwd': 1, 'bwd': 2}, 'fwd=1,bwd=2', or a YAML cost file's path
# (os.PathLike, or a str without '=').
Costs = Union[None, str, os.PathLike[str], Mapping[str, float], "TorchProfile"]
# A `pipevm run` YAML file, or a dict of its sections (model, training, costs, ...).
RunConfig = Union[None, str, os.PathLike[str], Mapping[str, Any]]
# PyTorch's pipeline_order: {rank: [action or None, ...]}, or a list of rows;
# an action is its str(): "0F0", "1B3", "2SEND_F0", "(0F7;7B3)OVERLAP_F_B".
PipelineOrder = Union[Mapping[int, Sequence[Optional[object]]], Sequence[Sequence[Optional[object]]]]

class ScheduleError(ValueError):
    """The input is not a schedule pipevm can read; the attributes say where."""
    file: Optional[str]
    line: Optional[int]
    column: Optional[int]
    code: Optional[str]
    rank: Optional[int]
    step: Optional[int]
    action: Optional[str]
    details: str  # the whole text; str(error) is its first line

class Configuration:
    stages: int
    micro_batches: int
    dp: int
    chunks: int

class Note:
    message: str
    file: Optional[str]
    line: Optional[int]
    column: Optional[int]
    rank: Optional[int]

class Finding:
    """One finding; str() is the gcc-style line `pipevm check --format gcc` prints."""
    code: str
    class_: str
    name: str
    severity: str
    message: str
    text: str
    file: Optional[str]
    line: Optional[int]
    column: Optional[int]
    rank: Optional[int]
    ranks: list[int]
    notes: list[Note]
    configuration: Optional[Configuration]
    configurations: int
    folded: int
    step: Optional[int]
    action: Optional[str]

class StageMemory:
    stage: int
    peak_activations: int
    peak_in_flight: int

class RankBytes:
    rank: int
    stage: int
    weights: int
    gradients: int
    optimizer: int
    activations: int
    activation_gradients: int
    messages: int
    host: int
    peak_host_bytes: int
    @property
    def peak_bytes(self) -> int: ...

class CheckResult:
    """What a check found; truthy when ok."""
    ok: bool
    file: str
    findings: list[Finding]
    checked: int
    failing: int
    skipped: int
    suppressed: int
    instructions: int
    memory: list[StageMemory]
    per_rank: list[RankBytes]
    def __bool__(self) -> bool: ...

class RankFigures:
    busy: float
    communication: float
    idle: float
    peak_activations: int

class StageFigures:
    stage: int
    busy: float
    idle: float
    peak_activations: int

class Simulation:
    @property
    def makespan(self) -> float: ...
    @property
    def bubble_fraction(self) -> float: ...
    @property
    def bubble_rate_zb(self) -> float: ...
    @property
    def ranks(self) -> list[RankFigures]: ...
    @property
    def stages(self) -> list[StageFigures]: ...
    @property
    def per_rank(self) -> list[RankBytes]: ...
    @property
    def configuration(self) -> Configuration: ...
    def timeline(self) -> list[dict[str, Any]]: ...
    def to_json(self) -> dict[str, Any]: ...
    def text(self, width: int = 100) -> str: ...
    def write_svg(self, path: str) -> None: ...
    def write_trace(self, path: str) -> None: ...

class Expansion:
    @property
    def configuration(self) -> Configuration: ...
    @property
    def placement(self) -> str: ...
    @property
    def cut(self) -> str:
        """The program's `cut` declaration ("0-2,3-4,5-6"), or '' when it declares none."""
    @property
    def ranks(self) -> list[list[str]]: ...
    @property
    def text(self) -> str: ...
    def torch_csv(self, with_comms: bool = False) -> str: ...

class Synthesis:
    """A schedule synthesize chose (or lower placed), checked under both progress models."""
    @property
    def text(self) -> str: ...
    @property
    def configuration(self) -> Configuration: ...
    @property
    def placement(self) -> str: ...
    @property
    def makespan(self) -> float: ...
    @property
    def order_makespan(self) -> float: ...
    @property
    def bubble_fraction(self) -> float: ...
    @property
    def bubble_rate_zb(self) -> float: ...
    @property
    def peak_memory(self) -> list[float]: ...
    @property
    def peak_bytes(self) -> list[int]: ...
    @property
    def cut(self) -> str: ...
    @property
    def longest_span(self) -> float: ...
    @property
    def lower_bound(self) -> float: ...
    @property
    def lower_bound_term(self) -> str: ...
    @property
    def optimal(self) -> bool: ...
    @property
    def memory_limit(self) -> float: ...
    @property
    def origin(self) -> str: ...
    @property
    def seed_span(self) -> float: ...
    @property
    def evaluations(self) -> int: ...
    @property
    def improvements(self) -> int: ...
    @property
    def memory_policies(self) -> list[tuple[int, int, int]]: ...
    @property
    def device_peak_bytes(self) -> list[int]: ...
    @property
    def host_peak_bytes(self) -> list[int]: ...
    def to_torch_csv(self) -> str: ...

def check(
    schedule: Schedule,
    *,
    stages: Optional[Range] = None,
    micro_batches: Optional[Range] = None,
    dp: Optional[Range] = None,
    chunks: Optional[Range] = None,
    p2p_order: str = "independent",
    name: Optional[str] = None,
    skip_unsupported: bool = False,
    max_configurations: int = 100000,
    config: RunConfig = None,
) -> CheckResult:
    """Checks a schedule (a path, or text: a str with a line break or a `name`) for every
    configuration asked for, else those it declares. p2p_order: 'independent' (or 'any':
    MPI) or 'posted' (NCCL). config: as `--config`, the model whose bytes per_rank counts
    (None: `pipevm run`'s defaults). Raises ScheduleError when it is not a schedule,
    ValueError for a bad config."""

def simulate(
    schedule: Schedule,
    *,
    stages: Optional[int] = None,
    micro_batches: Optional[int] = None,
    dp: Optional[int] = None,
    chunks: Optional[int] = None,
    costs: Costs = None,
    hosts: Optional[Sequence[int]] = None,
    svg: Optional[str] = None,
    trace: Optional[str] = None,
    name: Optional[str] = None,
    config: RunConfig = None,
    transfer: Optional[str] = None,
    p2p_order: str = "independent",
) -> Simulation:
    """Simulates one configuration. costs: {'fwd': 1, 'bwd': 2}, 'fwd=1,bwd=2' or a YAML cost
    file's path (unset keys cost 0; None: config's costs, else the textbook default), over
    config's costs; hosts: the host of each rank. config: as `--config`, the model whose bytes
    per_rank counts. transfer: 'auto', 'eager' or 'rendezvous' (None: the costs'); p2p_order:
    'independent' (or 'any') or 'posted'. Writes svg and trace when given. Raises
    ScheduleError when it cannot be read or cannot run to its end, ValueError for bad costs
    or config."""

def expand(
    schedule: Schedule,
    *,
    stages: Optional[int] = None,
    micro_batches: Optional[int] = None,
    dp: Optional[int] = None,
    chunks: Optional[int] = None,
    name: Optional[str] = None,
) -> Expansion:
    """Expands one configuration into each rank's stream."""

def check_pipeline_order(
    order: PipelineOrder,
    *,
    num_stages: Optional[int] = None,
    n_microbatches: Optional[int] = None,
    placement: Union[None, str, Mapping[int, int]] = None,
    p2p_order: str = "independent",
) -> CheckResult:
    """Checks PyTorch's pipeline_order (compute only, or with SEND_F/RECV_F/SEND_B/RECV_B) as
    `pipevm check` checks the same table as CSV. num_stages, n_microbatches and placement
    ('looped', 'v' or {stage: rank}), when given, must match what the actions say. Findings
    name the rank, step and action."""

def lower_pipeline_order(order: PipelineOrder) -> dict[int, list[str]]:
    """The order with its sends and receives, as torch.distributed.pipelining adds them."""

def synthesize(
    *,
    stages: int,
    micro_batches: int,
    chunks: int = 1,
    placement: str = "looped",
    costs: Costs = None,
    memory_limit: Union[float, str, None] = None,
    weight_memory: float = 1.0,
    time_limit: float = 5.0,
    transfer: Optional[str] = None,
    p2p_order: str = "any",
    max_moves: int = 0,
    config: RunConfig = None,
    memory_policy: str = "any",
    cut: Optional[str] = None,
) -> Synthesis:
    """Searches the least-bubble schedule for costs and a memory limit, as `pipevm
    synthesize`. memory_limit: micro-batch activations M_B per stage (a number), or bytes
    with a unit ('64MiB', counted for config's model, else `pipevm run`'s default); None:
    none. placement: 'looped' or 'v' (chunks=2). p2p_order: 'any' (or 'independent') or
    'posted', recorded in the header. config: as `--config` (its model; its costs under
    costs). max_moves: local-search moves at most (0: until time_limit). memory_policy:
    under a memory_limit, what a stage may do with a stash besides keeping it: 'keep',
    'recompute', 'offload' or 'any' (the default; Synthesis.memory_policies says what was
    chosen). Per-layer costs (a TorchProfile, or a cost file with `layers:`): the cut is
    chosen with the order, memory_limit is bytes per stage (parameter-bytes plus held
    activation-bytes), and cut='even' or cut='0-2,3-4,5' fixes the cut; Synthesis.cut says
    which. A request no schedule meets raises ScheduleError."""

def lower(
    schedule: Schedule,
    *,
    stages: Optional[int] = None,
    micro_batches: Optional[int] = None,
    chunks: Optional[int] = None,
    costs: Costs = None,
    weight_memory: float = 1.0,
    name: Optional[str] = None,
) -> Synthesis:
    """Keeps a schedule's compute order and places its communication, as `pipevm synthesize
    --lower`. Raises ScheduleError when it cannot be read or placed."""

class LayerCost:
    """One piece of a PyTorch model as profile_torch measured it: microseconds and bytes."""
    name: str
    fwd: float
    bwd_input: float
    bwd_weight: float
    activation_bytes: int
    weight_activation_bytes: int
    parameter_bytes: int
    output_bytes: int

class TorchProfile:
    """Per-layer costs of a PyTorch model; write(path) writes them as a cost file's `layers:`."""
    layers: list[LayerCost]
    device: str
    repeats: int
    def to_yaml(self) -> str: ...
    def write(self, path: Union[str, os.PathLike[str]]) -> None: ...

def profile_torch(
    layers: Sequence[Any],
    example: Any,
    repeats: int = 20,
    warmup: int = 3,
    names: Optional[Sequence[str]] = None,
) -> TorchProfile:
    """Times each torch.nn.Module of `layers` (the model's pieces in order) on `example` (one
    micro-batch; each piece gets the previous one's output): forward, input-gradient and
    weight-gradient halves, medians of `repeats` runs after `warmup`; and counts the bytes its
    forward saves, what the weight half needs, its parameters and its output. torch is
    imported only here."""
