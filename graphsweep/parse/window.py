"""The steady window of one run: which iterations count as steady state, and why.

Steady state excludes setup, `cuda_graph_warmup_steps` and the capture iteration (the caller knows where capture
happened) and a leading transient found in the data; it is recorded per run, never guessed silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

# A leading segment is a transient (and trimmed) only when all of these hold. Values chosen on
# the fixtures: they trim a genuine warm-up ramp but leave the mid-run level shifts of
# tests/fixtures/logs/h200-probe/medium-eager-1.log (15.3 -> 13.0 -> 15.7 ms) alone, which are job noise, not warm-up.
TRANSIENT_MIN_SHIFT = 0.03  # prefix median differs from the rest by >= 3 %

TRANSIENT_MIN_SIGMAS = 3.0  # ... and by >= 3 robust standard deviations of the rest

TRANSIENT_MAX_RETURN = 0.10  # ... and <= 10 % of the rest returns to the prefix side of the midpoint

DRIFT_NOTE = 0.05  # first vs second half of the window differ by >= 5 %: say so (not trimmed)

_MAX_POINTS = 400  # longer windows are searched on block medians (keeps 10^4 iterations fast)

MIN_STEADY = 5  # fewer steady iterations than this: no window, no step time (a spec with fewer is refused)


@dataclass(frozen=True)
class SteadyWindow:
    """The iterations of one run that count as steady state, and why."""

    first: int | None  # first steady iteration number (inclusive), None when there is none
    last: int | None  # last steady iteration number (inclusive)
    n: int
    reason: str  # e.g. "iterations 5-30 (26 steady; ...)" or "too few steady iterations (2 < 5) ..."
    trimmed: int = 0  # iterations >= first_allowed dropped as a leading transient
    median_ms: float | None = None  # median step time inside the window


def _robust_sd(x: np.ndarray) -> float:
    return 1.4826 * float(np.median(np.abs(x - np.median(x))))


def _best_split(x: np.ndarray, max_k: int) -> int | None:
    """Split point k (1..max_k) minimising the L1 cost of a two-level median model."""
    if max_k < 1:
        return None
    best_k, best_cost = None, math.inf
    for k in range(1, max_k + 1):
        pre, suf = x[:k], x[k:]
        cost = float(np.abs(pre - np.median(pre)).sum() + np.abs(suf - np.median(suf)).sum())
        if cost < best_cost - 1e-12:  # strict: ties keep the shortest prefix (deterministic)
            best_k, best_cost = k, cost
    return best_k


def _fmt_range(a: int, b: int) -> str:
    return f"{a}" if a == b else f"{a}-{b}"


def steady_window(
    iterations: Sequence[int], elapsed_ms: Sequence[float], first_allowed: int, min_steady: int = MIN_STEADY,
    spans: Sequence[int] | None = None,
) -> SteadyWindow:
    """Choose the steady window of one run and say why.

    1. Drop every iteration before `first_allowed` (setup, `cuda_graph_warmup_steps`, the capture
       iteration: the caller knows where capture happened).
    2. Trim a leading transient: the best single change point in the median level of the first half
       of what remains, kept only if it is large (>= 3 % and >= 3 robust sd) and the earlier level
       never comes back (so it is warm-up, not job noise). Repeated while it still finds one.
    3. Note (do not trim) residual drift between the two halves of the window.
    Fewer than `min_steady` iterations left is its own outcome: first/last are None.

    `spans`: how many iterations each line covers (Megatron prints a line every `log_interval` iterations, its
    elapsed time the mean over them: logformat.line_spans); None: one each. A line counts only when every iteration
    it covers is at or after `first_allowed`, the window's `n` counts iterations, not lines, and `first` is the first
    iteration its first line covers.
    """
    if len(iterations) != len(elapsed_ms):
        raise ValueError(
            f"steady_window: {len(iterations)} iteration numbers but {len(elapsed_ms)} elapsed times; "
            "pass one elapsed time per parsed iteration line"
        )
    it = np.asarray(iterations, dtype=np.int64)
    x_all = np.asarray(elapsed_ms, dtype=float)
    span_all = np.ones(it.size, dtype=np.int64) if spans is None else np.asarray(spans, dtype=np.int64)
    if span_all.size != it.size or (span_all < 1).any():
        raise ValueError(f"steady_window: {span_all.size} spans for {it.size} lines; each line covers >= 1 iteration")
    if it.size > 1 and np.any(np.diff(it) <= 0):
        bad = int(np.flatnonzero(np.diff(it) <= 0)[0])
        raise ValueError(
            f"steady_window: iteration numbers must be strictly increasing (iteration {it[bad + 1]} "
            f"follows {it[bad]}); keep one iteration line per iteration (the last rank's)"
        )
    if not np.all(np.isfinite(x_all)):
        raise ValueError("steady_window: elapsed times contain NaN/inf; drop unparsed iteration lines first")

    keep = it - span_all + 1 >= first_allowed  # every iteration of the line at or after first_allowed
    it, x, span = it[keep], x_all[keep], span_all[keep]
    n0 = int(span.sum())
    if spans is None or (span_all == 1).all():
        skip_note = f"{int((~keep).sum())} skipped before iteration {first_allowed} (setup, warmup, capture)"
    else:
        skip_note = (f"{int((~keep).sum())} line(s) skipped for covering an iteration before {first_allowed} (setup, "
                     "warmup, capture)")
    if n0 < min_steady:
        tail = f"; the log ends at iteration {int(iterations[-1])}" if len(iterations) else "; no iteration lines"
        return SteadyWindow(
            None, None, n0, f"too few steady iterations ({n0} < {min_steady}) at or after iteration {first_allowed}{tail}"
        )

    notes: list[str] = []
    start = 0
    # lines the trim may take: never more than half of the iterations, and never below min_steady iterations
    left = np.cumsum(span[::-1])[::-1]  # iterations from each line to the end
    most = min(int(np.searchsorted(-left, -(n0 - n0 // 2), side="right")),  # trims that keep >= half
               int(np.searchsorted(-left, -min_steady, side="right"))) - 1  # trims that keep >= min_steady
    while True:
        seg = x[start:]
        room = most - start
        if room < 1:
            break
        # Long windows: search on block medians, then map the split back to iterations.
        block = max(1, math.ceil(seg.size / _MAX_POINTS))
        if block > 1:
            nb = seg.size // block
            pts = np.median(seg[: nb * block].reshape(nb, block), axis=1)
            kb = _best_split(pts, max(0, room // block))
            k = None if kb is None else kb * block
        else:
            k = _best_split(seg, room)
        if k is None:
            break
        pre, suf = seg[:k], seg[k:]
        lp, ls = float(np.median(pre)), float(np.median(suf))
        shift = lp / ls - 1.0
        mid = 0.5 * (lp + ls)
        returned = int(np.sum(suf >= mid)) if lp > ls else int(np.sum(suf <= mid))
        big = abs(shift) >= TRANSIENT_MIN_SHIFT and abs(lp - ls) >= TRANSIENT_MIN_SIGMAS * _robust_sd(suf)
        if big and returned <= TRANSIENT_MAX_RETURN * suf.size:
            notes.append(
                f"trimmed leading transient {_fmt_range(int(it[start] - span[start] + 1), int(it[start + k - 1]))} "
                f"(median {lp:.1f} ms vs {ls:.1f} ms after, {shift:+.0%})"
            )
            start += k
            continue
        if big:
            notes.append(
                f"level shift at iteration {int(it[start + k])} kept ({lp:.1f} -> {ls:.1f} ms): the earlier level "
                f"returns later ({returned} of {suf.size} iterations), job noise rather than warm-up"
            )
        break

    wit, wx, wspan = it[start:], x[start:], span[start:]
    n = int(wspan.sum())
    half = wx.size // 2
    if half:
        h1, h2 = float(np.median(wx[:half])), float(np.median(wx[wx.size - half :]))
        drift = h2 / h1 - 1.0
        if abs(drift) >= DRIFT_NOTE:
            notes.append(f"residual drift: second half {drift:+.0%} vs first half (kept; job-level noise)")
    first = int(wit[0] - wspan[0] + 1)
    head = f"iterations {first}-{int(wit[-1])}: {n} steady, {skip_note}"
    if (wspan > 1).any():
        head += f"; {wx.size} lines, each the mean of the {_fmt_span(wspan)} iterations since the line before"
    return SteadyWindow(
        first, int(wit[-1]), n, "; ".join([head, *notes]), trimmed=start, median_ms=float(np.median(wx))
    )


def _fmt_span(span: np.ndarray) -> str:
    lo, hi = int(span.min()), int(span.max())
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def line_spans(iterations: np.ndarray, start: int = 0) -> np.ndarray:
    """How many iterations each iteration line covers: its elapsed time and loss are their mean (docs/megatron-facts.md
    §5.1): those since the line before, at most the log's print interval (a line missing from the log does not widen
    the next one). Megatron prints at `iteration % log_interval == 0` (Bridge 0.6.2 train_utils.py L1173; MCore 0.19.2
    training.py L2816), counted from 0, and MCore also after the first iteration of a process (`or
    is_first_iteration`) without resetting its sums there (L2594 `should_reset = not is_first_iteration`): the next
    line covers every iteration from the start. `start`: the iteration the training loop started after (0, or the
    checkpoint a resumed attempt loaded)."""
    its = np.asarray(iterations, dtype=np.int64)
    if its.size == 0:
        return its.copy()
    gaps = np.diff(its, prepend=start)
    between = gaps[1:]
    every = 1
    if between.size:  # the most common gap between lines, a tie to the later one (logformat.print_interval)
        values, first_back, counts = np.unique(between[::-1], return_index=True, return_counts=True)
        every = int(values[np.lexsort((-first_back, counts))[-1]])
    spans = np.clip(gaps, 1, every)
    if its.size >= 2 and every > 1 and its[0] % every and not its[1] % every:  # MCore's first line, off the grid
        spans[1] = max(1, int(its[1]) - start)
    return spans
