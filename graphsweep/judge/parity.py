"""Loss parity: does a graph run train the same model as the eager runs of its seed? Judged on the trajectory.

Pure functions, numbers in, dataclasses out. Runs of one seed see the same data in the same order, so their
`lm loss` agree iteration by iteration up to the model's own run-to-run non-determinism. On the real H200 runs
(benchmarks/validate_parity.py, docs/statistics.md "Loss parity") that non-determinism has a typical level of
1e-4..3e-3 relative, with single-iteration spikes up to 1.2e-1 where a batch's loss is small (the tiny dense
model's two trajectories, the dropless MoE, TP=2). A broken graph is persistent: NaN, a factor, a bias, a walk.

The statistic, for a graph run g against one eager run e over their common iterations i_1 < ... < i_n:

    d(i)      = |g(i) - e(i)| / |e(i)|
    level(t)  = median of d(i) over i >= t               (only tails of at least MIN_TAIL iterations)
    departs from t  iff  d(t) > tolerance and level(t) > tolerance

so one iteration never decides (a spike is outvoted by its tail) while a departure that lasts half of the rest of
the run always does. The tolerance is the model's own noise, measured in the sweep where it can be:

    tolerance = max(LOSS_FLOOR, SPREAD_FACTOR x spread)

with `spread` the largest persistent level between two eager-like runs of the seed (eager and A/A control runs of
the shape: same code, same seed). A graph run is judged against the eager run it follows best (a non-deterministic
model's graph run follows one of the eager trajectories). A NaN/Inf graph loss where eager is finite is
`nonfinite` at once. The cell's state (judge_arm) counts the runs: one departing run among at least three checked,
within DRIFT_LEVEL tolerances, is `run-drift` (the timing verdict stands, nothing is recommended); anything more
is `diverged` and the cell is invalid.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

# Calibrated on the real runs (benchmarks/validate_parity.py prints the figures; docs/statistics.md quotes them):
LOSS_FLOOR = 5e-3  # above every correct real run's persistent level, below a 1 % bias
SPREAD_FACTOR = 1.25  # a graph run may wander a quarter further than two eager runs of the seed do
MIN_TAIL = 5  # a departure must persist over at least this many compared iterations (the last 4 are not judged)
DRIFT_LEVEL = 2.0  # a drifting run departs by at most this many tolerances; beyond it the cell is invalid
DRIFT_MAX_RUNS = 1  # at most one graph run may drift, and only when at least DRIFT_MIN_CHECKED runs were checked
DRIFT_MIN_CHECKED = 3
_TINY = 1e-12

# Parity of a run and of a cell (comparison.parquet loss_parity)
PARITY_OK = "ok"
DIVERGED = "diverged"  # a persistent departure beyond the bound: the cell is invalid
NONFINITE = "nonfinite"  # NaN/Inf where eager is finite: the cell is invalid
UNCHECKED = "unchecked"  # no eager run of the seed with a loss to compare with (no lm loss, or the seed unknown)
RUN_DRIFT = "run-drift"  # one run of >= 3 departed by at most DRIFT_LEVEL tolerances: reported, not recommended
STATES = (PARITY_OK, RUN_DRIFT, UNCHECKED, DIVERGED, NONFINITE)

LossSeries = Mapping[int, float]  # iteration -> lm loss (NaN/inf allowed: a missing or broken value)


@dataclass(frozen=True)
class RunParity:
    """One graph run against the eager runs of its seed."""

    run_id: str
    state: str  # PARITY_OK | DIVERGED (departs) | NONFINITE | UNCHECKED
    iteration: int | None  # where it departs / first non-finite; when ok, where it came closest
    graph_loss: float | None
    eager_loss: float | None
    rel_diff: float | None  # d at `iteration`
    level: float  # its largest persistent level (median of the tail), against the eager run it follows best
    tolerance: float
    eager_run: str | None
    compared: int  # iterations compared

    @property
    def excess(self) -> float:
        """level / tolerance (> 1: departs); inf for a non-finite loss."""
        return math.inf if self.state == NONFINITE else self.level / self.tolerance


@dataclass(frozen=True)
class ArmParity:
    """The graph arm of a cell: every run's parity and the state they add up to."""

    state: str  # one of STATES
    runs: tuple[RunParity, ...]
    worst: RunParity | None  # the run that decided the state (or the closest call when ok)
    departed: int  # runs that departed (diverged or drifted)
    checked: int  # runs compared with at least one eager run of their seed
    spread: float  # the eager-like runs' own persistent level (0: one run, or bit-identical runs)
    tolerance: float


def rel_diffs(graph: LossSeries, eager: LossSeries) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(common iterations where eager is finite, d(i), graph finite?) in iteration order."""
    common = sorted(i for i in graph if i in eager and math.isfinite(eager[i]))
    g = np.array([graph[i] for i in common], dtype=float)
    e = np.array([eager[i] for i in common], dtype=float)
    finite = np.isfinite(g)
    with np.errstate(invalid="ignore"):
        d = np.abs(g - e) / np.maximum(np.abs(e), _TINY)
    return common, d, finite


MAX_STARTS = 400  # longer runs are judged at this many evenly spaced starts (keeps 10^4 iterations fast)


def tail_levels(d: np.ndarray) -> np.ndarray:
    """level(t) for each start t: the median of d over the tail from t; NaN where the tail is shorter than MIN_TAIL
    (and, in runs longer than MAX_STARTS iterations, between the evenly spaced starts that are evaluated)."""
    n = d.size
    out = np.full(n, np.nan)
    last = n - MIN_TAIL + 1
    step = max(1, -(-last // MAX_STARTS))
    for k in range(0, max(0, last), step):
        out[k] = float(np.median(d[k:]))
    return out


def persistent_level(a: LossSeries, b: LossSeries) -> float:
    """The largest tail median of d between two runs (0 when they share fewer than MIN_TAIL finite iterations)."""
    _, d, finite = rel_diffs(a, b)
    d = d[finite]
    lv = tail_levels(d)
    return float(np.nanmax(lv)) if np.isfinite(lv).any() else 0.0


def eager_spread(eager: Sequence[LossSeries]) -> float:
    """The eager-like runs' own non-determinism: the largest persistent level between two of them."""
    return max((persistent_level(a, b) for a, b in itertools.combinations(eager, 2)), default=0.0)


def tolerance_for(spread: float, floor: float = LOSS_FLOOR, factor: float = SPREAD_FACTOR) -> float:
    return max(floor, factor * spread)


def check_run(run_id: str, graph: LossSeries, eager: Mapping[str, LossSeries], tolerance: float) -> RunParity:
    """One graph run against each eager run of its seed, judged against the one it follows best."""
    best: RunParity | None = None
    for eager_id, e in eager.items():
        common, d, finite = rel_diffs(graph, e)
        if not common:
            continue
        if not finite.all():
            k = int(np.flatnonzero(~finite)[0])
            cand = RunParity(run_id, NONFINITE, common[k], float(graph[common[k]]), float(e[common[k]]), math.inf,
                             math.inf, tolerance, eager_id, len(common))
        else:
            lv = tail_levels(d)
            level = float(np.nanmax(lv)) if np.isfinite(lv).any() else 0.0
            start = next((k for k in range(d.size) if d[k] > tolerance and lv[k] > tolerance), None)
            k = start if start is not None else int(np.argmax(d))
            cand = RunParity(run_id, DIVERGED if start is not None else PARITY_OK, common[k], float(graph[common[k]]),
                             float(e[common[k]]), float(d[k]), level, tolerance, eager_id, len(common))
        if best is None or (cand.excess, cand.iteration or 0) < (best.excess, best.iteration or 0):
            best = cand
    if best is None:
        return RunParity(run_id, UNCHECKED, None, None, None, None, 0.0, tolerance, None, 0)
    return best


def judge_arm(graph: Mapping[str, LossSeries], eager: Mapping[str, LossSeries], *,
              floor: float = LOSS_FLOOR, factor: float = SPREAD_FACTOR) -> ArmParity:
    """The parity of a graph arm: its runs (run id -> loss) against the eager-like runs of the same seed.

    The caller groups by seed: every run here trained from one seed on one data order (judge/verdict.py).
    """
    spread = eager_spread(list(eager.values()))
    tol = tolerance_for(spread, floor, factor)
    runs = tuple(check_run(rid, g, eager, tol) for rid, g in graph.items())
    return summarize(runs, spread, tol)


def summarize(runs: Sequence[RunParity], spread: float, tolerance: float) -> ArmParity:
    """Add the runs' states up to the arm's (runs may come from several seeds, each checked against its own)."""
    runs = tuple(runs)
    checked = [r for r in runs if r.state != UNCHECKED]
    bad = [r for r in checked if r.state in (DIVERGED, NONFINITE)]
    nonfinite = [r for r in bad if r.state == NONFINITE]
    if nonfinite:
        state, worst = NONFINITE, min(nonfinite, key=lambda r: r.iteration or 0)
    elif bad:
        drift = (len(bad) <= DRIFT_MAX_RUNS and len(checked) >= DRIFT_MIN_CHECKED
                 and all(r.excess <= DRIFT_LEVEL for r in bad))
        state, worst = (RUN_DRIFT if drift else DIVERGED), max(bad, key=lambda r: r.excess)
    elif not checked:
        state, worst = UNCHECKED, None
    elif len(checked) < len(runs):
        state, worst = UNCHECKED, next(r for r in runs if r.state == UNCHECKED)
    else:
        state, worst = PARITY_OK, max(checked, key=lambda r: r.excess)
    return ArmParity(state, runs, worst, len(bad), len(checked), spread, tolerance)


def first_departure(runs: Sequence[RunParity]) -> int | None:
    """The earliest iteration at which a run of the arm left eager's loss (for the reason's count)."""
    its = [r.iteration for r in runs if r.state in (DIVERGED, NONFINITE) and r.iteration is not None]
    return min(its) if its else None
