"""What a sweep's runs cost: the workload's estimate before any ran (workloads/*.py estimate, from the committed real
runs: benchmarks/estimates.py), corrected by what this sweep's own finished runs took.

A sweep that has run (runs.parquet) knows better than any model what its runs cost on its cluster: a run still to
come costs what the finished runs of its cell took (their median: its repeats are the same job), or, for a cell
none of whose runs finished, the model's estimate times what the finished runs took against theirs (the median
ratio). The budget check, the dry run and `graphsweep more-repeats` count that; plan.parquet keeps the model's
estimate, which the report sets against what the sweep spent.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from graphsweep.store.tables import read_table
from graphsweep.store.timeparts import spent_by_run
from graphsweep.layout import SweepPaths
from graphsweep.fileio import UnusableFile
from graphsweep.records import RunSpec


def spent_of(paths: SweepPaths | None) -> dict[str, float]:
    """What this sweep's finished runs took (its runs.parquet); {} before any finished. A damaged table corrects
    nothing here: readback.check_sweep names it before any job."""
    if paths is None or not paths.runs.exists():
        return {}
    try:
        return spent_by_run(read_table(paths.runs, "runs"))
    except UnusableFile:
        return {}


@dataclass(frozen=True)
class Correction:
    """This sweep's finished runs against the model's estimates of them."""

    finished: int = 0
    ratio: float | None = None  # median of actual / estimate over them (None: none finished)
    by_cell: Mapping[str, float] | None = None  # median actual GPU-seconds of each cell's finished runs

    def cost(self, run: RunSpec, estimate: float) -> float:
        """GPU-seconds a run still to come will take."""
        if self.by_cell and run.cell_id in self.by_cell:
            return float(self.by_cell[run.cell_id])
        return float(estimate) * (self.ratio if self.ratio is not None else 1.0)

    def apply_h(self, planned: Sequence[Any]) -> float:
        """GPU-hours the given runs still to come will take."""
        return sum(self.cost(p.run, p.est_gpu_seconds) for p in planned) / 3600.0

    def describe(self) -> str:
        if not self.finished or self.ratio is None:
            return "the workload's estimates (no run of this sweep has finished)"
        return (f"corrected by this sweep's {self.finished} finished runs (they took {self.ratio:.2f}x their "
                "estimates; a cell's runs still to come cost what its finished runs took)")


def correction(planned: Sequence[Any], spent: Mapping[str, float]) -> Correction:
    """`planned`: PlannedRun records (run, est_gpu_seconds) of the sweep; `spent`: spent_by_run."""
    done = [p for p in planned if p.run.run_id in spent]
    ratios = [spent[p.run.run_id] / p.est_gpu_seconds for p in done if p.est_gpu_seconds > 0]
    cells: dict[str, list[float]] = {}
    for p in done:
        cells.setdefault(p.run.cell_id, []).append(spent[p.run.run_id])
    return Correction(len(done), statistics.median(ratios) if ratios else None,
                      {c: statistics.median(v) for c, v in cells.items()})  # fmt: skip


@dataclass(frozen=True)
class SweepCost:
    spent_s: float  # the finished runs
    to_come_s: float  # the runs still to come, corrected
    correction: Correction

    @property
    def total_h(self) -> float:
        return (self.spent_s + self.to_come_s) / 3600.0


def sweep_cost(submitted: Sequence[Any], spent: Mapping[str, float]) -> SweepCost:
    """The GPU-seconds of a sweep's submitted runs: spent by those that finished, expected of the rest."""
    fix = correction(submitted, spent)
    done = sum(spent[p.run.run_id] for p in submitted if p.run.run_id in spent)
    rest = sum(fix.cost(p.run, p.est_gpu_seconds) for p in submitted if p.run.run_id not in spent)
    return SweepCost(done, rest, fix)
