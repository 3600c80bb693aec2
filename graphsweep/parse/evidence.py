"""A run's files and attempts (FileScans, graphsweep/parse/scan.py) into one record: its iteration rows merged by
iteration (Merged) and what all of them say (records.Evidence), for the classifier.

Several files per run (per-rank files, `log-allranks`, restarts `_0`, `_1`) are merged by iteration number; for a
repeated iteration the later file wins (a restart redoes the iterations after its checkpoint), and within a file the
later attempt (a requeued job appends its next attempt to the same file). An attempt that a later one restarted
keeps its rows; its end (a preemption, a SIGTERM, an error) is not the run's outcome. Files come in chronological
order. numpy only: the run rule's process classifies a failed run's log with this (read.find_transient).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from graphsweep import logformat as lf
from graphsweep.parse import captured, crash
from graphsweep.parse.filescan import FileScan
from graphsweep.parse.memory import merge as merge_readings
from graphsweep.parse.records import Evidence, Mark

_FLOAT_COLUMNS = ("elapsed_ms", "tflops", "loss", "grad_norm", "skipped")


@dataclass
class Merged:
    """The run's iteration rows, one per iteration, ascending (numpy columns)."""

    iteration: np.ndarray
    elapsed_ms: np.ndarray
    tflops: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    skipped: np.ndarray  # `number of skipped iterations` of the line (NaN: not printed)
    scan: np.ndarray  # the index of the FileScan (file and attempt) the row comes from
    line: np.ndarray  # its line in that file (1-based)
    offset: np.ndarray  # the line's byte offset in that file

    def __len__(self) -> int:
        return len(self.iteration)


def _file_rows(k: int, fs: FileScan) -> dict[str, np.ndarray]:
    n = len(fs.it)
    tflops = np.frombuffer(fs.tflops, dtype=np.float64).copy()
    if len(fs.step_tflops) and np.isnan(tflops).any():
        # the k-th Step Time line of a file belongs to its k-th iteration line (same process prints both)
        st = np.frombuffer(fs.step_tflops, dtype=np.float64)[:n]
        fill = np.isnan(tflops[: len(st)])
        tflops[: len(st)][fill] = st[fill]
    return {"iteration": np.frombuffer(fs.it, dtype=np.int64), "elapsed_ms": np.frombuffer(fs.elapsed, np.float64),
            "tflops": tflops, "loss": np.frombuffer(fs.loss, np.float64),
            "grad_norm": np.frombuffer(fs.grad_norm, np.float64), "skipped": np.frombuffer(fs.skipped, np.float64),
            "scan": np.full(n, k, dtype=np.int64), "line": np.frombuffer(fs.it_line, np.int64),
            "offset": np.frombuffer(fs.it_offset, np.int64)}


def merge_rows(scans: Sequence[FileScan]) -> Merged:
    """One row per iteration: for a repeated one the later file (and attempt, and line) wins."""
    parts = [_file_rows(k, fs) for k, fs in enumerate(scans) if len(fs.it)]
    if not parts:
        empty = {c: np.array([], dtype=np.float64) for c in _FLOAT_COLUMNS}
        return Merged(**empty, **{c: np.array([], dtype=np.int64) for c in ("iteration", "scan", "line", "offset")})
    cols = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    it = cols["iteration"]
    if len(parts) > 1 or (len(it) > 1 and not (np.diff(it) > 0).all()):
        order = np.lexsort((cols["line"], cols["scan"], it))  # by iteration, then file order, then line
        it = it[order]
        last = np.r_[it[1:] != it[:-1], True]  # a restart redoes iterations: the later copy wins
        cols = {c: v[order][last] for c, v in cols.items()}
    pending = [fs.step_tflops for fs in scans if not len(fs.it) and len(fs.step_tflops)]
    if pending and np.isnan(cols["tflops"]).any():  # Step Time values of a rank-0 file without iteration lines
        st = np.frombuffer(pending[0], dtype=np.float64)[: len(cols["tflops"])]
        fill = np.isnan(cols["tflops"][: len(st)])
        cols["tflops"][: len(st)][fill] = st[fill]
    return Merged(**cols)


def merge_memory(scans: Sequence[FileScan]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for fs in scans:
        for it, vals in fs.memory.items():
            out[it] = merge_readings(out.get(it), vals)
    return out


def provenance_lines(lines: Sequence[dict]) -> list[dict]:
    """The training processes' provenance lines (logformat.PROVENANCE), in file order: the same line in log.txt and
    a per-rank file counts once (its rank and host), lowest rank first."""
    found: dict[tuple, dict] = {}
    for facts in lines:
        found.setdefault((facts.get("rank"), facts.get("host")), facts)
    return sorted(found.values(), key=lambda f: (f.get("rank") is None, f.get("rank") or 0))


def _larger(a: float | None, b: float | None) -> float | None:
    return a if b is None else b if a is None else max(a, b)


def _mark(fs: FileScan, t: tuple[int, str] | None) -> Mark | None:
    return Mark(fs.path, t[0], t[1]) if t else None


def superseded(scans: Sequence[FileScan]) -> dict[int, str]:
    """The attempts a later one restarted, each with what restarted it: the same file's next attempt (a requeued job
    appends it), Bridge's `Starting training loop at iteration N` with N > 0 in a later file (a resume), or a later
    file whose first iteration lies inside the earlier file's range (but is not 1: per-rank and all-ranks copies of
    one attempt start at 1 and run concurrently)."""
    out: dict[int, str] = {}
    for k, fs in enumerate(scans):
        for later in scans[k + 1:]:
            if later.path == fs.path:
                out[k] = f"its attempt {later.attempt} from line {later.first_line}"
                break
            resumed = later.training_started and later.start_iteration > 0
            overlap = bool(later.it) and bool(fs.it) and 1 < later.it[0] <= max(fs.it)
            if (resumed and (fs.it or fs.hits)) or overlap:
                out[k] = later.path
                break
    return out


def _restart_note(fs: FileScan, by: str) -> str:
    where = fs.path if fs.attempt == 1 and not by.startswith("its attempt") else \
        f"{fs.path} attempt {fs.attempt} (lines {fs.first_line}-{fs.n_lines})"
    if fs.slurm_infra:
        what = f"{fs.slurm_infra[2].strip()} at line {fs.slurm_infra[1]}"
    elif fs.hits:
        what = f"{fs.hits[0].sig.id} at {fs.path}:{fs.hits[0].line}"
    else:
        what = "no error line"
    return f"{where} was restarted by {by} ({what}): its end is not the run's outcome"


def evidence(scans: Sequence[FileScan], rows: Merged) -> Evidence:
    """What all attempts of the run say, merged; the attempts a later one restarted count for their rows only."""
    restarted = superseded(scans)
    ev = Evidence(
        files=list(dict.fromkeys(fs.path for fs in scans)),
        problems=[fs.problem for fs in scans if fs.problem],
        hits=[h for k, fs in enumerate(scans) if k not in restarted for h in fs.hits],
        iterations=rows.iteration,
        elapsed_ms=rows.elapsed_ms,
        elapsed_decimals=min((fs.elapsed_decimals for fs in scans if fs.elapsed_decimals is not None), default=None),
        memory=merge_memory(scans),
    )
    ev.skipped = rows.skipped
    ev.superseded = [_restart_note(scans[k], by) for k, by in restarted.items()]
    entry_log = any(fs.megatron_entry for fs in scans)  # rank 0's file says so for the run's other files too
    for k, fs in enumerate(scans):
        if fs.problem:
            continue
        if k in restarted:  # an earlier attempt: its rows count (merged), its end state does not
            ev.recognised_lines = ev.recognised_lines or bool(fs.it)
            ev.restarts += 1
            continue
        _attempt_into(ev, fs, entry_log)
    ev.provenance = provenance_lines([facts for fs in scans for facts in fs.provenance])
    ev.loss_missing = _loss_missing(rows, scans, ev.loss_missing, ev.start_iteration)
    live = [k for k, fs in enumerate(scans) if not fs.problem and k not in restarted]
    ev.death = crash.merge([(scans[k].path, scans[k].crash_lines, len(scans[k].it)) for k in live])
    n = captured.count([scans[k] for k in live])
    ev.graphs_captured, ev.graphs_captured_proof = n.graphs, n.proof
    # the last file in order decides whether the log was cut
    if tail := [fs for fs in scans if not fs.problem]:
        ev.ends_mid_line = tail[-1].ends_mid_line
        ev.last_line = Mark(tail[-1].path, tail[-1].n_lines, tail[-1].last_line)
    return ev


def _attempt_into(ev: Evidence, fs: FileScan, entry_log: bool) -> None:
    """One attempt that counts (not restarted) into the run's evidence."""
    if fs.it or fs.memory or fs.hits or fs.training_started or fs.setup_done or fs.capture_state != "none" \
            or fs.end_marker or fs.step_tflops or fs.last_exception:
        ev.recognised_lines = True
    ev.train_iters = ev.train_iters if fs.train_iters is None else max(ev.train_iters or 0, fs.train_iters)
    ev.training_started |= fs.training_started
    ev.seed = fs.seed if ev.seed is None else ev.seed
    ev.seed = fs.config_seed if ev.seed is None else ev.seed
    ev.start_iteration = max(ev.start_iteration, fs.start_iteration) if fs.training_started else ev.start_iteration
    if fs.capture_marker and ev.capture_marker is None:
        ev.capture_marker, ev.capture_iteration = fs.capture_marker, fs.capture_iteration
    ev.capture_s = _larger(ev.capture_s, fs.capture_s)
    # `capture seconds` is the builtin's capture call, but the capture iteration's excess in the Megatron
    # entry's logs before 2026-12-02 (logformat.CAPTURE_SECONDS): one meaning per column
    if entry_log:
        ev.capture_iteration_excess_s = _larger(ev.capture_iteration_excess_s, fs.capture_seconds_marker)
    else:
        ev.capture_s = _larger(ev.capture_s, fs.capture_seconds_marker)
    ev.capture_iteration_excess_s = _larger(ev.capture_iteration_excess_s, fs.capture_excess_s)
    if fs.peaks_reset is not None and ev.peaks_reset is None:
        ev.peaks_reset = fs.peaks_reset
    ev.gpu_busy_ms = _larger(ev.gpu_busy_ms, fs.gpu_busy_ms)
    ev.gpu_busy_note = ev.gpu_busy_note or fs.gpu_busy_note
    for rank, line in fs.host_time.items():  # per-rank files and the all-ranks copy hold the same lines
        ev.host_time.setdefault(rank, line)
    ev.host_time_note = ev.host_time_note or fs.host_time_note
    if fs.graphable_layers is not None:
        ev.graphable_layers = max(ev.graphable_layers or 0, fs.graphable_layers)
    ev.no_graphable = ev.no_graphable or _mark(fs, fs.no_graphable)
    if fs.replay_iteration is not None:
        ev.replay_iteration = fs.replay_iteration
    if fs.replays is not None:
        ev.replays = max(ev.replays or 0, fs.replays)
    ev.end_marker = ev.end_marker or _mark(fs, fs.end_marker)
    ev.end_data = ev.end_data or _mark(fs, fs.end_data)
    ev.exit_minutes = ev.exit_minutes or _mark(fs, fs.exit_minutes)
    ev.sigterm = ev.sigterm or _mark(fs, fs.sigterm)
    ev.straggler = ev.straggler or _mark(fs, fs.straggler)
    if fs.slurm_infra and ev.slurm_infra is None:
        ev.slurm_infra = (fs.slurm_infra[0], Mark(fs.path, fs.slurm_infra[1], fs.slurm_infra[2]))
    if fs.nan_iteration and ev.nan_iteration is None:
        ev.nan_iteration = (fs.nan_iteration[0], Mark(fs.path, fs.nan_iteration[1], fs.nan_iteration[2]))
    if fs.loss_missing and ev.loss_missing is None:
        ev.loss_missing = (fs.loss_missing[0], Mark(fs.path, fs.loss_missing[1], fs.loss_missing[2]))
    ev.lm_loss_seen |= fs.lm_loss_seen
    ev.last_exception = _mark(fs, fs.last_exception) or ev.last_exception
    ev.keyerror = ev.keyerror or _mark(fs, fs.keyerror)
    ev.srun_exit = _mark(fs, fs.srun_exit) or ev.srun_exit
    ev.device = ev.device or fs.device
    ev.iter_lines_unparsed += fs.iter_lines_unparsed
    ev.capture_started |= fs.capture_state != "none"


def _loss_missing(rows: Merged, scans: Sequence[FileScan], first: tuple[int, Mark] | None,
                  start: int) -> tuple[int, Mark] | None:
    """A line without the lm loss key is a NaN only where the log's print pattern expects a loss
    (logformat.loss_broken_from): a log that prints its loss every N iterations has no NaN in between."""
    if first is None or not len(rows):
        return first
    at = lf.loss_broken_from(list(zip(rows.iteration.tolist(), rows.loss.tolist())),
                             skipped=skipped_lines(rows, start))
    if at is None:
        return None
    if at == first[0]:
        return first
    k = np.flatnonzero(rows.iteration == at)
    if not len(k):
        return first
    j = int(k[0])
    printed = rows.iteration[~np.isnan(rows.loss)].tolist()
    return at, Mark(scans[int(rows.scan[j])].path, int(rows.line[j]),
                    f"iteration {at}: no lm loss where the log prints one every {lf.print_interval(printed)} "
                    "iteration(s)")


def skipped_lines(rows: Merged, start: int = 0) -> set[int]:
    """The iterations whose line says every iteration it covers was skipped (logformat.whole_lines_skipped)."""
    return lf.whole_lines_skipped(list(zip(rows.iteration.tolist(), rows.skipped.tolist())), start)
