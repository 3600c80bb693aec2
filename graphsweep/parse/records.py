"""The records of parsing one run: what its files say (Evidence, Hit, Mark). What happened, RunSummary (summary.json),
is a record that crosses stages: graphsweep/records.py, imported here for the parser's modules."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphsweep.parse.signatures import Signature
from graphsweep.records import RunSummary  # noqa: F401 - the parser's modules take it from here


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
