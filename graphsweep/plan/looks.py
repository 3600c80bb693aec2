"""The decision loop's record of one look: looks/look-{k}.json (`LookRecord`), read and written here, and the runs the
first look judges. The Snakefile reads these at every start (rules/common.smk), so this module imports no judge:
the loop itself (judge_sweep, the next round) is plan/decide.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from graphsweep.fileio import UnusableFile, read_text, write_text
from graphsweep.layout import SweepPaths
from graphsweep.vocab import BLOCKED, LOOP_ENDS, LOOP_GOES_ON


@dataclass(frozen=True)
class LookRecord:
    """looks/look-{k}.json: one look of the decision loop."""

    look: int
    repeats: int  # jobs per arm this look judged (its cells' graph arms)
    runs: tuple[str, ...]  # every run judged by this look (the runs of looks 1..k)
    next_runs: tuple[str, ...]  # the runs look k + 1 needs; () when the loop ends here
    end: str  # LOOP_ENDS: why the loop ends here ("" while it goes on)
    spent_gpu_hours: float  # what the judged runs took
    next_gpu_hours: float  # what the next round is estimated to take (0 when none)
    budget_gpu_hours: float
    max_repeats: int
    cells: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # cell -> status, verdict, speedup, interval

    @property
    def done(self) -> bool:
        return self.end != LOOP_GOES_ON

    def to_dict(self) -> dict[str, Any]:
        return {"look": self.look, "repeats": self.repeats, "runs": list(self.runs), "next_runs": list(self.next_runs),
                "end": self.end, "spent_gpu_hours": self.spent_gpu_hours, "next_gpu_hours": self.next_gpu_hours,
                "budget_gpu_hours": self.budget_gpu_hours, "max_repeats": self.max_repeats,
                "cells": {c: dict(v) for c, v in self.cells.items()}}

    @classmethod
    def from_dict(cls, d: Any, path: Path) -> "LookRecord":
        fix = f"delete {path}: the next snakemake takes the look again from the runs (no job is submitted twice)"
        keys = ("look", "repeats", "runs", "next_runs", "end", "spent_gpu_hours", "next_gpu_hours",
                "budget_gpu_hours", "max_repeats", "cells")
        if not isinstance(d, dict) or any(k not in d for k in keys):
            missing = [k for k in keys if not isinstance(d, dict) or k not in d]
            raise UnusableFile(path, f"is not a look record (missing {', '.join(missing[:3])})", fix)
        if d["end"] not in LOOP_ENDS or not all(isinstance(r, str) for r in [*d["runs"], *d["next_runs"]]):
            raise UnusableFile(path, f"has an unknown end {d['end']!r} or a run id that is not text", fix)
        try:
            return cls(int(d["look"]), int(d["repeats"]), tuple(d["runs"]), tuple(d["next_runs"]), str(d["end"]),
                       float(d["spent_gpu_hours"]), float(d["next_gpu_hours"]), float(d["budget_gpu_hours"]),
                       int(d["max_repeats"]), dict(d["cells"]))
        except (TypeError, ValueError) as exc:
            raise UnusableFile(path, f"holds a value of the wrong type ({exc})", fix) from None


def read_look(path: str | Path) -> LookRecord:
    path = Path(path)
    fix = f"delete {path}: the next snakemake takes the look again from the runs"
    try:
        return LookRecord.from_dict(json.loads(read_text(path, fix)), path)
    except json.JSONDecodeError as exc:
        raise UnusableFile(path, f"is not valid JSON ({exc.msg} at line {exc.lineno})", fix) from None


def write_look(record: LookRecord, path: str | Path) -> None:
    write_text(Path(path), json.dumps(record.to_dict(), indent=1, sort_keys=False) + "\n")


def first_look_runs(plan: pd.DataFrame) -> list[str]:
    """The runs look 1 judges: every submitted run of look 1 (plan.parquet `look`)."""
    look = plan["look"] if "look" in plan.columns else pd.Series(1, index=plan.index)
    return list(plan.run_id[(look <= 1) & (plan.status != BLOCKED)])


def first_look_runs_of(planned: Sequence[Any]) -> list[str]:
    """The same, from the controller's PlannedRun records."""
    return [p.run.run_id for p in planned if p.submitted and p.look <= 1]


def check_looks(paths: SweepPaths) -> None:
    """Read every look record of the sweep: a damaged one is UnusableFile (the controller stops before any job)."""
    folder = paths.root / SweepPaths.LOOKS
    if folder.is_dir():
        for path in sorted(folder.glob("look-*.json")):
            read_look(path)
