"""Statistics: steady windows of one run, verdicts of one cell.

One place for every statistical decision, so the parser, `graphsweep compare` and the workflow agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class SteadyWindow:
    """The iterations of one run that count as steady state, and why."""

    first: int | None  # first steady iteration number (inclusive), None when there is none
    last: int | None  # last steady iteration number (inclusive)
    n: int
    reason: str  # e.g. "after warmup 3 and capture iteration 4" or "too few steady iterations (2 < 5)"


def steady_window(
    iterations: Sequence[int], elapsed_ms: Sequence[float], first_allowed: int, min_steady: int = 5
) -> SteadyWindow:
    """Choose the steady window: iterations >= first_allowed (after setup, warmup and capture)."""
    kept = [i for i in iterations if i >= first_allowed]
    if len(kept) < min_steady:
        return SteadyWindow(None, None, len(kept), f"too few steady iterations ({len(kept)} < {min_steady})")
    return SteadyWindow(kept[0], kept[-1], len(kept), f"iterations >= {first_allowed} (after warmup and capture)")
