"""Where a sweep's GPU-hours went: start-up, warmup and capture, the steady windows, teardown, and the share of the
sweep that measured something; from runs.parquet's time_*/gpu_* columns (graphsweep/store/timeparts.py; docs/tables.md
says how each is derived and how precise it is). Numbers only: report/words.py names the parts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from graphsweep.store.tables import RUN_TIME_COLUMNS

H = 1 / 3600.0
# The parts of a run's GPU time, in the order a run goes (words.GPU_PARTS names them)
STARTUP, WARMUP, STEADY, STEADY_UNUSABLE, AFTER, UNTIMED, TEARDOWN, UNSPLIT, UNKNOWN = (
    "startup", "warmup", "steady", "steady_unusable", "after", "untimed", "teardown", "unsplit", "unknown")


@dataclass
class GpuTime:
    """A sweep's GPU-hours in parts, over its runs that have a job wall time."""

    runs: int = 0  # runs with a job wall time: the parts below are theirs
    total_h: float = 0.0  # their GPU-hours (runs.parquet gpu_seconds): the report's "spent"
    parts: list[tuple[str, float, int]] = field(default_factory=list)  # (part, GPU-hours, its runs), in run order
    measured_h: float = 0.0  # steady windows of runs whose measurement is usable
    measured_runs: int = 0
    stamped_runs: int = 0  # runs split at their iteration lines' time stamps
    no_wall_runs: int = 0  # ingested logs: no job, so no start-up or teardown
    no_wall_loop_h: float = 0.0  # their iterations' GPU-hours
    no_wall_steady_h: float = 0.0
    missing: bool = False  # runs.parquet was written before these columns existed


def _true(x: Any) -> bool:
    return x is True or (not isinstance(x, str) and bool(x) and x == x)


def _sum(frame: pd.DataFrame, col: str) -> float:
    return float(pd.to_numeric(frame[col], errors="coerce").sum()) * H if len(frame) else 0.0


def gpu_time(runs: pd.DataFrame) -> GpuTime:
    """The breakdown of runs.parquet's GPU-hours (every run that ran; preflight-blocked runs never did)."""
    if not len(runs):
        return GpuTime()
    if any(c not in runs.columns for c in RUN_TIME_COLUMNS):
        return GpuTime(missing=True)
    cost = pd.to_numeric(runs.get("gpu_seconds"), errors="coerce")
    walled, no_wall = runs[cost.notna()], runs[cost.isna()]
    usable = walled.get("measurement_usable", pd.Series(False, index=walled.index)).map(_true).astype(bool)
    split = walled[pd.to_numeric(walled["gpu_startup_s"], errors="coerce").notna()]
    unsplit = walled[pd.to_numeric(walled["gpu_startup_s"], errors="coerce").isna()]
    unknown = unsplit[pd.to_numeric(unsplit["gpu_outside_s"], errors="coerce").isna()]
    parts = [
        (STARTUP, _sum(split, "gpu_startup_s"), len(split)),
        (WARMUP, _sum(walled, "gpu_warmup_s"), len(walled)),
        (STEADY, _sum(walled[usable], "gpu_steady_s"), int(usable.sum())),
        (STEADY_UNUSABLE, _sum(walled[~usable], "gpu_steady_s"), int((~usable).sum())),
        (AFTER, _sum(walled, "gpu_after_s"), len(walled)),
        (UNTIMED, _sum(split, "gpu_untimed_s"), len(split)),
        (TEARDOWN, _sum(split, "gpu_teardown_s"), len(split)),
        (UNSPLIT, _sum(unsplit, "gpu_outside_s"), len(unsplit) - len(unknown)),
    ]
    total = float(cost.sum()) * H
    rest = total - sum(h for _, h, _ in parts)
    if len(unknown):
        parts.append((UNKNOWN, rest, len(unknown)))
    return GpuTime(
        runs=len(walled), total_h=total, parts=[p for p in parts if round(p[1], 4)],
        measured_h=parts[2][1], measured_runs=int(usable.sum()), stamped_runs=len(split),
        no_wall_runs=len(no_wall),
        no_wall_loop_h=sum(_sum(no_wall, c) for c in ("gpu_warmup_s", "gpu_steady_s", "gpu_after_s")),
        no_wall_steady_h=_sum(no_wall, "gpu_steady_s"),
    )  # fmt: skip
