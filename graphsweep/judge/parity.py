"""Loss parity: does a graph run train the same model as the eager runs of its seed? Judged per iteration, against
a band the reference runs' own spread draws.

Pure functions, numbers in, dataclasses out. Runs of one seed see the same data in the same order, so their
`lm loss` agree iteration by iteration up to the model's own run-to-run non-determinism. On the real H200 runs
(benchmarks/validate_parity.py, docs/statistics.md "Loss parity") that non-determinism has two shapes: a level of
1e-4..3e-3 relative with single-iteration spikes where a batch's loss is small (the tiny dense model's two
trajectories, the dropless MoE), and, on a chaotic shape (the 1.2B model at seq 4096 on mock data), runs that agree
to 1e-3 in their first iterations after capture and end 30 % apart. A broken graph is persistent: a NaN, a factor,
a bias, a walk.

1. **The references** (the eager-like runs of the seed: the eager arm and, in a sweep, its A/A control runs) are
   checked against each other first: with three or more, a run that leaves the band of the others is set aside
   (a minority only; named in the reason), so one diverging control never widens anything; the A/A control runs
   join the eager runs only where those vouch for them (each judged against the eager runs' band, made CHECK_FACTOR
   times wider), so controls that diverge together never join. Three or more references, or two that agree within
   the floor, are *confirmed*; one reference, or two that do not agree, cannot calibrate a band.
2. **The band** at iteration i, relative to the references' mean there:

       range(i)  = [min, max] of the references at i
       sigma(i)  = the references' pooled relative standard deviation over the BAND_POOL iterations around i
       width(i)  = max(LOSS_FLOOR, BAND_FACTOR x sigma(i))
       admitted  = range(i) widened by width(i) on both sides

   so the band is as narrow as the references are in their first iterations and widens as they part.
3. **A run departs** from iteration t when it lies outside the band there and in most of the WINDOW compared
   iterations from t (the median of its excess / width over them exceeds 1; near the end the window shrinks to
   MIN_WINDOW, and a run compared on fewer iterations is judged on all of them), or when it sits on one side of
   the references' range in at least BIAS_SHARE of its iterations from its first replay on by a median of BIAS_FLOOR
   or more (a bias, which the floor would hide where the references are identical; before its capture a graph run
   runs eager code). A NaN/Inf where the references are finite is `nonfinite` at once.
4. **Without a confirmed band** a run is judged against each reference alone with the floor as its width: one it
   follows makes it `ok`; a departure that starts FAR_FACTOR times beyond the pair's agreement before it (and the
   references' own), after iterations where they agreed, is `diverged` all the same; otherwise it is
   `uncalibrated`: the data cannot tell the model's own spread from a fault (a speedup reads `unverified`).
5. **The arm** (summarize): any `nonfinite` run makes the cell invalid; one departing run among at least three
   checked, within DRIFT_LEVEL widths, is `run-drift` (the verdict stands, nothing is recommended); more is
   `diverged` (invalid).

Logs that print the loss every N iterations (Megatron's log_interval) are compared on the iterations both printed;
a line printed every N iterations holds the mean over those N (Bridge 0.6.2 train_utils.py L1103 / L1207, MCore
0.19.2 training.py L2816 / L2878: `total_loss_dict[key] / advanced iterations`, reset at each print), so a run
printed more often is averaged onto the other's iterations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

# Calibrated on the real runs (benchmarks/validate_parity.py prints the figures; docs/statistics.md quotes them):
LOSS_FLOOR = 5e-3  # the band's least half-width: above every correct real graph run's level where eager is identical
BAND_FACTOR = 4.0  # the band's half-width beyond the references' range, in their pooled relative sd
BAND_POOL = 5  # the references' spread at an iteration is pooled over this many compared iterations around it
WINDOW = 5  # a departure must hold in most of this many compared iterations (one iteration never decides)
MIN_WINDOW = 3  # near the end of a run the window shrinks to this many (a ramp over the last iterations counts)
BIAS_SHARE = 0.9  # a bias: on one side of the references' range in at least this share of compared iterations ...
BIAS_FLOOR = 2e-3  # ... by a median of at least this (4x the largest same-sided correct real run, 5e-4)
DRIFT_LEVEL = 2.0  # a drifting run departs by at most this many widths; beyond it the cell is invalid
DRIFT_MAX_RUNS = 1  # at most one graph run may drift, and only when at least DRIFT_MIN_CHECKED runs were checked
DRIFT_MIN_CHECKED = 3
MIN_DOF = 8  # a band wider than the floor needs this many degrees of freedom (3 references over 4 iterations)
CHECK_FACTOR = 2.0  # a reference is set aside when it leaves the others' band made this many times wider
MAX_POINTS = 2000  # longer runs are judged on this many evenly spaced compared iterations (10^4 iterations: fast)
# A departure far beyond agreement is a fault with any number of references: one whose level where it starts is
# FAR_FACTOR times the larger of the pair's own agreement before it (every compared iteration before it, the
# pre-capture ones among them: eager code in both runs) and the references' own agreement, and at least
# FAR_FACTOR x AGREE_FLOOR (2 %). The chaotic shape's correct runs part gradually (1e-3 after capture, tens of percent
# 5-8 iterations later): where a correct real run first leaves the floor around one reference it is at most 52 times
# its agreement before (benchmarks/validate_parity.py section 2 prints it), a quarter of FAR_FACTOR
FAR_FACTOR = 200.0
AGREE_FLOOR = 1e-4  # the level same-seed correct runs keep before capture on the real H200 runs (1e-5..1.5e-3)
_TINY = 1e-12

# Parity of a run and of a cell (comparison.parquet loss_parity)
PARITY_OK = "ok"
DIVERGED = "diverged"  # a persistent departure beyond the bound: the cell is invalid
NONFINITE = "nonfinite"  # NaN/Inf where eager is finite: the cell is invalid
UNCHECKED = "unchecked"  # no eager run of the seed with a loss to compare with (no lm loss, or the seed unknown)
UNCALIBRATED = "uncalibrated"  # it departs, but too few references agree to tell their spread from a fault
RUN_DRIFT = "run-drift"  # one run of >= 3 departed by at most DRIFT_LEVEL widths: reported, not recommended
STATES = (PARITY_OK, RUN_DRIFT, UNCALIBRATED, UNCHECKED, DIVERGED, NONFINITE)
NOT_A_RESULT = (UNCHECKED, UNCALIBRATED)  # a speedup with this parity is `unverified`

LossSeries = Mapping[int, float]  # iteration -> lm loss as printed (NaN/inf allowed: a broken value)


@dataclass(frozen=True)
class Printed:
    """One run's loss as its log printed it: the values and how many iterations each printed value averages."""

    loss: LossSeries
    span: int = 1  # Megatron's log_interval when the log prints a line every N iterations; 1: every iteration
    first_replay: int | None = None  # a graph run: the first iteration its graphs ran (its capture); None: unknown


@dataclass(frozen=True)
class Band:
    """The references on a common set of iterations, and the band they draw there (all relative to their mean)."""

    iterations: np.ndarray  # compared iterations (the printed grid of the coarsest run)
    span: int  # how many iterations each value averages
    centre: np.ndarray  # the references' mean
    lo: np.ndarray  # their range, relative to the centre
    hi: np.ndarray
    width: np.ndarray  # the admitted distance beyond the range, relative
    sigma: np.ndarray  # the references' pooled relative sd
    n_refs: np.ndarray  # references with a value at each iteration

    def trusted(self, idx: np.ndarray, floor: float) -> bool:
        """Its width can be relied on over these iterations: the floor alone, or a spread measured with at least
        MIN_DOF degrees of freedom (each reference beyond the first, at each iteration)."""
        if not idx.size or not (self.width[idx] > floor * (1 + 1e-9)).any():
            return True
        return int(np.sum(np.maximum(self.n_refs[idx] - 1, 0))) >= MIN_DOF


@dataclass(frozen=True)
class References:
    """The eager-like runs of one seed, checked against each other."""

    used: tuple[str, ...]
    excluded: tuple[str, ...]  # set aside: each left the band of the others (a minority)
    confirmed: bool  # three or more that confirm each other, or two that agree within the floor
    loss: Mapping[str, Printed]  # the used references


@dataclass(frozen=True)
class RunParity:
    """One graph run against the references of its seed."""

    run_id: str
    state: str  # PARITY_OK | DIVERGED (departs) | NONFINITE | UNCALIBRATED | UNCHECKED
    iteration: int | None  # where it departs / first non-finite; when ok, where it came closest
    graph_loss: float | None
    eager_loss: float | None  # the references' mean there
    rel_diff: float | None  # its relative distance from the references' range there
    level: float  # its persistent excess beyond the range (window median), relative
    tolerance: float  # the band's width at `iteration`
    eager_run: str | None  # the reference it followed (unconfirmed band), else None
    compared: int  # iterations compared
    excess_ratio: float = 0.0  # its largest persistent excess / width (> 1: departs)
    bias: bool = False  # departs by a same-sided offset (the bias rule)
    band_min: float | None = None  # the band's width over its compared iterations
    band_max: float | None = None
    span: int = 1  # iterations each compared value averages
    confirmed: bool = True  # judged against a confirmed band (else: each reference alone, the floor as width)
    band: tuple[tuple[int, int, float], ...] = ()  # the band it was judged against: (first, last iteration, width)
    agreement: float | None = None  # departed: its largest distance from the references before (far_beyond)

    @property
    def excess(self) -> float:
        """Persistent excess / width (> 1: departs); inf for a non-finite loss."""
        return math.inf if self.state == NONFINITE else self.excess_ratio


@dataclass(frozen=True)
class ArmParity:
    """The graph arm of a cell: every run's parity and the state they add up to."""

    state: str  # one of STATES
    runs: tuple[RunParity, ...]
    worst: RunParity | None  # the run that decided the state (or the closest call when ok)
    departed: int  # runs that departed (diverged, drifted or uncalibrated)
    checked: int  # runs compared with at least one reference of their seed
    spread: float  # the references' largest pooled relative sd (0: one run, or bit-identical runs)
    tolerance: float  # the band's width where the deciding run was judged
    references: int = 0  # references used (over the arm's seeds)
    excluded: tuple[str, ...] = ()  # references set aside
    confirmed: bool = True  # every checked run was judged against a confirmed band
    band: tuple[tuple[int, int, float], ...] = ()  # the deciding run's band: (first, last iteration, width)
    compared: int = 0  # iterations the deciding run was compared on
    span: int = 1  # the coarsest print interval compared


# ------------------------------------------------------------------------------------------------------------------
# Print intervals


def on_grid(run: Printed, span: int, points: Sequence[int]) -> dict[int, float]:
    """The run's loss at each point of a grid whose values average `span` iterations: its own value when it was
    printed at that interval, the mean of its values over (p - span, p] when it was printed more often (a multiple
    of its interval), nothing where it has no value for the whole window."""
    loss = run.loss
    if run.span == span:
        return {p: float(loss[p]) for p in points if p in loss}
    if span % run.span:
        return {}
    out = {}
    for p in points:
        start = max(0, p - span)  # MCore's first window holds every iteration from 1 (no reset at the first print)
        qs = range(p, start, -run.span)
        vals = [loss.get(q) for q in qs]
        if vals and all(v is not None for v in vals):
            # the last window of a log may be short (its first print at iteration 1): weight by iterations covered
            weights = [min(run.span, q - start) for q in qs]
            out[p] = float(np.average(np.asarray(vals, dtype=float), weights=weights))
    return out


def grid(runs: Sequence[Printed]) -> tuple[int, list[int]]:
    """(span, iterations) all runs can be compared on: the coarsest run's printed iterations."""
    span = max((r.span for r in runs), default=1)
    coarse = [r for r in runs if r.span == span]
    points = sorted(set().union(*(set(r.loss) for r in coarse))) if coarse else []
    return span, points


# ------------------------------------------------------------------------------------------------------------------
# The band


def _pooled_sigma(dev: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Per iteration: the pooled relative sd of the references over the BAND_POOL iterations around it.
    dev: (refs, iterations) deviations from the mean (NaN where a reference has no value); n: refs per iteration."""
    ss = np.nansum(dev ** 2, axis=0)
    dof = np.maximum(n - 1, 0).astype(float)
    half = BAND_POOL // 2
    k = np.ones(2 * half + 1)
    num = np.convolve(ss, k, mode="same")
    den = np.convolve(dof, k, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.sqrt(np.where(den > 0, num / np.maximum(den, _TINY), 0.0))
    return out


def band(refs: Sequence[Printed], span: int, points: Sequence[int], *, floor: float = LOSS_FLOOR,
         factor: float = BAND_FACTOR) -> Band:
    """The band the references draw on a grid (iterations where none has a finite value are dropped)."""
    vals = [on_grid(r, span, points) for r in refs]
    pts = np.asarray([p for p in points if any(p in v and math.isfinite(v[p]) for v in vals)], dtype=int)
    m = np.full((len(vals), pts.size), np.nan)
    for j, v in enumerate(vals):
        for k, p in enumerate(pts):
            x = v.get(int(p))
            if x is not None and math.isfinite(x):
                m[j, k] = x
    n = np.sum(np.isfinite(m), axis=0)
    with np.errstate(invalid="ignore", all="ignore"):
        centre = np.nanmean(m, axis=0) if len(vals) else np.zeros(0)
        scale = np.maximum(np.abs(centre), _TINY)
        rel = (m - centre) / scale
        lo, hi = np.nanmin(rel, axis=0), np.nanmax(rel, axis=0)
    sigma = _pooled_sigma(rel, n) if pts.size else np.zeros(0)
    width = np.maximum(floor, factor * sigma)
    return Band(pts, span, centre, lo, hi, width, sigma, n)


@dataclass(frozen=True)
class _Judged:
    state: str
    k: int | None  # index into the band's iterations
    excess: np.ndarray  # signed excess beyond the range, relative
    ratio: float  # largest persistent excess / width
    level: float
    bias: bool
    idx: np.ndarray  # the band indices compared
    onset: float = 0.0  # the departure's level where it starts (window median of |excess| there), relative
    before: float = 0.0  # the largest |excess| over the compared iterations before it: the agreement before


def _thin(n: int) -> np.ndarray:
    """Indices of the compared iterations judged: all of them, or MAX_POINTS evenly spaced."""
    return np.arange(n) if n <= MAX_POINTS else np.unique(np.linspace(0, n - 1, MAX_POINTS).round().astype(int))


def _judge(values: Mapping[int, float], b: Band, first_replay: int | None = None) -> _Judged:
    """One series against a band: nonfinite, departs (DIVERGED) or ok. `first_replay`: the bias rule looks at the
    iterations from there on only (before it the graph run ran eager code: nothing there can show a bias)."""
    idx = np.asarray([k for k, p in enumerate(b.iterations) if int(p) in values], dtype=int)
    if not idx.size:
        return _Judged(UNCHECKED, None, np.zeros(0), 0.0, 0.0, False, idx)
    g = np.asarray([values[int(b.iterations[k])] for k in idx], dtype=float)
    bad = ~np.isfinite(g)
    if bad.any():
        return _Judged(NONFINITE, int(idx[np.flatnonzero(bad)[0]]), np.zeros(0), math.inf, math.inf, False, idx)
    idx, g = idx[_thin(idx.size)], g[_thin(idx.size)]
    rel = (g - b.centre[idx]) / np.maximum(np.abs(b.centre[idx]), _TINY)
    excess = np.where(rel > b.hi[idx], rel - b.hi[idx], np.where(rel < b.lo[idx], rel - b.lo[idx], 0.0))
    z = np.abs(excess) / b.width[idx]
    n = z.size
    w = min(WINDOW, n)
    lengths = [w] + [L for L in range(w - 1, MIN_WINDOW - 1, -1)]
    level_z = np.full(n, -np.inf)  # window median of z from each start
    level_d = np.zeros(n)
    if n >= w:
        win = np.lib.stride_tricks.sliding_window_view(z, w)
        level_z[: n - w + 1] = np.median(win, axis=1)
        level_d[: n - w + 1] = np.median(np.lib.stride_tricks.sliding_window_view(np.abs(excess), w), axis=1)
    for L in lengths[1:]:  # the shorter windows at the end
        k = n - L
        if k >= 0 and level_z[k] == -np.inf:
            level_z[k], level_d[k] = float(np.median(z[k:])), float(np.median(np.abs(excess[k:])))
    if n < MIN_WINDOW:  # too few iterations for a window: judged on all of them
        level_z[:] = float(np.median(z))
        level_d[:] = float(np.median(np.abs(excess)))
    start = next((k for k in range(n) if z[k] > 1 and level_z[k] > 1), None)
    ratio = float(np.max(level_z)) if np.isfinite(level_z).any() else 0.0
    level = float(np.max(level_d)) if n else 0.0
    # a bias: one side of the range in most iterations (those replayed, when known), by a median the floor would hide
    replayed = b.iterations[idx] >= first_replay if first_replay is not None else np.ones(n, dtype=bool)
    late = excess[replayed] if replayed.any() else excess
    pos, neg = float(np.mean(late > 0)), float(np.mean(late < 0))
    med = float(np.median(late))
    bias = max(pos, neg) >= BIAS_SHARE and abs(med) >= BIAS_FLOOR
    if bias:
        ratio = max(ratio, abs(med) / BIAS_FLOOR)
        if start is None:
            sign = np.sign(med)
            start = int(np.flatnonzero((np.sign(excess) == sign) & (replayed if replayed.any() else True))[0])
    if start is not None:
        before = float(np.max(np.abs(excess[:start]))) if start else 0.0
        return _Judged(DIVERGED, int(idx[start]), excess, ratio, level, bias, idx, float(level_d[start]), before)
    return _Judged(PARITY_OK, int(idx[int(np.argmax(z))]), excess, ratio, level, False, idx)


def _segments(b: Band, idx: np.ndarray, ratio: float = 1.5) -> tuple[tuple[int, int, float], ...]:
    """The band over the compared iterations as (first, last iteration, widest width) segments: a new segment
    where the width has grown or shrunk `ratio` times from its segment's first iteration."""
    out: list[list[float]] = []
    for k in idx:
        it, w = int(b.iterations[k]), float(b.width[k])
        if out and out[-1][3] / ratio < w < out[-1][3] * ratio:
            out[-1][1], out[-1][2] = it, max(out[-1][2], w)
        else:
            out.append([it, it, w, w])  # first, last, widest, width at first
    return tuple((int(a), int(z), float(w)) for a, z, w, _ in out)


def far_beyond(j: _Judged, b: Band, refs_agreement: float = 0.0, first_replay: int | None = None) -> bool:
    """A departure that starts FAR_FACTOR times beyond the pair's agreement before it and the references' own
    agreement (see FAR_FACTOR): a fault, whatever the references can calibrate. Only a departure after iterations
    where the pair agreed, and (when known) from the graph's first replay on: one from the first iteration, or
    before capture, is no graph's (another model, other data: `uncalibrated` with one reference)."""
    if j.state != DIVERGED or j.k is None or not (j.idx < j.k).any():
        return False
    if first_replay is not None and (int(b.iterations[j.k]) < first_replay
                                     or not (b.iterations[j.idx] < first_replay).any()):
        return False
    return j.onset >= FAR_FACTOR * max(j.before, refs_agreement, AGREE_FLOOR)


def departure(run: Printed, reference: Printed, *, floor: float = LOSS_FLOOR) -> tuple[int, float, float] | None:
    """Where a run first leaves the floor around one reference: (iteration, its level there, its largest distance from
    the reference before it), the figures far_beyond weighs; None when it does not leave it."""
    span, points = grid([run, reference])
    b = band([reference], span, points, floor=floor)
    j = _judge(on_grid(run, span, points), b, run.first_replay)
    if j.state != DIVERGED or j.k is None:
        return None
    return int(b.iterations[j.k]), j.onset, j.before


def agreement(refs: References) -> float:
    """The references' own agreement: the widest relative range between them at any compared iteration (0 for one)."""
    if len(refs.used) < 2:
        return 0.0
    runs = [refs.loss[r] for r in refs.used]
    span, points = grid(runs)
    b = band(runs, span, points)
    return float(np.max(b.hi - b.lo)) if b.iterations.size else 0.0


def _record(run_id: str, j: _Judged, b: Band, values: Mapping[int, float], state: str,
            eager_run: str | None, confirmed: bool) -> RunParity:
    k = j.k
    it = int(b.iterations[k]) if k is not None else None
    pos = None if k is None else int(np.flatnonzero(j.idx == k)[0]) if (j.idx == k).any() else None
    rel = float(abs(j.excess[pos])) if pos is not None and j.excess.size else (math.inf if state == NONFINITE
                                                                                 else None)
    widths = b.width[j.idx] if j.idx.size else np.zeros(0)
    return RunParity(run_id, state, it, None if it is None else float(values[it]),
                     None if k is None else float(b.centre[k]), rel, j.level,
                     float(b.width[k]) if k is not None else LOSS_FLOOR, eager_run, int(j.idx.size), j.ratio, j.bias,
                     float(widths.min()) if widths.size else None, float(widths.max()) if widths.size else None,
                     b.span, confirmed, _segments(b, j.idx), j.before if j.state == DIVERGED else None)


def check_run(run_id: str, graph: Printed, refs: References, *, floor: float = LOSS_FLOOR,
              factor: float = BAND_FACTOR) -> RunParity:
    """One graph run against the references of its seed: the confirmed band, else each reference alone."""
    if not refs.used:
        return RunParity(run_id, UNCHECKED, None, None, None, None, 0.0, floor, None, 0)
    ref_runs = [refs.loss[r] for r in refs.used]
    span, points = grid([graph, *ref_runs])
    values = on_grid(graph, span, points)
    if refs.confirmed:
        b = band(ref_runs, span, points, floor=floor, factor=factor)
        j = _judge(values, b, graph.first_replay)
        if j.state == UNCHECKED:
            return RunParity(run_id, UNCHECKED, None, None, None, None, 0.0, floor, None, 0)
        if b.trusted(j.idx, floor):
            return _record(run_id, j, b, values, j.state, None, True)
    # no confirmed band: each reference alone, the floor as width; following one is enough, and a departure far beyond
    # the pair's agreement before it (and the references' own) is a fault all the same
    own = agreement(refs)
    best: RunParity | None = None
    for rid in refs.used:
        b = band([refs.loss[rid]], span, points, floor=floor, factor=factor)
        j = _judge(values, b, graph.first_replay)
        if j.state == UNCHECKED:
            continue
        state = (DIVERGED if far_beyond(j, b, own, graph.first_replay) else UNCALIBRATED) if j.state == DIVERGED \
            else j.state
        cand = _record(run_id, j, b, values, state, rid, False)
        if best is None or (cand.state != PARITY_OK, cand.excess) < (best.state != PARITY_OK, best.excess):
            best = cand
    return best or RunParity(run_id, UNCHECKED, None, None, None, None, 0.0, floor, None, 0)


def check_references(refs: Mapping[str, Printed], *, floor: float = LOSS_FLOOR, factor: float = BAND_FACTOR,
                     controls: Mapping[str, Printed] | None = None) -> References:
    """Check the reference runs of one seed against each other (their losses must be finite: a non-finite
    eager-like run is a broken baseline, decided before parity).

    `controls` (a sweep's A/A control runs, `graphsweep compare --reference`) join only when the eager runs vouch for
    them: each is judged against the eager runs' references as a graph run would be (their band made CHECK_FACTOR times
    wider); one that leaves it is set aside, so diverging controls never widen a band, however many agree with each
    other. Without an eager reference the controls are checked among themselves.

    Two confirm each other only by agreeing within the floor; one never does. With three or more, each is judged
    against the band of the others made CHECK_FACTOR times wider (a reference is set aside only when it is clearly
    out); a minority that leaves it is set aside and the rest checked again; when a majority leaves, the
    references dispute each other and confirm nothing."""
    if controls:
        return _with_controls(check_references(refs, floor=floor, factor=factor), refs, controls, floor, factor)
    ids = [r for r, p in refs.items() if p.loss]
    own = {r: refs[r] for r in ids}
    if len(ids) < 2:
        return References(tuple(ids), (), False, own)
    if len(ids) == 2:
        a, b = ids
        agree = all(check_run(x, refs[x], References((y,), (), False, {y: refs[y]}), floor=floor,
                              factor=factor).state == PARITY_OK for x, y in ((a, b), (b, a)))
        return References(tuple(ids), (), agree, own)
    out = []
    for r in ids:
        others = {x: refs[x] for x in ids if x != r}
        if check_run(r, refs[r], References(tuple(others), (), True, others), floor=floor,
                     factor=factor * CHECK_FACTOR).state != PARITY_OK:
            out.append(r)
    if not out:
        return References(tuple(ids), (), True, own)
    if len(out) > (len(ids) - 1) // 2:
        return References(tuple(ids), (), False, own)
    rest = check_references({r: refs[r] for r in ids if r not in out}, floor=floor, factor=factor)
    return References(rest.used, (*out, *rest.excluded), rest.confirmed, rest.loss)


def _with_controls(base: References, refs: Mapping[str, Printed], controls: Mapping[str, Printed], floor: float,
                   factor: float) -> References:
    """The eager references, joined by the controls that follow them (check_references)."""
    mine = {r: p for r, p in controls.items() if p.loss}
    if not base.used:
        return check_references(mine, floor=floor, factor=factor)
    follow = [r for r, p in mine.items()
              if check_run(r, p, base, floor=floor, factor=factor * CHECK_FACTOR).state == PARITY_OK]
    out = tuple(r for r in mine if r not in follow)
    if not follow:
        return References(base.used, (*base.excluded, *out), base.confirmed, base.loss)
    joined = check_references({**{r: refs[r] for r in base.used}, **{r: mine[r] for r in follow}}, floor=floor,
                              factor=factor)
    return References(joined.used, (*base.excluded, *out, *joined.excluded), joined.confirmed, joined.loss)


def spread_of(refs: References) -> float:
    """The references' largest pooled relative sd (0 for one run or bit-identical runs)."""
    if len(refs.used) < 2:
        return 0.0
    runs = [refs.loss[r] for r in refs.used]
    s, points = grid(runs)
    b = band(runs, s, points)
    return float(b.sigma.max()) if b.sigma.size else 0.0


# ------------------------------------------------------------------------------------------------------------------
# The arm


def judge_arm(graph: Mapping[str, Printed], refs: Mapping[str, Printed], *, floor: float = LOSS_FLOOR,
              factor: float = BAND_FACTOR, controls: Mapping[str, Printed] | None = None) -> ArmParity:
    """The parity of a graph arm of one seed: its runs against the references of that seed (checked first)."""
    checked = check_references(refs, floor=floor, factor=factor, controls=controls)
    runs = tuple(check_run(rid, g, checked, floor=floor, factor=factor) for rid, g in graph.items())
    return summarize(runs, spread_of(checked), references=len(checked.used), excluded=checked.excluded)


def summarize(runs: Sequence[RunParity], spread: float, *, references: int = 0,
              excluded: Sequence[str] = ()) -> ArmParity:
    """Add the runs' states up to the arm's (runs may come from several seeds, each checked against its own)."""
    runs = tuple(runs)
    checked = [r for r in runs if r.state != UNCHECKED]
    bad = [r for r in checked if r.state in (DIVERGED, NONFINITE)]
    nonfinite = [r for r in bad if r.state == NONFINITE]
    loose = [r for r in checked if r.state == UNCALIBRATED]
    if nonfinite:
        state, worst = NONFINITE, min(nonfinite, key=lambda r: r.iteration or 0)
    elif bad:
        drift = (len(bad) <= DRIFT_MAX_RUNS and len(checked) >= DRIFT_MIN_CHECKED and not loose
                 and all(r.excess <= DRIFT_LEVEL for r in bad))
        state, worst = (RUN_DRIFT if drift else DIVERGED), max(bad, key=lambda r: r.excess)
    elif loose:
        state, worst = UNCALIBRATED, max(loose, key=lambda r: r.excess)
    elif not checked:
        state, worst = UNCHECKED, None
    elif len(checked) < len(runs):
        state, worst = UNCHECKED, next(r for r in runs if r.state == UNCHECKED)
    else:
        state, worst = PARITY_OK, max(checked, key=lambda r: r.excess)
    tol = worst.tolerance if worst is not None else LOSS_FLOOR
    return ArmParity(state, runs, worst, len(bad) + len(loose), len(checked), spread, tol, references,
                     tuple(excluded), all(r.confirmed for r in checked), worst.band if worst is not None else (),
                     worst.compared if worst is not None else 0, max((r.span for r in checked), default=1))
