"""Where a run's wall time went: start-up, the training loop's iterations (before, inside and after the steady
window), teardown; in seconds and GPU-seconds (runs.parquet `RUN_TIME_COLUMNS`; docs/tables.md says how precise).

The iterations' parts are sums of their own elapsed times (Megatron's interval timer, printed to 0.1 ms; a line of
a log printed every k iterations stands for the k iterations since the line before it). The rest of the job's wall
time (run.json `wall_s`: a monotonic clock read by the job around the training command) is split where the loop
began: the first iteration line's time stamp less that line's elapsed time, against the job's `start_utc`. Both are
whole seconds, so the split is good to ±1 s. The last line's stamp against `end_utc` checks it: when the two splits
disagree by more than their stamps can (2 s), the loop spent time that no iteration's elapsed time covers
(evaluation and checkpoint saves stop Megatron's interval timer), and that is `untimed`. The stamps are the parser's
(summary.json `first_iteration_stamp`, `last_iteration_stamp`): this module reads records, never a log.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from graphsweep.store.readback import read_run_iterations
from graphsweep.store.runfiles import read_run_info, read_summary
from graphsweep.layout import RunDir

STAMP_S = 1.0  # the lines' stamps (Bridge), start_utc and end_utc are truncated to whole seconds
UNTIMED_MIN_S = 2 * STAMP_S  # what the two splits may differ by from their stamps alone
ZONE_STEP_S = 900  # the stamps are the training process's local time; time zones are whole quarter hours from UTC
ZONES = range(-14 * 4, 14 * 4 + 1)  # UTC-14:00 .. UTC+14:00
PARTS = ("startup", "warmup", "steady", "after", "untimed", "teardown", "outside")

SPLIT_STAMPS = "start-up to the first iteration's time stamp (±1 s), teardown the rest"
SPLIT_UNTIMED = ("start-up to the first iteration's time stamp, teardown from the last one (±1 s each); the "
                 "loop's time in no iteration's elapsed time between them")
SPLIT_NO_ITERATION = "no iteration line: all start-up"
SPLIT_PAIR = ("pair job: start-up and teardown of the arm's two processes and its half of the job's own, not split "
              "(the segments' logs have no start time)")


@dataclass(frozen=True)
class TimeParts:
    """One run's wall time in parts (seconds); None where its files cannot say. The parts that are not None add up
    to the job's wall time; `outside` = startup + untimed + teardown, known whenever the job's wall time is."""

    startup: float | None = None  # job start to the first iteration's start
    warmup: float | None = None  # iterations before the steady window (warmup, capture, a trimmed transient)
    steady: float | None = None  # iterations of the steady window
    after: float | None = None  # iterations after it
    untimed: float | None = None  # inside the loop, in no iteration's elapsed time (evaluation, checkpoints)
    teardown: float | None = None  # the last iteration's end to the job's end
    outside: float | None = None  # the job's wall time outside the iterations' elapsed times
    split: str = ""  # how start-up and teardown were told apart, or why not

    def columns(self, gpus: float | None) -> dict[str, Any]:
        """The runs.parquet columns (store/tables.py RUN_TIME_COLUMNS): seconds, then GPU-seconds."""
        secs = {p: getattr(self, p) for p in PARTS}
        out: dict[str, Any] = {f"time_{p}_s": _round(v) for p, v in secs.items()}
        out.update({f"gpu_{p}_s": _round(v * gpus) if v is not None and gpus else None for p, v in secs.items()})
        out["time_split"] = self.split
        return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _utc(text: Any) -> dt.datetime | None:
    """run.json's start_utc / end_utc (runs.parquet's: a timestamp) as naive UTC."""
    if isinstance(text, dt.datetime):
        t = text
    elif isinstance(text, str) and text:
        t = dt.datetime.fromisoformat(text)
    else:
        return None
    return t.astimezone(dt.timezone.utc).replace(tzinfo=None) if t.tzinfo else t


def iteration_seconds(it: pd.DataFrame) -> np.ndarray:
    """Seconds each iteration row stands for: its elapsed ms times the iterations since the row before (a log printed
    every k iterations averages over them); the first row of a segment takes the most common step, at most its
    own number. Rows sorted by iteration, without NaN elapsed times."""
    number = it["segment_iteration"] if "segment_iteration" in it.columns else it["iteration"]
    group = it["segment"] if "segment" in it.columns else pd.Series(0, index=it.index)
    steps = pd.Series(1.0, index=it.index)
    for _, rows in number.groupby(group, sort=False):
        n = rows.to_numpy(dtype=float)
        d = np.diff(n)
        first = float(pd.Series(d).mode().iloc[0]) if len(d) else 1.0
        steps[rows.index] = np.concatenate([[max(1.0, min(first, n[0]))], np.maximum(d, 1.0)])
    return it["elapsed_ms"].to_numpy(dtype=float) * steps.to_numpy() / 1e3


def loop_parts(it: pd.DataFrame, first: int | None, last: int | None) -> pd.Series:
    """Each iteration row's part: `warmup` (before the steady window; every row when there is none), `steady`,
    `after`. A pair arm's rows carry their segment's window in `steady`; otherwise it is [first, last]."""
    if "steady" in it.columns:
        steady = it["steady"].fillna(False).astype(bool)
    elif first is not None and last is not None:
        steady = it["iteration"].between(first, last)
    else:
        steady = pd.Series(False, index=it.index)
    group = it["segment"] if "segment" in it.columns else pd.Series(0, index=it.index)
    part = pd.Series("warmup", index=it.index)
    part[steady] = "steady"
    for _, rows in it["iteration"].groupby(group, sort=False):
        inside = rows[steady[rows.index]]
        if len(inside):
            part[rows.index[rows > inside.max()]] = "after"
    return part


def _zone(loop_start: dt.datetime, loop_end: dt.datetime, start: dt.datetime, end: dt.datetime) -> float | None:
    """The stamps' offset from UTC (seconds): the one quarter hour that puts the loop inside the job, or None."""
    fits = [k * ZONE_STEP_S for k in ZONES
            if (loop_start - start).total_seconds() - k * ZONE_STEP_S >= -2 * STAMP_S
            and (end - loop_end).total_seconds() + k * ZONE_STEP_S >= -2 * STAMP_S]  # fmt: skip
    return float(fits[0]) if len(fits) == 1 else None


def split_outside(outside: float, start: dt.datetime, end: dt.datetime, loop_start: dt.datetime,
                  loop_end: dt.datetime) -> tuple[float | None, float | None, float | None, str]:
    """(startup, untimed, teardown, how) of the job's time outside the iterations, from the job's start and end and
    the loop's start and end as the iteration lines' stamps put them."""
    zone = _zone(loop_start, loop_end, start, end)
    if zone is None:
        return None, None, None, ("the iteration lines' time stamps fit no one time zone inside the job's start and "
                                  "end: start-up and teardown not split")
    startup = (loop_start - start).total_seconds() - zone
    teardown = (end - loop_end).total_seconds() + zone
    untimed = outside - startup - teardown
    if untimed > UNTIMED_MIN_S and outside - max(0.0, startup) - max(0.0, teardown) > 0:
        startup, teardown = max(0.0, startup), max(0.0, teardown)
        return startup, outside - startup - teardown, teardown, SPLIT_UNTIMED
    startup = min(max(0.0, startup), outside)
    return startup, 0.0, outside - startup, SPLIT_STAMPS


def _stamp(text: Any) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if isinstance(text, str) and text else None


def time_parts(run: Mapping[str, Any], iterations: pd.DataFrame) -> TimeParts:
    """Where one run's wall time went. `run` holds its run.json and summary.json facts (`run_id`, `wall_s`,
    `start_utc`, `end_utc`, `steady_first`, `steady_last`, `first_iteration_stamp`, `last_iteration_stamp`,
    `pair_id` for a pair arm, `executor`); `iterations` its run folder's iterations.parquet (a pair job's: both arms)."""
    it = iterations[iterations["run_id"] == run["run_id"]] if "run_id" in iterations.columns else iterations.iloc[:0]
    if "elapsed_ms" in it.columns:
        it = it[it["elapsed_ms"].notna()].sort_values("iteration")
    else:
        it = it.iloc[:0]
    first, last = _num(run.get("steady_first")), _num(run.get("steady_last"))
    secs = pd.Series(iteration_seconds(it), index=it.index) if len(it) else pd.Series(dtype=float)
    part = loop_parts(it, first, last) if len(it) else pd.Series(dtype=str)
    loop = {p: float(secs[part == p].sum()) for p in ("warmup", "steady", "after")}
    wall = _num(run.get("wall_s"))
    if wall is None:
        why = f"no job wall time (executor {run.get('executor')}): start-up and teardown unknown"
        return TimeParts(**loop, split=why)
    if not len(it):
        return TimeParts(startup=wall, **loop, untimed=0.0, teardown=0.0, outside=wall, split=SPLIT_NO_ITERATION)
    outside = wall - sum(loop.values())
    if outside < -0.01:
        return TimeParts(**loop, split=(f"the iterations' elapsed times ({sum(loop.values()):.1f} s) exceed the job's "
                                        f"wall time ({wall:.1f} s): start-up and teardown unknown"))
    outside = max(0.0, outside)
    if isinstance(run.get("pair_id"), str) and run.get("pair_id"):
        return TimeParts(**loop, outside=outside, split=SPLIT_PAIR)
    start, end = _utc(run.get("start_utc")), _utc(run.get("end_utc"))
    stamps = [_stamp(run.get("first_iteration_stamp")), _stamp(run.get("last_iteration_stamp"))]
    if start is None or end is None or None in stamps:
        why = "the job's start or end time" if start is None or end is None else "a time stamp on its iteration lines"
        return TimeParts(**loop, outside=outside, split=f"the run has no {why}: start-up and teardown not split")
    loop_start = stamps[0] - dt.timedelta(seconds=float(secs.iloc[0]))
    startup, untimed, teardown, how = split_outside(outside, start, end, loop_start, stamps[1])
    return TimeParts(startup=startup, **loop, untimed=untimed, teardown=teardown, outside=outside, split=how)


def time_columns(run: Mapping[str, Any], iterations: pd.DataFrame) -> dict[str, Any]:
    """runs.parquet's RUN_TIME_COLUMNS of one run (see time_parts), GPU-seconds from its `gpus`."""
    return time_parts(run, iterations).columns(_num(run.get("gpus")))


def folder_parts(run_dir: Path) -> dict[str, TimeParts]:
    """Each run of one parsed run folder (a pair job: both arms) and where its wall time went, from the folder's
    run.json, summary.json and iterations.parquet alone (no plan: benchmarks/pipeline_overhead.py)."""
    run = RunDir(run_dir)
    info = read_run_info(run)
    summary = read_summary(run)
    iterations = read_run_iterations(run) if run.iterations.exists() else pd.DataFrame({"run_id": pd.Series(dtype=str)})
    if "arms" in summary:  # graphsweep/parse/run_dir.py parse_pair_dir
        runs = [{**info, **arm, "pair_id": run.run_id} for arm in summary["arms"].values()]
    else:
        runs = [{**info, **summary, "run_id": run.run_id}]
    return {r["run_id"]: time_parts(r, iterations) for r in runs}


def planned_run_ids(runs: pd.DataFrame) -> pd.Series:
    """Each runs.parquet row's planned run (its job): the run itself, or for a pair job's arm the pair job."""
    if "pair_id" not in runs.columns:
        return runs["run_id"]
    return runs["pair_id"].where(runs["pair_id"].notna(), runs["run_id"])


def spent_by_run(runs: pd.DataFrame | None) -> dict[str, float]:
    """GPU-seconds each finished run took, by its planned run id (a pair job: its two arms together)."""
    if runs is None or not len(runs) or "gpu_seconds" not in runs.columns:
        return {}
    cost = pd.to_numeric(runs["gpu_seconds"], errors="coerce")
    frame = pd.DataFrame({"job": planned_run_ids(runs), "cost": cost})
    frame = frame[frame.cost.notna() & (frame.cost > 0)]
    return {str(k): float(v) for k, v in frame.groupby("job").cost.sum().items()}
