"""The interval of one cell from per-job steady medians: pure functions, numbers in, dataclasses out.

Jobs are the replicates: each job is reduced to its steady-window median m_j; the arithmetic is on log m_j.
Figures behind every constant: docs/statistics.md (benchmarks/validate_stats.py on real H200 jobs).

1. Per arm (summarize_arm): mean of log medians and the variance of that mean, split into
   - var_spread, which shrinks with n: the observed s^2/n (df n-1) for an arm of >= MIN_OWN_JOBS jobs; for a
     thinner arm max(allowance^2, s^2)/n, treated as known (df inf), the allowance measured on real jobs;
   - var_common, which does not: the part of the print resolution's variance (step^2/12) that the jobs'
     spread has not shown (when every job prints the same value, the level is only known to +-step/2).
   So no arm ever has zero variance and no verdict rests on a spread its jobs could not show.
2. Ratio eager/graph (judge_arms): difference of the arm means, never pooled; Welch-Satterthwaite df, capped
   at the smaller arm's n-1 when both arms use their own spread (Hsu); a t-interval at 1 - alpha, and the
   verdict from the interval against the band [1 - margin, 1 + margin].
3. p-values of the margin hypotheses, scaled so that each verdict holds exactly when its p < alpha:
   p_beyond (H0: ratio inside the band; speedup/slowdown iff p_beyond < alpha), p_within (TOST; H0: outside;
   neutral iff p_within < alpha). benjamini_hochberg takes p_beyond: one family, one kind of p-value.
4. Sequential looks (the decision loop): given a `Look` (a look of a judge/sequential.py Design), the interval uses
   that look's critical value (a repeated confidence interval: wider at every look, so that all looks hold together)
   and the p-values are repeated p-values; repeats_for_power plans the jobs per arm a cell needs at the looks to come.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scipy import special as _sp  # stdtr / stdtrit: the t CDF and its inverse; df = inf gives the normal

from graphsweep.judge import sequential as seq
from graphsweep.vocab import INCONCLUSIVE, NEUTRAL, SLOWDOWN, SPEEDUP

MARGIN = 0.02
ALPHA = 0.05
# Per-job sd of log medians assumed for an arm too thin to show its own: the largest between-job sd of any real
# configuration in the pool (h200-builtin h256 attn: 8.35 / 5.30 / 9.50 ms, sd 0.307). None = inconclusive-only.
SPREAD_ALLOWANCE = 0.31
# Jobs an arm needs before its own spread counts. 2 jobs give a chi^2 with 1 df: on real launch-bound eager jobs
# two land in the same mode often enough that 2+2 A/A called 5.2 % different with the own spread (0 % here).
MIN_OWN_JOBS = 3
# Alpha spent at the first look and at the look after more-repeats (Bonferroni: valid for any second-look n,
# also one chosen from the first look's data).
TWO_LOOK_SPENDING = (0.025, 0.025)
POWER_CAP = 64  # repeats_for_power looks no further: beyond this a cell is not worth its GPU-hours
P_MIN = 1e-300  # a p-value is never reported as exactly 0
# Where an arm's spread comes from (comparison.parquet eager_spread / graph_spread).
OBSERVED = "observed"  # the jobs' own spread
RESOLUTION = "resolution"  # the jobs spread less than the print step allows: the print step's variance stands in
ALLOWANCE = "allowance"  # too few jobs to show a spread: SPREAD_ALLOWANCE, measured on real jobs
NO_SPREAD = "none"  # too few jobs and no allowance: the cell can only be inconclusive


@dataclass(frozen=True)
class Arm:
    """One arm of a cell on the log scale."""

    n: int  # usable jobs
    mean_log: float  # mean of log job medians (ms)
    var_obs: float  # sample variance of the log job medians (ddof 1); nan for one job
    var_res: float  # resolution variance of one job, (print step / median)^2 / 12, averaged over the jobs
    var_spread: float  # variance of the mean that shrinks with n (per-job variance / n)
    var_common: float  # variance of the mean that does not shrink with n (known)
    df: float  # degrees of freedom of var_spread; inf when it is the allowance (known)
    source: str  # OBSERVED | RESOLUTION | ALLOWANCE | NO_SPREAD

    @property
    def var_mean(self) -> float:
        return self.var_spread + self.var_common

    @property
    def own_spread(self) -> bool:
        return self.source in (OBSERVED, RESOLUTION)


@dataclass(frozen=True)
class Judgement:
    verdict: str  # SPEEDUP | SLOWDOWN | NEUTRAL | INCONCLUSIVE
    ratio: float  # eager / graph step time (> 1: graph faster), exp of the difference of the arm means
    lo: float  # interval at level 1 - alpha
    hi: float
    band_lo: float  # 1 - margin
    band_hi: float  # 1 + margin
    alpha: float  # alpha spent at this look, two-sided
    se_log: float
    df: float
    p_speedup: float  # one-sided, H0: ratio <= 1 + margin
    p_slowdown: float  # one-sided, H0: ratio >= 1 - margin
    p_beyond: float  # min(1, 2 min(p_speedup, p_slowdown)): speedup/slowdown iff < alpha; feed this to BH
    p_within: float  # min(1, 2 TOST p): neutral iff < alpha
    eager: Arm
    graph: Arm
    thin: bool  # an arm had < MIN_OWN_JOBS jobs: its spread is the allowance (or the cell is inconclusive-only)
    resolution_limited: bool  # inconclusive, and the non-shrinking resolution part alone would keep it so


@dataclass(frozen=True)
class Look:
    """A judgement at look k of a sequential design (judge/sequential.py): its interval is that look's repeated
    confidence interval and its p-values are repeated p-values."""

    design: seq.Design
    k: int

    def critical(self, df: float, alpha: float) -> float:
        return seq.critical_t(self.design, self.k, df, alpha)

    def p(self, stat: float, df: float) -> float:
        return seq.repeated_p(self.design, self.k, stat, df)


# ----------------------------------------------------------------------------------------------------------
# Resolution


def print_step(values: Sequence[float], max_decimals: int = 6) -> float:
    """Print step of a column of printed numbers: the largest 10^-d (d = 0..max_decimals) all are multiples of.

    Prefer the log's own text (10^-(decimals printed)); this is the fallback for parsed floats.
    """
    x = [float(v) for v in values if math.isfinite(v)]
    for d in range(max_decimals + 1):
        q = 10.0**-d
        if x and all(abs(v / q - round(v / q)) < 1e-6 for v in x):
            return q
    return 10.0**-max_decimals


def resolution_var(median_ms: float, step_ms: float) -> float:
    """Variance of log(printed median) from rounding to `step_ms`: uniform error of +-step/2 -> step^2/12.

    Rounding is monotone, so the median of printed times is the printed true median: iteration noise does not
    dither the rounding away. On the log scale (delta method): (step / median)^2 / 12.
    """
    return (step_ms / median_ms) ** 2 / 12.0


# ----------------------------------------------------------------------------------------------------------
# Arms


def summarize_arm(
    medians_ms: Sequence[float],
    step_ms: float | Sequence[float],
    allowance: float | None = SPREAD_ALLOWANCE,
    min_own_jobs: int = MIN_OWN_JOBS,
) -> Arm:
    """An arm's mean of log medians and the variance of that mean.

    - n >= min_own_jobs: var_spread = s^2/n with df n-1. The resolution variance r^2 that the spread has not
      shown, max(0, r^2 - s^2), is common to all jobs (var_common): when every job prints the same value the
      level is only known to +-step/2 however many jobs printed it; once the medians spread over several print
      steps their rounding errors are independent and already inside s^2 (Sheppard), and nothing is added.
    - fewer jobs: var_spread = max(allowance^2, s^2, r^2)/n, known (df inf); without an allowance the arm has
      no usable spread (NO_SPREAD) and the cell is inconclusive-only.
    """
    m = [float(x) for x in medians_ms]
    if not m or not all(math.isfinite(x) and x > 0 for x in m):
        raise ValueError(f"summarize_arm: medians must be positive finite numbers, got {m}")
    steps = [float(step_ms)] * len(m) if isinstance(step_ms, (int, float)) else [float(q) for q in step_ms]
    if len(steps) != len(m) or not all(q > 0 for q in steps):
        raise ValueError(f"summarize_arm: one print step > 0 per median (or one for all), got {step_ms}")
    n = len(m)
    logs = [math.log(x) for x in m]
    mean = sum(logs) / n
    r2 = sum(resolution_var(a, q) for a, q in zip(m, steps)) / n
    s2 = sum((x - mean) ** 2 for x in logs) / (n - 1) if n > 1 else math.nan
    if n >= max(2, min_own_jobs):
        return Arm(n, mean, s2, r2, s2 / n, max(0.0, r2 - s2), float(n - 1), OBSERVED if s2 >= r2 else RESOLUTION)
    if allowance is None:
        return Arm(n, mean, s2, r2, math.inf, 0.0, math.inf, NO_SPREAD)
    per_job = max(allowance**2, r2, s2 if n > 1 else 0.0)
    return Arm(n, mean, s2, r2, per_job / n, 0.0, math.inf, ALLOWANCE)


# The arm a paired design judges: the eager/graph log ratio of each pair job against a zero arm.
ZERO_ARM = Arm(0, 0.0, math.nan, 0.0, 0.0, 0.0, math.inf, OBSERVED)


def summarize_pairs(
    eager_ms: Sequence[float],
    graph_ms: Sequence[float],
    eager_step_ms: float | Sequence[float],
    graph_step_ms: float | Sequence[float],
    min_own_jobs: int = MIN_OWN_JOBS,
) -> Arm | None:
    """The per-pair log ratios of an ABBA design as one arm (judge it against ZERO_ARM), or None when there are
    fewer than `min_own_jobs` pairs: a thin paired design is judged unpaired, with the allowance.

    Each ratio carries both arms' rounding, r_e^2 + r_g^2; the part the ratios' spread has not shown is common.
    """
    if len(eager_ms) != len(graph_ms):
        raise ValueError(f"summarize_pairs: {len(eager_ms)} eager but {len(graph_ms)} graph medians; one of each per pair")
    n = len(eager_ms)
    if n < max(2, min_own_jobs):
        return None
    ea, ga = summarize_arm(eager_ms, eager_step_ms, None, 1), summarize_arm(graph_ms, graph_step_ms, None, 1)
    d = [math.log(e) - math.log(g) for e, g in zip(eager_ms, graph_ms)]
    mean = sum(d) / n
    s2 = sum((x - mean) ** 2 for x in d) / (n - 1)
    r2 = ea.var_res + ga.var_res
    return Arm(n, mean, s2, r2, s2 / n, max(0.0, r2 - s2), float(n - 1), OBSERVED if s2 >= r2 else RESOLUTION)


# ----------------------------------------------------------------------------------------------------------
# Distributions


def t_cdf(x: float, df: float) -> float:
    return float(_sp.stdtr(df, x))


def t_quantile(p: float, df: float) -> float:
    return float(_sp.stdtrit(df, p))


def welch_df(parts: Sequence[tuple[float, float]]) -> float:
    """Welch-Satterthwaite df of a sum of variance components (variance, df); a component with df inf is known."""
    total = sum(v for v, _ in parts)
    den = sum(v * v / d for v, d in parts if math.isfinite(d) and v > 0)
    return total * total / den if den > 0 else math.inf


def cell_df(e: Arm, g: Arm) -> float:
    """Welch-Satterthwaite over the four components; capped at the smaller n-1 when both arms use their own
    spread (Hsu): a small arm's variance estimate can be far too small, and W-S then ignores its df."""
    parts = [(e.var_spread, e.df), (g.var_spread, g.df), (e.var_common, math.inf), (g.var_common, math.inf)]
    df = welch_df(parts)
    return min(df, e.df, g.df) if e.own_spread and g.own_spread else df


# ----------------------------------------------------------------------------------------------------------
# Cell


def decide(lo: float, hi: float, up: float, dn: float) -> str:
    """Verdict of a log-ratio interval [lo, hi] against the log band [dn, up]."""
    if lo > up:
        return SPEEDUP
    if hi < dn:
        return SLOWDOWN
    if lo >= dn and hi <= up:
        return NEUTRAL
    return INCONCLUSIVE


def judge(
    eager_ms: Sequence[float],
    graph_ms: Sequence[float],
    *,
    eager_step_ms: float | Sequence[float] = 0.1,
    graph_step_ms: float | Sequence[float] = 0.1,
    margin: float = MARGIN,
    alpha: float = ALPHA,
    allowance: float | None = SPREAD_ALLOWANCE,
    min_own_jobs: int = MIN_OWN_JOBS,
    look: Look | None = None,
) -> Judgement:
    """Judge eager vs graph from per-job steady medians (ms) and each log's print step (ms).

    The interval's level is 1 - alpha at one look; at a `look` of a sequential design, all its looks together.
    """
    e = summarize_arm(eager_ms, eager_step_ms, allowance, min_own_jobs)
    g = summarize_arm(graph_ms, graph_step_ms, allowance, min_own_jobs)
    return judge_arms(e, g, margin=margin, alpha=alpha, look=look)


def judge_arms(e: Arm, g: Arm, *, margin: float = MARGIN, alpha: float = ALPHA, look: Look | None = None) -> Judgement:
    if not 0 < margin < 1 or not 0 < alpha < 1:
        raise ValueError(f"judge: margin {margin} and alpha {alpha} must be in (0, 1)")
    d = e.mean_log - g.mean_log
    up, dn = math.log1p(margin), math.log1p(-margin)
    thin = not (e.own_spread and g.own_spread)
    if e.source == NO_SPREAD or g.source == NO_SPREAD:  # inconclusive-only: an arm has no spread to rely on
        return Judgement(INCONCLUSIVE, math.exp(d), 0.0, math.inf, 1 - margin, 1 + margin, alpha, math.inf,
                         math.nan, 1.0, 1.0, 1.0, 1.0, e, g, thin, False)
    se = math.sqrt(e.var_mean + g.var_mean)  # > 0: the resolution floor is positive
    df = cell_df(e, g)
    tq = look.critical(df, alpha) if look else t_quantile(1 - alpha / 2, df)
    lo, hi = d - tq * se, d + tq * se
    p_up = max(P_MIN, t_cdf((up - d) / se, df))  # H0: log ratio <= up, rejected for large d
    p_dn = max(P_MIN, t_cdf((d - dn) / se, df))  # H0: log ratio >= dn, rejected for small d
    if look:  # repeated p-values: the alpha at which this look's interval just reaches the hypothesis
        p_beyond = max(P_MIN, min(look.p((d - up) / se, df), look.p((dn - d) / se, df)))
        p_within = max(P_MIN, look.p(min(d - dn, up - d) / se, df))
    else:
        p_beyond = min(1.0, 2 * min(p_up, p_dn))
        p_within = min(1.0, max(P_MIN, 2 * max(t_cdf((dn - d) / se, df), t_cdf((d - up) / se, df))))  # TOST
    verdict = decide(lo, hi, up, dn)
    limited = False
    if verdict == INCONCLUSIVE and e.var_common + g.var_common > 0:  # as if the jobs' spread went to 0
        z = (look.critical(math.inf, alpha) if look else t_quantile(1 - alpha / 2, math.inf))
        z *= math.sqrt(e.var_common + g.var_common)
        limited = decide(d - z, d + z, up, dn) == INCONCLUSIVE
    return Judgement(verdict, math.exp(d), math.exp(lo), math.exp(hi), 1 - margin, 1 + margin, alpha, se, df,
                     p_up, p_dn, p_beyond, p_within, e, g, thin, limited)


# ----------------------------------------------------------------------------------------------------------
# Two looks


def alpha_for_look(look: int, looks: int, alpha: float = ALPHA, spending: Sequence[float] | None = None) -> float:
    """Alpha spent at `look` (1-based) of a plan of `looks` looks.

    One look: all of alpha. Two looks: TWO_LOOK_SPENDING scaled to alpha (0.025 + 0.025 at alpha 0.05), else
    `spending` (shares, any scale), else equal shares. By the union bound P(any false verdict) <= alpha whatever
    n the second look has, also one chosen from the first look's data. A sweep that may use more-repeats must
    judge its first look at alpha_for_look(1, 2): a first look spent at full alpha leaves nothing for a second.
    """
    if not 1 <= look <= looks:
        raise ValueError(f"alpha_for_look: look {look} is not in 1..{looks}")
    if looks == 1:
        return alpha
    shares = list(spending) if spending is not None else list(TWO_LOOK_SPENDING) if looks == 2 else [1.0] * looks
    if len(shares) != looks or any(s <= 0 for s in shares):
        raise ValueError(f"alpha_for_look: spending {spending} must give {looks} positive shares")
    return alpha * shares[look - 1] / sum(shares)


def repeats_for_power(
    e: Arm,
    g: Arm,
    *,
    margin: float = MARGIN,
    alpha: float = ALPHA,
    power: float = 0.8,
    ratio: float | None = None,
    allowance: float = SPREAD_ALLOWANCE,
    min_own_jobs: int = MIN_OWN_JOBS,
    cap: int = POWER_CAP,
    design: seq.Design | None = None,
) -> int | None:
    """Jobs per graph arm (the eager arm growing with it in today's proportion) at which the cell reaches the verdict its
    assumed true `ratio` (default: the current estimate) implies, with probability >= `power`, at `alpha`; with a
    sequential `design`, at the critical value of the look that n jobs complete (only its looks are candidates).

    Per-job variance: the observed one for an arm of >= 2 jobs (its unseen resolution part stays non-shrinking),
    the allowance for an arm of one job; below MIN_OWN_JOBS the judge's allowance rule applies. Power by the normal
    approximation around the judge's own interval rule (same df rule, critical value at the planned df):
      beyond the band: Phi(dist / se(n) - t);  inside: Phi(d_up / se - t) + Phi(d_dn / se - t) - 1.
    None when no n <= cap (with a design: no look up to its horizon) gets there (the ratio sits on a band edge, the
    noise is too large for the looks there are, or the print resolution alone blocks it).
    """
    up, dn = math.log1p(margin), math.log1p(-margin)
    theta = math.log(ratio) if ratio is not None else e.mean_log - g.mean_log

    def planned(a: Arm, n: int) -> Arm:  # the arm at n jobs, its per-job spread as seen now
        v, common = (a.var_obs, max(0.0, a.var_res - a.var_obs)) if a.n >= 2 else (allowance**2, 0.0)
        if n >= min_own_jobs:
            return Arm(n, 0.0, v, a.var_res, v / n, common, n - 1.0, OBSERVED)
        return Arm(n, 0.0, v, a.var_res, max(allowance**2, v, a.var_res) / n, 0.0, math.inf, ALLOWANCE)

    start = max(g.n, 1)
    share = e.n / g.n if g.n else 1.0  # a baseline of eager and A/A control runs grows twice as fast as the arm
    candidates = [n for n in design.looks if n >= start] if design else range(start, cap + 1)
    for n in candidates:
        if n > cap:
            break
        pe, pg = planned(e, max(1, round(n * share))), planned(g, n)
        se = math.sqrt(pe.var_mean + pg.var_mean)
        df = cell_df(pe, pg)
        tq = seq.critical_t(design, design.look_of(n), df, alpha) if design else t_quantile(1 - alpha / 2, df)
        if theta > up or theta < dn:
            pw = t_cdf((theta - up if theta > up else dn - theta) / se - tq, math.inf)
        else:
            pw = t_cdf((up - theta) / se - tq, math.inf) + t_cdf((theta - dn) / se - tq, math.inf) - 1
        if pw >= power:
            return n
    return None


# ----------------------------------------------------------------------------------------------------------
# Across cells


def benjamini_hochberg(p_values: Sequence[float | None]) -> list[float | None]:
    """BH-adjusted p-values (q), same order; None (no timing verdict) stays None and does not count towards m.

    Feed p_beyond of every judged cell: one family (speedup/slowdown claims), one kind of p-value. A cell called
    speedup/slowdown whose q >= alpha is a discovery the sweep's multiplicity does not support ("fragile").
    """
    idx = [i for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    for i in idx:
        if not 0.0 <= float(p_values[i]) <= 1.0:  # type: ignore[arg-type]
            raise ValueError(f"benjamini_hochberg: p-value {p_values[i]} at position {i} is outside [0, 1]")
    out: list[float | None] = [None] * len(p_values)
    m, running = len(idx), 1.0
    for k, i in zip(range(len(idx), 0, -1), sorted(idx, key=lambda i: float(p_values[i]), reverse=True)):  # type: ignore[arg-type]
        running = min(running, float(p_values[i]) * m / k)  # type: ignore[arg-type]
        out[i] = running
    return out
