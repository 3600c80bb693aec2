"""Repeated confidence intervals: a cell may be looked at after every round of repeats and still keep its error rate.

The decision loop (plan/decide.py) judges a cell after its first repeats and again after each round it adds, and
stops the cell as soon as its interval decides it. A fixed-sample interval looked at that way is wrong more often
than its level says (every look is another chance for noise to cross an edge). So each look k uses a wider critical
value c_k, chosen before any data is seen, such that the intervals of ALL possible looks cover the true ratio at once
with probability 1 - alpha: a group-sequential design with an alpha-spending function (Lan & DeMets 1983), read as
repeated confidence intervals (Jennison & Turnbull 1989; "Group Sequential Methods", 2000, ch. 9). Because the
coverage is simultaneous, any stopping rule may read them: decided, dropped because another variant leads or because
it cannot beat the margin, out of budget (docs/statistics.md "The decision loop" says why this and not an
anytime-valid confidence sequence: with 3-16 jobs per arm and unknown variance those are several times wider).

- `Design`: the looks (jobs per arm at each look: first, first + step, ... up to the horizon) and the spending
  function. The horizon, not the budget, fixes the boundaries: raising a sweep's budget later continues on the
  same boundaries, so a sweep that stopped for budget can go on without spending alpha twice.
- `boundaries(design, alpha)`: c_1..c_K for a normal statistic (Armitage-McPherson-Rowe recursive integration).
- `critical_t(design, look, df, alpha)`: the boundary for a t statistic with df degrees of freedom at the same
  nominal level (the "significance level approach", Jennison & Turnbull 2000 section 11.4): jobs are few and the
  variance is estimated, so the normal boundary alone would be too narrow.
- `repeated_p(...)`: the repeated p-value (J&T 9.4): the smallest alpha at which this look's interval would
  exclude the hypothesis. P(some look's repeated p <= alpha) <= alpha, so a cell's smallest one over its looks is a
  valid p-value for the family gate.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special  # ndtr / ndtri are the normal CDF and its inverse (what scipy.stats.norm calls)
from scipy.optimize import brentq

from graphsweep.judge.design import Design

GRID = 121  # points per look in the recursive integration (odd: Simpson); boundaries good to ~1e-5 in alpha
SQRT_2PI = math.sqrt(2.0 * math.pi)
ALPHA_FLOOR = 1e-12  # repeated p-values below this are reported as this
TABLE_POINTS = 60  # alphas at which each design's nominal levels are tabled (log-spaced, ALPHA_FLOOR..0.999)


def spent(t: float, alpha: float, spending: str, gamma: float = 1.0) -> float:
    """Alpha spent by information fraction t in [0, 1] (two-sided); spent(1) = alpha.

    pocock: alpha ln(1 + (e - 1) t) (Lan-DeMets, Pocock-like: spends early); obrien-fleming: 2 - 2 Phi(z_{1-alpha/2}
    / sqrt t) (spends almost nothing early); hsd: alpha (1 - e^{-gamma t}) / (1 - e^{-gamma}), gamma = 1 between them.
    """
    t = min(max(t, 0.0), 1.0)
    if t == 0:
        return 0.0
    if spending == "pocock":
        return alpha * math.log1p((math.e - 1.0) * t)
    if spending == "obrien-fleming":
        return float(2.0 - 2.0 * special.ndtr(special.ndtri(1.0 - alpha / 2.0) / math.sqrt(t)))
    if gamma == 0:
        return alpha * t
    return alpha * (1.0 - math.exp(-gamma * t)) / (1.0 - math.exp(-gamma))


def _simpson(n: int) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w / 3.0


@lru_cache(maxsize=4096)
def boundaries(design: Design, alpha: float) -> tuple[float, ...]:
    """Two-sided critical values c_1..c_K of the standardized statistic Z_k at the design's looks, such that under
    no effect P(|Z_k| >= c_k at some look k) = alpha, and the chance of crossing first at look k is what the spending
    function adds between looks k-1 and k. Z_k = S_k / sqrt(t_k) for a Brownian motion S in information t.

    The density of Z on the continuation region is carried from look to look on a grid (Simpson's rule); the
    crossing probability of the next look given Z_{k-1} = u is exact (normal increments).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"boundaries: alpha {alpha} must be in (0, 1)")
    ts = design.fractions()
    out: list[float] = []
    z = dens = None  # the grid and the sub-density of Z_{k-1} on |z| < c_{k-1}
    prev_spent = 0.0
    for k, t in enumerate(ts):
        target = spent(t, alpha, design.spending, design.gamma) - prev_spent
        if k == 0:
            c = float(special.ndtri(1.0 - target / 2.0)) if target > 0 else math.inf
        else:
            t0 = ts[k - 1]
            dt = t - t0
            w = _simpson(len(z)) * (z[1] - z[0])

            def cross(c: float) -> float:  # P(continue to k-1, then |Z_k| >= c)
                m = z * math.sqrt(t0)
                s = math.sqrt(dt)
                inside = special.ndtr((c * math.sqrt(t) - m) / s) - special.ndtr((-c * math.sqrt(t) - m) / s)
                return float(np.sum(w * dens * (1.0 - inside)))

            if target <= 0 or cross(40.0) >= target:
                c = math.inf if target <= 0 else 40.0
            else:
                c = float(brentq(lambda x: cross(x) - target, 0.0, 40.0, xtol=1e-7))
        out.append(c)
        prev_spent += target
        # the density of Z_k restricted to |Z_k| < c_k, on a fresh grid
        cg = min(c, 12.0)
        znew = np.linspace(-cg, cg, GRID)
        if k == 0:
            dens = np.exp(-0.5 * znew * znew) / SQRT_2PI
        else:
            s = math.sqrt(t - ts[k - 1])
            w = _simpson(len(z)) * (z[1] - z[0])
            x = (znew[:, None] * math.sqrt(t) - z[None, :] * math.sqrt(ts[k - 1])) / s
            dens = (np.exp(-0.5 * x * x) @ (w * dens)) * math.sqrt(t) / (s * SQRT_2PI)
        z = znew
    return tuple(out)


def nominal_alpha(design: Design, look: int, alpha: float) -> float:
    """The two-sided nominal level of look k's boundary: 2 (1 - Phi(c_k))."""
    c = boundaries(design, alpha)[look - 1]
    return float(2.0 * special.ndtr(-c)) if math.isfinite(c) else 0.0


def critical_t(design: Design, look: int, df: float, alpha: float) -> float:
    """The critical value for a t statistic with `df` degrees of freedom at look k: the t quantile at the normal
    boundary's nominal level (df = inf gives the normal boundary)."""
    p = nominal_alpha(design, look, alpha)
    if p <= 0:
        return math.inf
    return float(special.stdtrit(df, 1.0 - p / 2.0)) if math.isfinite(df) else float(special.ndtri(1.0 - p / 2.0))


@lru_cache(maxsize=64)
def _nominal_table(design: Design) -> tuple[np.ndarray, np.ndarray]:
    """(log alpha grid, log nominal level per look and alpha): nominal_alpha for TABLE_POINTS alphas, once per design
    (~1 s): repeated p-values read it backwards instead of solving for the boundaries at every statistic."""
    grid = np.linspace(math.log(ALPHA_FLOOR), math.log(0.999), TABLE_POINTS)
    noms = np.array([[max(nominal_alpha(design, k, math.exp(a)), 1e-300) for a in grid]
                     for k in range(1, len(design.looks) + 1)])
    return grid, np.log(noms)


def repeated_p(design: Design, look: int, stat: float, df: float) -> float:
    """The repeated p-value at look k of a statistic `stat` (the distance to the hypothesis in standard errors, > 0
    on the side being tested) with `df` degrees of freedom: the smallest alpha whose look-k interval would exclude
    the hypothesis, i.e. whose nominal level reaches the statistic's two-sided t tail. 1 when stat <= 0."""
    if math.isnan(stat) or stat <= 0:
        return 1.0
    tail = 2.0 * float(special.stdtr(df, -stat)) if math.isfinite(df) else 2.0 * float(special.ndtr(-stat))
    if tail <= 0:
        return ALPHA_FLOOR
    grid, noms = _nominal_table(design)
    row = noms[look - 1]  # increasing in alpha
    x = math.log(tail)
    if x <= row[0]:
        return ALPHA_FLOOR
    if x >= row[-1]:
        return 1.0
    return float(min(1.0, math.exp(np.interp(x, row, grid))))
