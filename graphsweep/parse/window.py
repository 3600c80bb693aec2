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
    iterations: Sequence[int], elapsed_ms: Sequence[float], first_allowed: int, min_steady: int = MIN_STEADY
) -> SteadyWindow:
    """Choose the steady window of one run and say why.

    1. Drop every iteration before `first_allowed` (setup, `cuda_graph_warmup_steps`, the capture
       iteration: the caller knows where capture happened).
    2. Trim a leading transient: the best single change point in the median level of the first half
       of what remains, kept only if it is large (>= 3 % and >= 3 robust sd) and the earlier level
       never comes back (so it is warm-up, not job noise). Repeated while it still finds one.
    3. Note (do not trim) residual drift between the two halves of the window.
    Fewer than `min_steady` iterations left is its own outcome: first/last are None.
    """
    if len(iterations) != len(elapsed_ms):
        raise ValueError(
            f"steady_window: {len(iterations)} iteration numbers but {len(elapsed_ms)} elapsed times; "
            "pass one elapsed time per parsed iteration line"
        )
    it = np.asarray(iterations, dtype=np.int64)
    x_all = np.asarray(elapsed_ms, dtype=float)
    if it.size > 1 and np.any(np.diff(it) <= 0):
        bad = int(np.flatnonzero(np.diff(it) <= 0)[0])
        raise ValueError(
            f"steady_window: iteration numbers must be strictly increasing (iteration {it[bad + 1]} "
            f"follows {it[bad]}); keep one iteration line per iteration (the last rank's)"
        )
    if not np.all(np.isfinite(x_all)):
        raise ValueError("steady_window: elapsed times contain NaN/inf; drop unparsed iteration lines first")

    keep = it >= first_allowed
    skipped = int((~keep).sum())
    it, x = it[keep], x_all[keep]
    n0 = int(it.size)
    skip_note = f"{skipped} skipped before iteration {first_allowed} (setup, warmup, capture)"
    if n0 < min_steady:
        tail = f"; the log ends at iteration {int(iterations[-1])}" if len(iterations) else "; no iteration lines"
        return SteadyWindow(
            None, None, n0, f"too few steady iterations ({n0} < {min_steady}) at or after iteration {first_allowed}{tail}"
        )

    notes: list[str] = []
    start = 0
    max_trim = n0 // 2  # never trim more than half of the window
    while True:
        seg = x[start:]
        room = min(max_trim - start, seg.size - min_steady)
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
                f"trimmed leading transient {_fmt_range(int(it[start]), int(it[start + k - 1]))} "
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

    wit, wx = it[start:], x[start:]
    n = int(wx.size)
    half = n // 2
    h1, h2 = float(np.median(wx[:half])), float(np.median(wx[n - half :]))
    drift = h2 / h1 - 1.0
    if abs(drift) >= DRIFT_NOTE:
        notes.append(f"residual drift: second half {drift:+.0%} vs first half (kept; job-level noise)")
    head = f"iterations {int(wit[0])}-{int(wit[-1])}: {n} steady, {skip_note}"
    return SteadyWindow(
        int(wit[0]), int(wit[-1]), n, "; ".join([head, *notes]), trimmed=start, median_ms=float(np.median(wx))
    )
