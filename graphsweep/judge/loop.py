"""The decision loop's rules, on judged cells: which cells are decided, which are dropped, which need more repeats.

The loop (plan/decide.py drives it, judge/compare.py replays it) judges every live cell after each round of repeats
at that look's repeated confidence interval (judge/sequential.py, through interval.Look), then:

1. a cell whose judgement is not about timing (blocked, OOM, failed, invalid, baseline-failed, not comparable) stops:
   more repeats cannot change it (`untimed`);
2. the family gate: Benjamini-Hochberg over the sweep's timed cells (A/A controls excluded) on each cell's smallest
   repeated p-value so far (a valid p-value whatever look the cell stopped at: P(some look's p <= a) <= a);
3. a speedup or slowdown whose q is below alpha, or a neutral interval, is `decided`;
4. racing: a cell whose interval lies below 1 + margin cannot be a speedup (`dropped-margin`: measured not faster);
   a cell whose interval lies below the interval of another cell of its shape (the leader) cannot be the shape's best
   (`dropped-leader`). The intervals hold at every look together, so dropping on them spends no alpha;
5. everything else stays `live`: its shape's eager baseline (and A/A control) and its graph arm get the next round.

Numbers in, states out: no tables, no files. The caller judges (verdict.judge_cell or interval.judge) and keeps the
rows; `step` updates the states in place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from graphsweep.judge.interval import benjamini_hochberg
from graphsweep.vocab import (
    LOOP_BUDGET, LOOP_CONTROL, LOOP_DECIDED, LOOP_DROPPED_LEADER, LOOP_DROPPED_MARGIN, LOOP_LIVE, LOOP_UNTIMED, NEUTRAL,
    SLOWDOWN, SPEEDUP, TIMING_VERDICTS, UNVERIFIED,
)  # fmt: skip

STOPPED = (LOOP_DECIDED, LOOP_DROPPED_LEADER, LOOP_DROPPED_MARGIN, LOOP_UNTIMED)  # no more repeats for these


@dataclass(frozen=True)
class Judged:
    """One cell at one look, as the loop needs it."""

    verdict: str
    ratio: float | None = None  # eager / graph, > 1 = graph faster
    lo: float | None = None  # that look's repeated confidence interval
    hi: float | None = None
    p_beyond: float | None = None  # repeated p-value of "beyond the band" (speedup or slowdown)
    more_helps: bool = True  # an unverified speedup: False when more eager runs cannot check its loss either


@dataclass
class CellState:
    """Where the loop has a cell: its status and its judgement at the last look it was judged at."""

    cell_id: str
    shape_id: str
    control: bool = False
    status: str = LOOP_LIVE
    look: int = 0  # the last look it was judged at (0: not yet)
    judged: Judged | None = None
    p_min: float | None = None  # its smallest repeated p_beyond over its looks (the family gate's p)
    q: float | None = None  # its Benjamini-Hochberg q at the last look

    @property
    def live(self) -> bool:
        return self.status == LOOP_LIVE

    @property
    def timed(self) -> bool:
        return self.judged is not None and self.judged.verdict in TIMING_VERDICTS


def new_states(cells: Mapping[str, tuple[str, bool]]) -> dict[str, CellState]:
    """cell id -> (shape id, is an A/A control cell): every cell live (controls: `control`) before the first look."""
    return {c: CellState(c, shape, control, LOOP_CONTROL if control else LOOP_LIVE) for c, (shape, control) in
            cells.items()}


def live_shapes(states: Mapping[str, CellState]) -> set[str]:
    """Shapes with a live cell: their eager baseline, A/A control and live cells get the next round."""
    return {s.shape_id for s in states.values() if s.live}


def judged_now(states: Mapping[str, CellState]) -> list[str]:
    """The cells judged at the next look: the live ones, and the A/A controls of live shapes."""
    shapes = live_shapes(states)
    return [c for c, s in states.items() if s.live or (s.control and s.shape_id in shapes)]


def step(states: dict[str, CellState], judged: Mapping[str, Judged], look: int, *, margin: float,
         alpha: float) -> None:
    """Apply look `look`'s judgements (of the cells judged_now named) and move every state on (the rules above)."""
    for cell_id, j in judged.items():
        s = states[cell_id]
        s.look, s.judged = look, j
        if not s.control and s.timed and j.p_beyond is not None and not math.isnan(j.p_beyond):
            s.p_min = j.p_beyond if s.p_min is None else min(s.p_min, j.p_beyond)
        if not s.control and not s.timed:
            s.status = LOOP_UNTIMED
    gate(states)
    up, dn = 1.0 + margin, 1.0 - margin
    for cell_id in judged:
        s = states[cell_id]
        if not s.live:
            continue
        j = s.judged
        if j.verdict in (SPEEDUP, SLOWDOWN) and s.q is not None and s.q < alpha:
            s.status = LOOP_DECIDED
        elif j.verdict == NEUTRAL or (j.lo is not None and j.hi is not None and dn <= j.lo and j.hi <= up):
            s.status = LOOP_DECIDED
        elif j.verdict == UNVERIFIED and not j.more_helps and s.q is not None and s.q < alpha:
            s.status = LOOP_DECIDED  # faster, but no number of eager runs can check its loss: more repeats buy nothing
        elif j.hi is not None and j.hi < up:
            s.status = LOOP_DROPPED_MARGIN
        elif j.hi is not None and (lead := leader(states, s.shape_id)) is not None and lead != cell_id \
                and states[lead].judged.lo > j.hi:
            s.status = LOOP_DROPPED_LEADER


def leader(states: Mapping[str, CellState], shape_id: str) -> str | None:
    """The cell of the shape whose interval's lower end is highest (timed, not an A/A control)."""
    best = None
    for c, s in states.items():
        if s.shape_id != shape_id or s.control or not s.timed or s.status == LOOP_UNTIMED or s.judged.lo is None:
            continue
        if best is None or s.judged.lo > states[best].judged.lo:
            best = c
    return best


def gate(states: Mapping[str, CellState]) -> None:
    """Benjamini-Hochberg q of every timed cell on its smallest repeated p so far (one family: the sweep)."""
    ids = [c for c, s in states.items() if not s.control and s.timed and s.p_min is not None]
    for c, q in zip(ids, benjamini_hochberg([states[c].p_min for c in ids])):
        states[c].q = q


def close(states: dict[str, CellState]) -> None:
    """The loop ends with cells still live: out of budget (repeats per arm or GPU-hours)."""
    for s in states.values():
        if s.live:
            s.status = LOOP_BUDGET
