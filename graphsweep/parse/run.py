"""Parse one run: every log file of it (ranks, restarts), merged by iteration, then classified.

    parse_run(paths, arm=..., warmup=..., run_info=...) -> ParsedRun(iterations frame, RunSummary)

Several files per run (per-rank files, `log-allranks`, restarts `_0`, `_1`) are merged by iteration number; for a
repeated iteration the later file wins (a restart redoes the iterations after its checkpoint). Pass files in
chronological order. Never raises for content: a bad log is a result (unparseable), not a crash. What later stages
need of the logs beyond the outcome (the training processes' provenance lines, the time stamps of the first and
last iteration lines) goes into the summary too: no stage after this one opens a log.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from graphsweep import logformat as lf
from graphsweep.parse import captured, crash, work
from graphsweep.parse.files import read_line
from graphsweep.parse.memory import merge as merge_readings
from graphsweep.parse.classify import classify
from graphsweep.parse.records import Evidence, Mark, RunSummary
from graphsweep.parse.scan import FileScan, scan_file
from graphsweep.parse.window import MIN_STEADY
from graphsweep.records import GateDecision
from graphsweep.store.tables import ITERATION_COLUMNS
from graphsweep.vocab import EAGER, GRAPH


@dataclass
class ParsedRun:
    iterations: pd.DataFrame
    summary: RunSummary


def _frame(scans: Sequence[FileScan], run_id: str) -> pd.DataFrame:
    parts = []
    pending_steps: list[array] = []  # Step Time values of files without iteration lines (rank 0 files)
    for order, fs in enumerate(scans):
        n = len(fs.it)
        if n == 0:
            if fs.step_tflops:
                pending_steps.append(fs.step_tflops)
            continue
        tflops = np.frombuffer(fs.tflops, dtype=np.float64).copy() if n else np.array([])
        if len(fs.step_tflops) and np.isnan(tflops).any():
            # the k-th Step Time line of a file belongs to its k-th iteration line (same process prints both)
            st = np.frombuffer(fs.step_tflops, dtype=np.float64)[:n]
            fill = np.isnan(tflops[: len(st)])
            tflops[: len(st)][fill] = st[fill]
        parts.append(pd.DataFrame({
            "iteration": np.frombuffer(fs.it, dtype=np.int64),
            "elapsed_ms": np.frombuffer(fs.elapsed, dtype=np.float64),
            "tflops": tflops,
            "loss": np.frombuffer(fs.loss, dtype=np.float64),
            "grad_norm": np.frombuffer(fs.grad_norm, dtype=np.float64),
            "source_file": fs.path,
            "line": np.frombuffer(fs.it_line, dtype=np.int64),
            "_order": order,
        }))
    if parts:
        df = pd.concat(parts, ignore_index=True)
        # a restart redoes iterations after its checkpoint: the later file (and later line) wins
        df = df.sort_values(["iteration", "_order", "line"], kind="stable").drop_duplicates("iteration", keep="last")
        df = df.reset_index(drop=True)
    else:
        df = pd.DataFrame({c: pd.Series(dtype=t) for c, t in (("iteration", "int64"), ("elapsed_ms", "float64"),
                           ("tflops", "float64"), ("loss", "float64"), ("grad_norm", "float64"),
                           ("source_file", "object"), ("line", "int64"))})
    if pending_steps and len(df) and df["tflops"].isna().any():
        st = np.frombuffer(pending_steps[0], dtype=np.float64)[: len(df)]
        col = df["tflops"].to_numpy(copy=True)
        fill = np.isnan(col[: len(st)])
        col[: len(st)][fill] = st[fill]
        df["tflops"] = col
    memory = _merge_memory(scans)
    mem = np.full((len(df), len(lf.MEM_FIELDS)), np.nan)
    if memory and len(df):
        # iterations are unique and sorted here: a binary search, not a dict of every row (1.35 M rows: ~100 MB)
        its = df["iteration"].to_numpy()
        keys = np.fromiter(memory.keys(), dtype=np.int64, count=len(memory))
        vals = np.asarray(list(memory.values()), dtype=np.float64)
        k = np.minimum(np.searchsorted(its, keys), len(its) - 1)
        hit = its[k] == keys
        mem[k[hit]] = vals[hit]
    df["mem_allocated_gb"] = mem[:, 0]
    df["mem_max_allocated_gb"] = mem[:, 1]
    df["mem_max_reserved_gb"] = mem[:, 2]
    df["mem_reserved_gb"] = mem[:, 3]
    df["run_id"] = run_id
    df["iteration"] = df["iteration"].astype("int64")
    df["line"] = df["line"].astype("int64")
    df["source_file"] = df["source_file"].astype("string")
    df["run_id"] = df["run_id"].astype("string")
    return df[ITERATION_COLUMNS]


def _merge_memory(scans: Sequence[FileScan]) -> dict[int, list[float]]:
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


def _stamp(path: str, line: int, iteration: int) -> str | None:
    """The time stamp on the line of iteration `iteration` (1-based line `line` of `path`), as it was printed."""
    try:
        text = read_line(path, line)
    except OSError:
        return None
    for m in lf.ITER_STAMP.finditer(text):  # ranks glued into one line: the stamp of this iteration's head
        if int(m[2]) == iteration:
            return m[1].decode()
    return None


def _stamps(df: pd.DataFrame) -> tuple[str | None, str | None]:
    """The time stamps of the first and the last iteration row (store/timeparts.py splits the job's time there)."""
    timed = df[df["elapsed_ms"].notna()]
    if not len(timed):
        return None, None
    head, tail = timed.iloc[0], timed.iloc[-1]
    return (_stamp(str(head.source_file), int(head.line), int(head.iteration)),
            _stamp(str(tail.source_file), int(tail.line), int(tail.iteration)))


def _larger(a: float | None, b: float | None) -> float | None:
    return a if b is None else b if a is None else max(a, b)


def _mark(fs: FileScan, t: tuple[int, str] | None) -> Mark | None:
    return Mark(fs.path, t[0], t[1]) if t else None


def _evidence(scans: Sequence[FileScan], df: pd.DataFrame) -> Evidence:
    restarted = _superseded(scans)
    ev = Evidence(
        files=[fs.path for fs in scans],
        problems=[fs.problem for fs in scans if fs.problem],
        hits=[h for k, fs in enumerate(scans) if k not in restarted for h in fs.hits],
        iterations=df["iteration"].tolist(),
        elapsed_ms=df["elapsed_ms"].tolist(),
        elapsed_decimals=min((fs.elapsed_decimals for fs in scans if fs.elapsed_decimals is not None), default=None),
        memory=_merge_memory(scans),
    )
    for k, by in restarted.items():
        fs = scans[k]
        what = f"{fs.hits[0].sig.id} at {fs.path}:{fs.hits[0].line}" if fs.hits else "no error line"
        ev.superseded.append(f"{fs.path} was restarted by {by} ({what}): its failure is not the run's outcome")
    entry_log = any(fs.megatron_entry for fs in scans)  # rank 0's file says so for the run's other files too
    for k, fs in enumerate(scans):
        if fs.problem:
            continue
        if k in restarted:  # an earlier attempt: its rows count (merged), its end state does not
            ev.recognised_lines = ev.recognised_lines or bool(fs.it)
            continue
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
    ev.provenance = provenance_lines([facts for fs in scans for facts in fs.provenance])
    ev.loss_missing = _loss_missing(df, ev.loss_missing)
    ev.death = crash.merge([(fs.path, fs.crash_lines, len(fs.it)) for k, fs in enumerate(scans)
                            if not fs.problem and k not in restarted])
    n = captured.count([fs for k, fs in enumerate(scans) if not fs.problem and k not in restarted])
    ev.graphs_captured, ev.graphs_captured_proof = n.graphs, n.proof
    # the last file in order decides whether the log was cut
    live = [fs for fs in scans if not fs.problem]
    if live:
        tail = live[-1]
        ev.ends_mid_line = tail.ends_mid_line
        ev.last_line = Mark(tail.path, tail.n_lines, tail.last_line)
    return ev


def _loss_missing(df: pd.DataFrame, first: tuple[int, Mark] | None) -> tuple[int, Mark] | None:
    """A line without the lm loss key is a NaN only where the log's print pattern expects a loss
    (logformat.loss_broken_from): a log that prints its loss every N iterations has no NaN in between."""
    if first is None or not len(df):
        return first
    at = lf.loss_broken_from(list(zip(df["iteration"].tolist(), df["loss"].tolist())))
    if at is None:
        return None
    if at == first[0]:
        return first
    row = df[df["iteration"] == at]
    if not len(row):
        return first
    every = lf.print_interval([i for i, x in zip(df["iteration"], df["loss"]) if x == x])
    return at, Mark(str(row["source_file"].iloc[0]), int(row["line"].iloc[0]),
                    f"iteration {at}: no lm loss where the log prints one every {every} iteration(s)")


def _superseded(scans: Sequence[FileScan]) -> dict[int, str]:
    """Files that a later file restarted: Bridge prints `Starting training loop at iteration N` with N > 0
    on resume, or the later file's first iteration lies inside the earlier file's range (but is not 1:
    per-rank and all-ranks copies of one attempt start at 1 and run concurrently)."""
    out: dict[int, str] = {}
    for k, fs in enumerate(scans):
        for later in scans[k + 1:]:
            resumed = later.training_started and later.start_iteration > 0
            overlap = bool(later.it) and bool(fs.it) and 1 < later.it[0] <= max(fs.it)
            if (resumed and (fs.it or fs.hits)) or overlap:
                out[k] = later.path
                break
    return out


def _previous(run_info: Mapping | None) -> list[dict]:
    """Earlier attempts (run.json previous_attempts) with the proving line of their signature, when readable."""
    out = []
    for p in (run_info or {}).get("previous_attempts") or []:
        d = dict(p)
        sig, log = d.get("signature"), d.get("log")
        if sig and log and Path(log).is_file():
            fs = scan_file(log)
            h = next((h for h in fs.hits if h.sig.needle.decode() == sig), None)
            if h is not None:
                d.update(file=h.file, line=h.line, text=h.text)
        out.append(d)
    return out


def parse_run(paths: Sequence[Path | str], *, arm: str = EAGER, warmup: int | None = None,
              run_info: Mapping | None = None, run_id: str = "", min_steady: int = MIN_STEADY,
              given: Mapping[str, str] | None = None, gate: GateDecision | None = None) -> ParsedRun:
    """Parse every log file of one run (chronological order) and classify it. Never raises for content. `given`: what
    its config.yaml gave it (parse/work.py given_config), for the configuration keys its log does not print; `gate`:
    the launch gate's decision that run.json records (its reader turns it into the record, once)."""
    if arm not in (EAGER, GRAPH):
        raise ValueError(f"arm must be 'eager' or 'graph', got {arm!r}")
    scans = [scan_file(p) for p in paths]
    df = _frame(scans, run_id)
    ev = _evidence(scans, df)
    summary = classify(ev, arm=arm, warmup=warmup, run_info=run_info, min_steady=min_steady,
                          previous=_previous(run_info), gate=gate)
    summary.provenance_lines = ev.provenance
    summary.first_iteration_stamp, summary.last_iteration_stamp = _stamps(df)
    work.record(summary, work.of_run(paths, df, summary.steady_first, summary.steady_last, given))
    return ParsedRun(df, summary)
