"""Recommendations: per shape, what the sweep knows about its graph variants, as one answer with its figures.

- use V: the fastest variant whose speedup is decided (verdict speedup; of several the highest speedup, with the ones
  whose interval reaches it named as rivals), whose loss follows eager's and none of whose runs crashed;
- undecided: a variant that may still be faster is not decided yet: the leading one (highest speedup), with what
  the decision loop estimates would decide it (comparison.parquet `loop_status`, `repeats_to_decide`,
  `gpu_hours_to_decide`; a table written before the loop has `repeats_needed`) and the command that continues;
- not verified: a variant measured faster, but its loss parity is not established (unverified, or a run drifted);
- no recommendation, a variant crashed: a variant's run crashed, and no other variant was timed;
- no CUDA device here: every graph arm was blocked because the machine that runs the jobs has none; eager ran;
- blocked: every graph variant was refused (before running, or by the training);
- stay eager: the graphs measured not faster (slower, no faster, out of memory, not run by the launch gate);
- no recommendation: the eager baseline has no usable run, or trains nothing (NaN/Inf).

A variant one of whose runs crashed (runs.parquet outcome `crashed`: what the failure taxonomy does not call
infrastructure; or a `failed` cell's `failure_run_id`) is never the choice: the answer names the run and its cause,
and the choice moves to the next variant. Reads the tables' fields, never a reason's text; words: report/words.py.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from graphsweep.constraints.runtime import NO_CUDA
from graphsweep.judge import parity as lp
from graphsweep.judge import verdict as vd
from graphsweep.report.data import GATE_CLASS, SweepTables, as_number, id_list
from graphsweep.report.shapes import Overrides, graph_overrides
from graphsweep.vocab import (
    AA, BASELINE_FAILED, BLOCKED, CRASHED, FAILED, INCONCLUSIVE, LOOP_BUDGET, LOOP_DROPPED_LEADER, LOOP_DROPPED_MARGIN,
    LOOP_LIVE, SPEEDUP, TIMING_VERDICTS, UNVERIFIED,
)  # fmt: skip

# comparison.parquet `loop_status` that take a cell out of the race: it cannot beat the leader, or the margin
LOOP_DROPPED = (LOOP_DROPPED_LEADER, LOOP_DROPPED_MARGIN)


class Answer(enum.Enum):
    """What a shape's headline says (words.headline has the words)."""

    USE = "use"
    UNDECIDED = "undecided"
    NOT_VERIFIED = "not verified"
    CRASHED = "a variant crashed"
    NO_GPU = "no CUDA device"
    ALL_BLOCKED = "all blocked"
    STAY_EAGER = "stay eager"
    NO_BASELINE = "no baseline"
    BROKEN_BASELINE = "broken baseline"


@dataclass(frozen=True)
class Crash:
    """A variant of the shape one of whose runs crashed: never recommended."""

    variant: str
    run_ids: tuple[str, ...]  # its crashed runs
    cause: str  # the first one's cause, as the parser recorded it (runs.parquet `reason`) or the cell's failure_detail


@dataclass(frozen=True)
class ToDecide:
    """What would decide the leading undecided variant."""

    repeats: int | None  # jobs per arm (loop: repeats_to_decide; before it: repeats_needed)
    gpu_hours: float | None  # the loop's gpu_hours_to_decide; before it, the more repeats at the runs' cost
    status: str | None  # the loop's loop_status (None: a table written before the loop)
    command: str | None  # the one command that continues the sweep (comparison metadata `continue_command`)
    end: str | None = None  # why the decision loop ended (comparison metadata `loop_end`, vocab LOOP_ENDS)


@dataclass
class Recommendation:
    shape_id: str
    cells: list[pd.Series]  # the shape's graph cells (A/A control excluded), in table order
    choice: pd.Series | None  # the recommended cell (Answer.USE)
    overrides: Overrides | None  # what the choice's command adds to eager (None: not in the plan)
    answer: Answer = Answer.STAY_EAGER
    leader: pd.Series | None = None  # Answer.UNDECIDED: the undecided variant with the highest speedup
    to_decide: ToDecide | None = None
    crashed: list[Crash] = field(default_factory=list)

    @property
    def baseline_failed(self) -> bool:
        """The shape's eager runs failed: there is nothing to stay with, and nothing was compared."""
        return self.choice is None and any(c.verdict == BASELINE_FAILED for c in self.cells)

    @property
    def baseline_broken(self) -> bool:
        """An eager-like run of the shape went NaN/Inf: the baseline trains nothing to compare with."""
        return any(c.verdict == BASELINE_FAILED and c.get("paired_outcome") == vd.BASELINE_LOSS_NONFINITE
                   for c in self.cells)

    def crashed_ids(self) -> set[str]:
        return {c.cell_id for c in self.cells if any(x.variant == c.variant for x in self.crashed)}

    def rivals(self) -> list[pd.Series]:
        """Other timed cells whose interval reaches the choice's: the data do not rank the choice above them."""
        if self.choice is None:
            return []
        lo = as_number(self.choice.get("ci_low"))
        out = []
        crashed = self.crashed_ids()
        for c in self.cells:
            hi = _ci_high(c)
            eligible = c.verdict == INCONCLUSIVE or (c.verdict == SPEEDUP and c.get("loss_parity") == lp.PARITY_OK)
            if (c.cell_id != self.choice.cell_id and eligible and c.cell_id not in crashed and lo is not None
                    and hi is not None and hi >= lo):
                out.append(c)
        return out


def _ci_high(c: pd.Series) -> float | None:
    hi = c.get("ci_high")  # an open interval (ci_high inf) reaches every speedup
    return math.inf if isinstance(hi, float) and math.isinf(hi) and hi > 0 else as_number(hi)


def rule_ids(c: pd.Series | dict[str, Any]) -> list[str]:
    """The preflight rules of a blocked cell (plan rule_id: `;`-joined)."""
    return [r for r in str(c.get("rule_id") or "").split(";") if r]


def gated(cells: list[pd.Series]) -> bool:
    """Every one of these blocked cells is one the launch gate did not run (no graph of the step could win)."""
    return bool(cells) and all(c.verdict == BLOCKED and c.get("failure_class") == GATE_CLASS for c in cells)


def crashes(t: SweepTables, cells: list[pd.Series]) -> list[Crash]:
    """The shape's variants with a crashed graph run: from runs.parquet (outcome crashed), else a `failed` cell's own
    failure_run_id and failure_detail."""
    runs = t.runs
    crashed = runs[runs.outcome == CRASHED] if {"outcome", "run_id"} <= set(runs.columns) else runs.iloc[:0]
    cause = {str(r): str(x or "") for r, x in zip(crashed.run_id, crashed.get("reason", [""] * len(crashed)))}
    out = []
    for c in cells:
        ids = tuple(r for r in id_list(c.get("graph_run_ids")) if r in cause)
        if ids:
            out.append(Crash(str(c.variant), ids, cause[ids[0]]))
        elif c.verdict == FAILED and c.get("paired_outcome") != vd.GRAPH_TOO_SHORT and \
                isinstance(c.get("failure_run_id"), str) and c.get("failure_run_id"):
            out.append(Crash(str(c.variant), (str(c.failure_run_id),), str(c.get("failure_detail") or "")))
    return out


def _may_be_faster(c: pd.Series, margin: float) -> bool:
    """An undecided cell whose interval still reaches beyond 1 + margin (a live loop cell without one too)."""
    status = c.get("loop_status")
    status = status if isinstance(status, str) else None
    if status in LOOP_DROPPED or as_number(c.get("speedup")) is None:
        return False
    if c.verdict != INCONCLUSIVE and status not in (LOOP_LIVE, LOOP_BUDGET):
        return False
    hi = _ci_high(c)
    return hi is None or hi > 1 + margin


def _to_decide(t: SweepTables, c: pd.Series) -> ToDecide:
    status = c.get("loop_status")
    repeats = as_number(c.get("repeats_to_decide"))
    hours = as_number(c.get("gpu_hours_to_decide"))
    if repeats is None and hours is None and not isinstance(status, str):  # a table written before the loop
        repeats = as_number(c.get("repeats_needed"))
        hours = _hours_for(t, c, int(repeats)) if repeats is not None else None
    return ToDecide(None if repeats is None else int(repeats), hours, status if isinstance(status, str) else None,
                    t.continue_command or None, t.loop_end)


def _hours_for(t: SweepTables, c: pd.Series, repeats: int) -> float | None:
    """GPU-hours of the repeats a cell lacks for `repeats` per arm, at what its own runs cost (median per arm)."""
    cost = {str(r): as_number(g) for r, g in zip(t.runs.get("run_id", []), t.runs.get("gpu_seconds", []))}
    total = 0.0
    for arm in ("eager_run_ids", "graph_run_ids"):
        ids = id_list(c.get(arm))
        secs = sorted(x for r in ids if (x := cost.get(r)) is not None)
        if not secs:
            return None
        total += max(0, repeats - len(ids)) * secs[len(secs) // 2]
    return total / 3600.0


def recommend(t: SweepTables) -> list[Recommendation]:
    """One recommendation per shape that has a graph cell, in the comparison table's order."""
    c = t.comparison
    if not len(c):
        return []
    main = c[c.variant != AA]
    out = []
    for sid in dict.fromkeys(main.shape_id):
        cells = [r for _, r in main[main.shape_id == sid].iterrows()]
        crashed = crashes(t, cells)
        broken = {x.variant for x in crashed}
        # only a decided speedup whose every graph run trains the eager model (parity ok) and none crashed
        fast = [r for r in cells if r.verdict == SPEEDUP and as_number(r.get("speedup")) is not None
                and r.get("loss_parity") == lp.PARITY_OK and str(r.variant) not in broken]
        choice = max(fast, key=lambda r: as_number(r.get("speedup")) or 0.0) if fast else None
        found = graph_overrides(t, choice) if choice is not None else None
        rec = Recommendation(str(sid), cells, choice, found if found and found.paste else None, crashed=crashed)
        _answer(t, rec, broken)
        out.append(rec)
    return out


def _answer(t: SweepTables, rec: Recommendation, broken: set[str]) -> None:
    cells = rec.cells
    if rec.choice is not None:
        rec.answer = Answer.USE
        return
    if rec.baseline_broken:
        rec.answer = Answer.BROKEN_BASELINE
        return
    if rec.baseline_failed:
        rec.answer = Answer.NO_BASELINE
        return
    undecided = [c for c in cells if str(c.variant) not in broken and _may_be_faster(c, t.margin)]
    if undecided:
        rec.answer = Answer.UNDECIDED
        rec.leader = max(undecided, key=lambda r: as_number(r.get("speedup")) or 0.0)
        rec.to_decide = _to_decide(t, rec.leader)
        return
    if any(c.verdict in (SPEEDUP, UNVERIFIED) and str(c.variant) not in broken for c in cells):
        rec.answer = Answer.NOT_VERIFIED  # faster, but its loss parity is not established (or a run drifted)
        return
    if rec.crashed and not any(c.verdict in TIMING_VERDICTS for c in cells if str(c.variant) not in broken):
        rec.answer = Answer.CRASHED  # nothing else measured: not a shape whose graphs measured not faster
        return
    blocked = [c for c in cells if c.verdict == BLOCKED]
    if cells and len(blocked) == len(cells) and not gated(blocked):
        no_cuda = any(NO_CUDA.id in rule_ids(c) for c in blocked)
        rec.answer = Answer.NO_GPU if no_cuda else Answer.ALL_BLOCKED
        return
    rec.answer = Answer.STAY_EAGER
