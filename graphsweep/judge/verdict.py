"""The verdict of one cell: a graph variant's runs against the eager baseline of its shape.

Design choices, each because of evidence in ../shared (design.md, anchors.md §3/§5, fixtures):
- Jobs are the replicates. Each run is reduced to the median of its steady window; the interval
  of a cell comes from the spread of those medians across repeated jobs. Iteration-to-iteration
  noise inside one job understates job-to-job noise (h200-probe: eager jobs of one shape at
  15 vs 18 ms while each run's iterations agree within a few %).
- Effects are ratios, so the arithmetic happens on log step times (t-interval on log ratios).
- Three-way decision with a practical margin: speedup/slowdown only when the whole interval is
  beyond 1 ± margin, neutral when it lies inside, inconclusive otherwise.
Method and measured error rates: docs/statistics.md (figures from benchmarks/validate_stats.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
from scipy import stats as _sps

from graphsweep.vocab import (
    BASELINE_FAILED, BLOCKED, EAGER, FAILED, GRAPH, INCONCLUSIVE, INVALID, NEUTRAL, OOM, RESULT_OUTCOMES, SLOWDOWN,
    SPEEDUP, TIMEOUT, TIMING_VERDICTS, USABLE_OUTCOMES,
)  # fmt: skip

BOOTSTRAP_RESAMPLES = 2000

CI_WITHIN_RUN = "within-run bootstrap (1 repeat: understates job-to-job noise)"


@dataclass
class ArmRun:
    run_id: str
    outcome: str  # completed | timeout (usable only if it has steady data) | blocked | oom | crashed | invalid | unparseable
    step_ms: Sequence[float]  # the steady-window iteration times of this run (ms)
    peak_mem_gb: float | None = None  # peak memory after capture
    reason: str = ""
    error_class: str | None = None

    def __post_init__(self) -> None:
        if self.outcome not in RESULT_OUTCOMES:
            raise ValueError(
                f"ArmRun {self.run_id!r}: outcome {self.outcome!r} is not one of {', '.join(RESULT_OUTCOMES)}"
            )
        if len(self.step_ms):
            x = np.asarray(self.step_ms, dtype=float)
            if not np.all(np.isfinite(x) & (x > 0)):
                raise ValueError(
                    f"ArmRun {self.run_id!r}: step_ms holds NaN, inf or non-positive times; pass only the parsed "
                    "elapsed times of the steady window (drop missing iteration lines)"
                )

    @property
    def usable(self) -> bool:
        """Timing counts: completed, or a timeout that still measured a steady window."""
        return self.outcome in USABLE_OUTCOMES and len(self.step_ms) > 0


@dataclass
class Verdict:
    verdict: str  # one of VERDICTS
    reason: str
    speedup: float | None = None  # eager/graph step-time ratio, >1 = graph faster
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None  # two-sided, H0: ratio == 1 (raw; adjust across cells with benjamini_hochberg)
    n_eager: int = 0  # usable runs
    n_graph: int = 0
    eager_step_ms: float | None = None  # median of per-run medians
    graph_step_ms: float | None = None
    ci_method: str = ""
    eager_peak_mem_gb: float | None = None  # median across runs of peak memory after capture
    graph_peak_mem_gb: float | None = None
    mem_delta_gb: float | None = None  # graph - eager
    # both-completed | mixed | graph-only-oom | graph-sometimes-oom | both-oom | graph-fixes-failure |
    # graph-introduces-failure | graph-blocked | graph-invalid | both-failed
    paired_outcome: str = ""


def _median(x: Sequence[float] | np.ndarray) -> float:
    """Median of one run's iteration times (sort-based: np.median costs ~10x more on short arrays)."""
    a = np.sort(np.asarray(x, dtype=float))
    k = a.size // 2
    return float(a[k]) if a.size % 2 else float(0.5 * (a[k - 1] + a[k]))


def _median_or_none(values: Sequence[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    return float(np.median(vals)) if vals else None


def _describe(runs: Sequence[ArmRun]) -> str:
    """'2 oom, 1 crashed (NCCL)' style summary of unusable runs."""
    counts: dict[str, int] = {}
    for r in runs:
        key = r.outcome if r.outcome != TIMEOUT else "timeout before the steady window"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def _first_reason(runs: Sequence[ArmRun], outcome: str) -> str:
    for r in runs:
        if r.outcome == outcome:
            detail = r.reason or r.error_class or ""
            return f"{r.run_id}: {detail}" if detail else r.run_id
    return ""


def _decide(lo: float, hi: float, margin: float) -> str:
    if lo > 1 + margin:
        return SPEEDUP
    if hi < 1 - margin:
        return SLOWDOWN
    if lo >= 1 - margin and hi <= 1 + margin:
        return NEUTRAL
    return INCONCLUSIVE


class BetweenRuns(NamedTuple):
    """The between-jobs estimate of a cell, and the spread repeats.py plans more repeats from."""

    estimate: float  # eager / graph step time
    lo: float
    hi: float
    p: float
    method: str
    plan_sd: float  # per-arm sd of log step time (paired: the per-arm equivalent)
    n_plan: int  # repeats per arm behind plan_sd


def between_runs(
    eager_med: np.ndarray, graph_med: np.ndarray, pairs: np.ndarray | None, confidence: float
) -> BetweenRuns:
    """Speedup and interval from the per-run medians: jobs are the replicates (Welch, or paired t on log ratios)."""
    alpha = 1 - confidence
    if pairs is not None:  # paired by repeat index: log ratio per pair
        d = np.log(pairs[:, 0]) - np.log(pairs[:, 1])
        n = d.size
        mean, sd = float(d.mean()), float(d.std(ddof=1))
        se, df = sd / math.sqrt(n), n - 1
        method = f"between-runs t on log-ratios (n={n} pairs)"
        plan_sd = sd * math.sqrt(0.5)  # per-arm equivalent, so repeats_needed is comparable
    else:
        le, lg = np.log(eager_med), np.log(graph_med)
        ne, ng = le.size, lg.size
        mean = float(le.mean() - lg.mean())
        ve = float(le.var(ddof=1)) if ne > 1 else math.nan
        vg = float(lg.var(ddof=1)) if ng > 1 else math.nan
        if ne > 1 and ng > 1:  # Welch: the eager arm of launch-bound shapes is much noisier
            se = math.sqrt(ve / ne + vg / ng)
            num, den = (ve / ne + vg / ng) ** 2, 0.0
            if ne > 1 and ve > 0:
                den += (ve / ne) ** 2 / (ne - 1)
            if ng > 1 and vg > 0:
                den += (vg / ng) ** 2 / (ng - 1)
            df = num / den if den > 0 else float(ne + ng - 2)
            method = f"between-runs t on log-ratios (n={ne}+{ng}, Welch)"
        else:  # one arm has a single run: its variance is borrowed from the other arm (pooled)
            v = ve if ne > 1 else vg
            se = math.sqrt(v * (1 / ne + 1 / ng))
            df = float(ne + ng - 2)
            method = f"between-runs t on log-ratios (n={ne}+{ng}, variance from the {EAGER if ne > 1 else GRAPH} arm only)"
        plan_sd = math.sqrt(np.nanmean([ve, vg]))
    if se == 0.0:  # every run of both arms printed the same median (print resolution): no spread seen
        lo = hi = mean
        p = 1.0 if mean == 0 else 0.0
    else:
        tq = float(_sps.t.ppf(1 - alpha / 2, df))
        lo, hi = mean - tq * se, mean + tq * se
        p = float(2 * _sps.t.sf(abs(mean) / se, df))
    n_plan = pairs.shape[0] if pairs is not None else max(eager_med.size, graph_med.size)
    return BetweenRuns(math.exp(mean), math.exp(lo), math.exp(hi), p, method, plan_sd, n_plan)


def _within_run(e: np.ndarray, g: np.ndarray, confidence: float, seed: int = 0) -> tuple[float, float, float, float]:
    """Bootstrap of the iteration times of one run per arm: ratio of medians, percentile interval."""
    rng = np.random.default_rng(seed)  # fixed seed: the same logs give the same verdict
    alpha = 1 - confidence
    ratios = np.empty(BOOTSTRAP_RESAMPLES)
    chunk = max(1, min(BOOTSTRAP_RESAMPLES, 4_000_000 // max(e.size, g.size, 1)))
    for s in range(0, BOOTSTRAP_RESAMPLES, chunk):
        b = min(chunk, BOOTSTRAP_RESAMPLES - s)
        me = np.median(e[rng.integers(0, e.size, (b, e.size))], axis=1)
        mg = np.median(g[rng.integers(0, g.size, (b, g.size))], axis=1)
        ratios[s : s + b] = me / mg
    lo, hi = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    if e.size > 1 and g.size > 1 and not (np.all(e == e[0]) and np.all(g == e[0])):
        p = float(_sps.mannwhitneyu(e, g, alternative="two-sided").pvalue)
    else:
        p = 1.0 if np.median(e) == np.median(g) else 0.0
    return float(np.median(e) / np.median(g)), float(lo), float(hi), p


def repeats_needed(sd_log: float, estimate: float, margin: float, confidence: float = 0.95) -> int | None:
    """Repeats per arm for an unpaired interval of this spread to clear the nearest margin edge.

    A planning figure (normal approximation with t-quantile refinement), not a guarantee: with
    `estimate` as the true ratio, the interval half-width must shrink below the distance from
    log(estimate) to the nearest of log(1 - margin), log(1 + margin). None when the estimate sits
    on an edge (no finite number of repeats decides it).
    """
    le = math.log(estimate)
    edges = (math.log(1 - margin), math.log(1 + margin))
    dist = min(abs(le - edges[0]), abs(le - edges[1]))
    if dist < 1e-9 or not math.isfinite(sd_log):
        return None
    if sd_log == 0:
        return 2
    z = float(_sps.norm.ppf(1 - (1 - confidence) / 2))
    n = max(2, math.ceil(2 * (z * sd_log / dist) ** 2))  # normal answer; t quantiles only push it up
    while n < 1_000_000:
        tq = float(_sps.t.ppf(1 - (1 - confidence) / 2, 2 * n - 2))
        if tq * sd_log * math.sqrt(2 / n) < dist:
            return n
        n += 1
    return None


def judge_cell(
    eager: Sequence[ArmRun],
    graph: Sequence[ArmRun],
    *,
    margin: float = 0.02,
    confidence: float = 0.95,
    paired: bool = False,
) -> Verdict:
    """Verdict of one cell (one graph variant against its shape's eager baseline).

    Outcome precedence, before any timing: eager has no usable run -> baseline-failed; graph
    blocked -> blocked; graph invalid -> invalid; graph OOM -> oom; graph without any usable run
    (crashed, timeout before the window, unparseable) -> failed. Then timing: the interval of
    eager/graph from the per-run medians (between runs), or, with one usable run per arm, a
    bootstrap of the iteration times that the reason flags as understating job-to-job noise.
    """
    if not 0 < margin < 1:
        raise ValueError(f"judge_cell: margin={margin} must be a fraction in (0, 1), e.g. 0.02 for 2 %")
    if not 0 < confidence < 1:
        raise ValueError(f"judge_cell: confidence={confidence} must be in (0, 1), e.g. 0.95")
    if not eager and not graph:
        raise ValueError("judge_cell: no runs for either arm; plan and run the cell first")

    e_ok = [r for r in eager if r.usable]
    g_ok = [r for r in graph if r.usable]
    e_bad = [r for r in eager if not r.usable]
    g_bad = [r for r in graph if not r.usable]

    v = Verdict(verdict="", reason="", n_eager=len(e_ok), n_graph=len(g_ok))
    # Memory: peak after capture; OOM runs carry no meaningful peak, so only runs that got there count.
    v.eager_peak_mem_gb = _median_or_none([r.peak_mem_gb for r in eager if r.outcome not in (OOM, BLOCKED)])
    v.graph_peak_mem_gb = _median_or_none([r.peak_mem_gb for r in graph if r.outcome not in (OOM, BLOCKED)])
    if v.eager_peak_mem_gb is not None and v.graph_peak_mem_gb is not None:
        v.mem_delta_gb = v.graph_peak_mem_gb - v.eager_peak_mem_gb
    # Jobs are the replicates: each usable run is reduced to the median of its steady window.
    run_med = {id(r): _median(r.step_ms) for r in (*e_ok, *g_ok)}
    e_med = np.array([run_med[id(r)] for r in e_ok])
    g_med = np.array([run_med[id(r)] for r in g_ok])
    if e_ok:
        v.eager_step_ms = float(np.median(e_med))
    if g_ok:
        v.graph_step_ms = float(np.median(g_med))

    g_out = {r.outcome for r in graph}
    e_out = {r.outcome for r in eager}
    of = lambda runs, total: f"{len(runs)} of {len(total)}"  # noqa: E731

    # 1. No baseline, no verdict.
    if not e_ok:
        v.verdict = BASELINE_FAILED
        what = _describe(e_bad) if e_bad else "no eager runs"
        first = next((r for r in e_bad if r.reason or r.error_class), None)
        detail = f" ({first.run_id}: {first.reason or first.error_class})" if first else ""
        if e_out == {OOM} and OOM in g_out and not g_ok:
            v.paired_outcome = "both-oom"
            v.reason = f"eager arm has no usable run ({what}){detail}; graph arm OOM too: the shape does not fit"
        elif g_ok:
            v.paired_outcome = "graph-fixes-failure"
            v.reason = (
                f"eager arm has no usable run ({what}){detail}, but {of(g_ok, graph)} graph runs completed "
                f"(median {v.graph_step_ms:.2f} ms): the graph fixes a baseline failure; no speedup can be computed"
            )
        else:
            v.paired_outcome = "both-failed"
            v.reason = f"eager arm has no usable run ({what}){detail}; graph arm: {_describe(g_bad) or 'no runs'}"
        return v

    # 2. Deterministic graph-arm outcomes dominate, even if some repeats completed.
    timing_hint = ""
    if g_ok:
        timing_hint = f"; the {len(g_ok)} completed graph run(s) had median {v.graph_step_ms:.2f} ms vs eager {v.eager_step_ms:.2f} ms"
    if BLOCKED in g_out:
        v.verdict, v.paired_outcome = BLOCKED, "graph-blocked"
        v.reason = f"graph arm blocked: {_first_reason(graph, BLOCKED) or 'no reason recorded'}"
        return v
    if INVALID in g_out:
        bad = [r for r in graph if r.outcome == INVALID]
        v.verdict, v.paired_outcome = INVALID, "graph-invalid"
        v.reason = (
            f"{of(bad, graph)} graph runs completed without evidence that a graph was captured and replayed "
            f"({_first_reason(graph, INVALID)}){timing_hint}"
        )
        return v
    if OOM in g_out:
        bad = [r for r in graph if r.outcome == OOM]
        v.verdict = OOM
        v.paired_outcome = "graph-only-oom" if not g_ok else "graph-sometimes-oom"
        head = "graph-only OOM" if not g_ok else f"graph OOM in {of(bad, graph)} repeats (near the memory limit)"
        mem = f"; eager fit at {v.eager_peak_mem_gb:.2f} GB peak" if v.eager_peak_mem_gb is not None else "; eager fit"
        v.reason = f"{head}: {_first_reason(graph, OOM)}{mem}{timing_hint}"
        return v
    if not g_ok:
        v.verdict = FAILED
        # eager also lost runs the same way: flaky infrastructure rather than the graph
        v.paired_outcome = "mixed" if e_bad and {r.outcome for r in e_bad} >= g_out else "graph-introduces-failure"
        first = next((r for r in g_bad), None)
        detail = f" ({first.run_id}: {first.reason or first.error_class or first.outcome})" if first else ""
        v.reason = f"graph arm has no usable run ({_describe(g_bad) or 'no graph runs'}){detail} while eager completed"
        return v

    # 3. Timing. Non-deterministic failures (crash, timeout before the window, unparseable) are excluded, said aloud.
    notes: list[str] = []
    if g_bad:
        notes.append(f"excluded {of(g_bad, graph)} graph runs ({_describe(g_bad)}: {g_bad[0].run_id} {g_bad[0].reason or g_bad[0].error_class or ''})".rstrip())
    if e_bad:
        notes.append(f"excluded {of(e_bad, eager)} eager runs ({_describe(e_bad)})")
    v.paired_outcome = "both-completed" if not (g_bad or e_bad) else "mixed"

    pairs = None
    if paired:  # by repeat index; a pair with an unusable side is dropped
        ok_pairs = [(run_med[id(a)], run_med[id(b)]) for a, b in zip(eager, graph) if a.usable and b.usable]
        if len(ok_pairs) >= 2:
            pairs = np.array(ok_pairs)
        else:
            notes.append(f"pairing asked but only {len(ok_pairs)} complete pair(s): compared unpaired")

    plan_sd, n_plan = math.nan, 1
    if pairs is not None or (e_med.size + g_med.size >= 3):
        est, lo, hi, p, method, plan_sd, n_plan = between_runs(e_med, g_med, pairs, confidence)
        single = ""
    else:
        e, g = np.asarray(e_ok[0].step_ms, float), np.asarray(g_ok[0].step_ms, float)
        est, lo, hi, p = _within_run(e, g, confidence)
        method = CI_WITHIN_RUN
        single = "; 1 repeat per arm: the interval is within-run only and understates job-to-job noise"
    v.speedup, v.ci_low, v.ci_high, v.p_value, v.ci_method = est, lo, hi, p, method
    v.verdict = _decide(lo, hi, margin)

    pct = f"{int(round(confidence * 100))}% CI"
    band = f"1 ± {margin:g}"
    iv = f"{est:.3f}x [{lo:.3f}, {hi:.3f}] ({pct}; eager {v.eager_step_ms:.2f} ms vs graph {v.graph_step_ms:.2f} ms)"
    if v.verdict == SPEEDUP:
        reason = f"graph faster: {iv} excludes {band}"
    elif v.verdict == SLOWDOWN:
        reason = f"graph slower: {iv} excludes {band}"
    elif v.verdict == NEUTRAL:
        reason = f"no practical difference: {iv} lies inside {band}"
    else:
        need = repeats_needed(plan_sd, est, margin, confidence) if math.isfinite(plan_sd) else None
        if method == CI_WITHIN_RUN:
            more = " (run at least 3 repeats per arm)"
        elif need is not None:
            more = f" (about {max(need, n_plan + 1)} repeats per arm at this spread)"
        else:
            more = " (the estimate sits on the margin: only many more repeats would)"
        reason = f"{iv} straddles {band}: more repeats would decide{more}"
    if v.mem_delta_gb is not None and v.eager_peak_mem_gb:
        rel = v.mem_delta_gb / v.eager_peak_mem_gb
        if v.verdict == SPEEDUP and v.mem_delta_gb > 0:
            reason += f"; the speedup costs {v.mem_delta_gb:+.2f} GB peak memory ({rel:+.0%}: {v.eager_peak_mem_gb:.2f} -> {v.graph_peak_mem_gb:.2f} GB)"
        elif abs(v.mem_delta_gb) >= 0.01:
            reason += f"; peak memory {v.mem_delta_gb:+.2f} GB ({rel:+.0%})"
    v.reason = reason + single + "".join(f"; {n}" for n in notes)
    return v


def benjamini_hochberg(p_values: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (q-values), same order; None (no test) stays None.

    Only cells with a p-value count towards m, so blocked/OOM cells do not dilute the correction.
    """
    idx = [i for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    for i in idx:
        if not 0.0 <= float(p_values[i]) <= 1.0:  # type: ignore[arg-type]
            raise ValueError(f"benjamini_hochberg: p-value {p_values[i]} at position {i} is outside [0, 1]")
    out: list[float | None] = [None] * len(p_values)
    m = len(idx)
    if m == 0:
        return out
    order = sorted(idx, key=lambda i: float(p_values[i]))  # type: ignore[arg-type]
    running = 1.0
    for rank in range(m, 0, -1):  # step-up: q_(k) = min_{j>=k} m p_(j) / j
        i = order[rank - 1]
        running = min(running, float(p_values[i]) * m / rank)  # type: ignore[arg-type]
        out[i] = running
    return out


def aa_false_positive_rate(verdicts: Sequence[str]) -> tuple[int, int, float]:
    """(false positives, judged cells, rate) over eager-vs-eager control cells.

    Any speedup or slowdown of an A/A cell is a false positive; cells without a timing verdict
    (blocked, failed, ...) are not counted. The rate is NaN when no control cell was judged.
    """
    judged = [v for v in verdicts if v in TIMING_VERDICTS]
    fp = sum(v in (SPEEDUP, SLOWDOWN) for v in judged)
    return fp, len(judged), (fp / len(judged) if judged else math.nan)
