"""What one attempt in one log file says: FileScan, filled line by line (graphsweep/parse/lines.py, errorlines.py) or a
block at a time (graphsweep/parse/templates.py), and merged per run by graphsweep/parse/evidence.py.

A file holds one attempt, or several when a job was preempted or requeued and its next attempt appended to the same
file (submitit submits with `--open-mode=append`): graphsweep/parse/scan.py starts a new FileScan where a new
training process starts (lines.starts_attempt).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

from graphsweep.parse import crash
from graphsweep.parse.records import Hit

MAX_TEXT = 400  # characters of a proving line kept in the summary


def text(raw: bytes) -> str:
    """A proving line as the summary keeps it: decoded, without its newline, at most MAX_TEXT characters."""
    s = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    return s if len(s) <= MAX_TEXT else s[:MAX_TEXT] + "…"


def larger(old: float | None, new: float) -> float | None:
    """The larger, ignoring None and NaN (a value read from several ranks or lines)."""
    if math.isnan(new):
        return old
    return new if old is None else max(old, new)


@dataclass
class FileScan:
    """Everything one attempt in one file says. Holds no line text except proving lines."""

    path: str
    attempt: int = 1  # the attempt's number in its file (a requeued job appends the next one)
    first_line: int = 1  # the attempt's first line in the file
    n_lines: int = 0  # the file's lines up to the attempt's end
    n_bytes: int = 0
    problem: str | None = None  # unreadable / binary / empty
    ends_mid_line: bool = False
    last_line: str = ""
    # iteration rows (compact arrays, one entry per row)
    it: array = field(default_factory=lambda: array("q"))
    it_line: array = field(default_factory=lambda: array("q"))
    it_offset: array = field(default_factory=lambda: array("q"))  # byte offset of the row's line in the file
    elapsed: array = field(default_factory=lambda: array("d"))
    elapsed_decimals: int | None = None  # fewest decimals an elapsed time was printed with: its print step
    tflops: array = field(default_factory=lambda: array("d"))
    loss: array = field(default_factory=lambda: array("d"))
    grad_norm: array = field(default_factory=lambda: array("d"))
    skipped: array = field(default_factory=lambda: array("d"))  # `number of skipped iterations` (NaN: not printed)
    train_iters: int | None = None
    iter_lines_unparsed: int = 0
    lm_loss_seen: bool = False
    step_tflops: array = field(default_factory=lambda: array("d"))  # Step Time lines in file order
    # memory: iteration -> values of lf.MEM_FIELDS [alloc, max_alloc, max_reserved, reserved] (max over ranks)
    memory: dict[int, list[float]] = field(default_factory=dict)
    peaks_reset: int | None = None  # `[graphsweep] memory peaks reset after iteration i`: later mem-max-* start there
    gpu_busy_ms: float | None = None  # `[graphsweep] gpu busy:` ms per iteration, max over the ranks of this file
    gpu_busy_note: str | None = None  # why the busy time was not measured, as the entry said
    # `[graphsweep] host time:` per rank: (ms per iteration, {region: (ms, wait, events)}), its first line (busy.py)
    host_time: dict[int, tuple[float, dict[str, tuple]]] = field(default_factory=dict)
    host_time_note: str | None = None  # why the host time was not measured, as the entry said
    # lifecycle
    training_started: bool = False
    start_iteration: int = 0
    setup_done: bool = False
    seed: int | None = None  # from Megatron's "> setting random seeds to N ..."
    config_seed: int | None = None  # from Bridge's configuration summary ([rng] seed), when the line above is missing
    rng_section_line: int = -(10**9)
    capture_state: str = "none"
    capture_iteration: int | None = None
    capture_marker: str | None = None
    capture_s: float | None = None  # the capture's own time as Megatron prints it (TE, full iteration, local)
    capture_seconds_marker: float | None = None  # `[graphsweep] capture seconds`: its meaning depends on the writer
    capture_excess_s: float | None = None  # `[graphsweep] capture iteration excess seconds` (Megatron entry)
    megatron_entry: bool = False  # `[graphsweep] graph api:`: graphsweep's Megatron entry wrote this log
    graphable_layers: int | None = None
    no_graphable: tuple[int, str] | None = None
    # what was captured (graphsweep/parse/captured.py counts it): the line that says how many, per kind
    graphable_line: tuple[int, str] | None = None  # MCore's `Rank r: N graphable layers.` with the largest N
    te_captured: bool = False  # `Time spent in CUDA Graphs capture`: the TE helper finished its capture
    full_captured: bool = False  # `CUDA graph capture done for training!!!`
    opt_captured: bool = False  # `Optimizer CUDA graph capture done!!!`
    local_built: tuple[int, int, str] | None = None  # local impl `> built N cuda graph(s)`: (N, line, text)
    graphs_detected: tuple[int, int, str] | None = None  # the entry's `cuda graphs detected: N`: (N, line, text)
    no_graph_seen: tuple[int, str] | None = None  # the entry's `no cuda graph detected after N iterations`
    replay_iteration: int | None = None
    replays: int | None = None
    end_marker: tuple[int, str] | None = None
    end_data: tuple[int, str] | None = None
    exit_minutes: tuple[int, str] | None = None
    sigterm: tuple[int, str] | None = None
    straggler: tuple[int, str] | None = None
    slurm_infra: tuple[str, int, str] | None = None
    device: str | None = None
    provenance: list[dict[str, Any]] = field(default_factory=list)  # `[graphsweep] provenance:` facts, file order
    # evidence
    hits: list[Hit] = field(default_factory=list)
    hit_ids: set[str] = field(default_factory=set)
    nan_iteration: tuple[int, int, str] | None = None  # (iteration, line, text): the first NaN/Inf of an iteration line
    loss_missing: tuple[int, int, str] | None = None  # first iteration line without lm loss (not a skipped one)
    last_exception: tuple[int, str] | None = None
    keyerror: tuple[int, str] | None = None
    graph_config_traceback: bool = False
    srun_exit: tuple[int, str] | None = None
    cuda_error_line: tuple[int, list[Hit]] | None = None  # the last `CUDA error: ` line and the hits it made
    crash_lines: crash.CrashLines = field(default_factory=crash.CrashLines)  # how a process said it died
    # the frames of the traceback being printed (reset at each "Traceback (most recent call last):")
    frames: list[str] = field(default_factory=list)  # function names, outermost first
    frame_where: list[tuple[str, str, str]] = field(default_factory=list)  # (path, line, function)
    source_at: tuple[int, int] = (-1, 0)  # (line, column) of the last frame's source line

    def cause_frame(self) -> str | None:
        """The innermost frame of the current traceback outside torch: where the failing call was made."""
        for path, line, func in reversed(self.frame_where):
            if "/torch/" not in path:
                return f"{path.rsplit('/', 1)[-1]}:{line} in {func}"
        return None

    def iteration_now(self) -> int | None:
        """Last iteration known finished when the current line is printed (this attempt only)."""
        if self.it:
            return self.it[-1]
        if self.step_tflops:  # rank 0 prints Step Time every iteration but no iteration line
            return self.start_iteration + len(self.step_tflops)
        if self.memory:
            return max(self.memory)
        return None

    def note_decimals(self, d: int | None) -> None:
        if d is not None and (self.elapsed_decimals is None or d < self.elapsed_decimals):
            self.elapsed_decimals = d

    def finish(self, n_lines: int, n_bytes: int, last: bytes) -> None:
        """The attempt ends after line `n_lines` (`n_bytes` into the file) with the line `last`."""
        self.n_lines, self.n_bytes = n_lines, n_bytes
        self.ends_mid_line = bool(last) and not last.endswith(b"\n")
        self.last_line = text(last)
