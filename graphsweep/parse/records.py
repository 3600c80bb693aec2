"""The records of parsing one run: what its files say (Evidence, Hit, Mark) and what happened (RunSummary)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from graphsweep.entry import host_time
from graphsweep.parse.signatures import Signature
from graphsweep.vocab import EAGER


@dataclass
class RunSummary:
    outcome: str  # one of vocab.OUTCOMES
    error_class: str | None = None
    phase: str | None = None  # one of vocab.PHASES
    signature: str | None = None  # the proving line (text, trimmed)
    signature_line: int | None = None
    signature_file: str | None = None
    reason: str = ""
    oom_request: str | None = None
    n_iterations: int = 0
    steady_first: int | None = None
    steady_last: int | None = None
    steady_n: int = 0
    steady_reason: str = ""
    step_ms_median: float | None = None
    step_ms_mean: float | None = None
    step_ms_p10: float | None = None
    step_ms_p90: float | None = None
    elapsed_resolution_ms: float | None = None  # print step of the elapsed times (0.1 for Megatron's {:.1f})
    seed: int | None = None  # the training seed the log states (runs of one seed must train the same model)
    # memory, 1e9-byte GB, max over ranks (docs/tables.md says what each measures and when it is None)
    peak_mem_gb: float | None = None  # whole-run peak: max mem-max-allocated of the lines from the capture iteration
    # on (graph) or of all lines (eager); a running peak since process start, so pre-capture peaks are in it
    peak_mem_before_capture_gb: float | None = None  # max mem-max-allocated of the lines before the capture iteration
    steady_mem_allocated_gb: float | None = None  # max mem-allocated (current) over the steady window
    steady_mem_reserved_gb: float | None = None  # max mem-reserved (current, caching allocator) over the steady window
    steady_mem_peak_gb: float | None = None  # max mem-max-allocated over the steady window, peaks reset after capture
    capture_seen: bool = False
    replay_seen: bool = False
    capture_s: float | None = None  # the capture's own time as Megatron/TE/MCore (or the builtin) reports it
    capture_iteration_excess_s: float | None = None  # Megatron entry: capture iteration minus a median eager one
    graphable_layers: int | None = None
    graphs_captured: int | None = None  # CUDA graphs the run holds (graphed layers for TE scopes): parse/captured.py
    # launch-boundness (eager arms, graphsweep/parse/busy.py): GPU busy ms per iteration, its share of the steady
    # median step, and the ceiling step / busy that no graph of this step can beat
    gpu_busy_ms: float | None = None
    gpu_busy_share: float | None = None
    graph_ceiling: float | None = None
    gpu_busy_note: str | None = None  # why a run that should have measured it did not
    # where the eager step's host time goes (eager arms, parse/busy.py): rank 0's `[graphsweep] host time:` line,
    # whole, so its regions add up to its step; summary_to_dict writes host_regions as typed columns per region
    host_step_ms: float | None = None
    # region (entry/host_time.py REGIONS) -> (host ms, of which waiting on the GPU, profiler events) per iteration
    host_regions: dict[str, tuple[float, float | None, float | None]] = field(default_factory=dict)
    host_time_rank: int | None = None  # the rank whose line it is
    host_time_ranks: int = 0  # how many ranks printed one
    host_time_note: str | None = None  # why a run that should have measured it did not
    transient: str | None = None  # the transient signature's text when the retry policy retries it (docs/failures.md)
    # extras
    signature_id: str | None = None  # catalogue id (SIGNATURES)
    signature_source: str | None = None  # where Megatron/PyTorch/Slurm prints it
    arm: str = EAGER
    warmup: int | None = None
    failed_iteration: int | None = None  # the iteration that was running when the run failed
    capture_iteration: int | None = None
    train_iters: int | None = None  # N of "iteration i/N"
    last_iteration: int | None = None
    measurement_usable: bool = False  # the steady window can be compared (completed, or timeout after the window)
    infrastructure: bool = False  # retried by the workflow, never a result
    end_marker: str | None = None
    exit_code: int | None = None
    slurm_state: str | None = None
    attempt: int | None = None
    previous_attempts: list[dict] = field(default_factory=list)
    device: str | None = None
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # what the log says beyond the outcome, for runs.parquet's prov_* and time_* columns (store/tables.py
    # SUMMARY_NOT_COLUMNS): the training processes' provenance lines (logformat.PROVENANCE), one per (rank, host),
    # lowest rank first
    provenance_lines: list[dict] = field(default_factory=list)
    # the time stamps (the training process's local time, as printed) of the first and the last iteration row
    first_iteration_stamp: str | None = None
    last_iteration_stamp: str | None = None


def summary_to_dict(summary: RunSummary) -> dict:
    """JSON-safe dict (NaN and numpy scalars become None / plain numbers); the host time by region as one key per
    region (`host_attn_ms`, `host_attn_wait_ms`, `host_attn_events`, ...: entry/host_time.py ms_column, ...)."""

    def clean(v: object) -> object:
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if hasattr(v, "item") and not isinstance(v, (str, bytes)):
            v = v.item()  # numpy scalar
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v

    d = asdict(summary)
    regions = d.pop("host_regions") or {}
    for r in host_time.REGIONS:  # typed columns, three per region
        ms, wait, events = regions.get(r) or (None, None, None)
        d.update({host_time.ms_column(r): ms, host_time.wait_column(r): wait, host_time.events_column(r): events})
    return clean(d)  # type: ignore[return-value]


@dataclass
class Hit:
    """One line that matched a catalogue signature, and where the run was when it was printed."""

    sig: Signature
    file: str
    line: int
    text: str
    iteration_before: int | None  # last iteration known finished in this file when the line was printed
    capture_state: str  # none | capturing | captured (this file)
    capture_iteration: int | None
    training_started: bool
    after_end: bool  # printed after the end-of-training marker
    frame: str | None = None  # innermost traceback frame outside torch before the line: where the failing call was
    cuda_enum: str | None = None  # the cudaError name torch's `Search for` line gave this CUDA error line


@dataclass
class Mark:
    file: str
    line: int
    text: str


@dataclass
class Death:
    """How the run's processes said they died (graphsweep/parse/crash.py), first file first."""

    bridge_failed: Mark | None = None  # Bridge's `Pretrain failed on rank=N with X: ...`
    cause: Mark | None = None  # the first exception after the last iteration line, launchers' own excluded
    fatal: Mark | None = None  # `Fatal Python error: ...`, `terminate called ...` after the last iteration
    launcher: Mark | None = None  # torchrun `failed (exitcode: N)`
    launcher_exit: int | None = None
    signal: Mark | None = None  # a worker killed by a signal (torchrun's report, a subprocess repr)
    signal_name: str | None = None
    launcher_signal: Mark | None = None  # the launcher itself was signalled (scancel, Ctrl-C)
    launcher_signal_name: str | None = None

    def died(self) -> bool:
        """A line says a process of the run died (beyond a generic exception line)."""
        return any((self.bridge_failed, self.fatal, self.launcher, self.signal))


@dataclass
class Evidence:
    """What all files of one run say, merged (built by graphsweep.parse)."""

    files: list[str]
    problems: list[str]  # per-file problems (unreadable, empty, binary)
    hits: list[Hit]
    iterations: np.ndarray  # merged, ascending (int64)
    elapsed_ms: np.ndarray  # the same rows' elapsed times (float64)
    elapsed_decimals: int | None  # fewest decimals of any elapsed time (its print step is 10**-decimals)
    memory: dict[int, list[float]]  # iteration -> logformat.MEM_FIELDS values in GB, max over ranks
    train_iters: int | None = None
    start_iteration: int = 0
    training_started: bool = False
    seed: int | None = None
    capture_iteration: int | None = None  # from markers (first file that has them)
    capture_marker: str | None = None
    capture_s: float | None = None
    capture_iteration_excess_s: float | None = None
    peaks_reset: int | None = None  # the iteration after which the training process reset the memory peaks
    gpu_busy_ms: float | None = None  # eager arm: GPU busy ms per iteration, max over ranks (parse/busy.py)
    gpu_busy_note: str | None = None  # why it was not measured, as the training process said
    host_time: dict[int, tuple[float, dict[str, tuple]]] = field(default_factory=dict)  # rank -> (step ms, regions)
    host_time_note: str | None = None
    graphable_layers: int | None = None
    no_graphable: Mark | None = None
    graphs_captured: int | None = None  # parse/captured.py count: None when no line says
    graphs_captured_proof: Mark | None = None  # the line it comes from
    replay_iteration: int | None = None
    replays: int | None = None
    end_marker: Mark | None = None
    end_data: Mark | None = None
    exit_minutes: Mark | None = None
    sigterm: Mark | None = None
    straggler: Mark | None = None
    slurm_infra: tuple[str, Mark] | None = None
    nan_iteration: tuple[int, Mark] | None = None
    loss_missing: tuple[int, Mark] | None = None
    lm_loss_seen: bool = False
    last_exception: Mark | None = None
    keyerror: Mark | None = None
    srun_exit: Mark | None = None
    ends_mid_line: bool = False
    last_line: Mark | None = None
    recognised_lines: bool = False  # any Megatron line at all (iteration, marker, memory, signature)
    device: str | None = None
    provenance: list[dict] = field(default_factory=list)  # provenance lines, one per (rank, host), lowest rank first
    iter_lines_unparsed: int = 0
    superseded: list[str] = field(default_factory=list)  # notes on earlier attempts replaced by a restart
    death: Death = field(default_factory=Death)
    capture_started: bool = False  # a capture start or done marker in any file (capture began)
    skipped: np.ndarray | None = None  # the rows' `number of skipped iterations` (NaN: not printed)
    restarts: int = 0  # attempts a later one restarted (a requeued job, a resume from a checkpoint)
