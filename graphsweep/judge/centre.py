"""An arm's step time: the geometric mean of its jobs' medians, the centre its interval is built on (judge/interval.py
works on log medians), so two arms' step times reproduce the speedup printed beside them. One formula for the
verdict, the launch gate and `graphsweep status`. Standard library only: the run rule's process (the launch gate)
imports it, and stays free of scipy and pandas (tests/run/test_imports.py)."""

from __future__ import annotations

import math
from typing import Sequence


def centre_ms(medians_ms: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in medians_ms) / len(medians_ms))
