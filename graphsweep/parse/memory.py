"""Memory lines (docs/megatron-facts.md §5.3): reading one, merging ranks and files, and the steady-state figures of a run.

Bridge prints `[Rank r] (after i iterations) memory (GB) | mem-allocated-gigabytes: X | ...` (1e9-byte GB), MCore/MLM
`... memory (MB) | allocated: X | max allocated: X | reserved: X | max reserved: X` (MiB); graphsweep/logformat.py
holds both grammars. `mem-max-*` are running peaks since process start, until the training process resets them and
says so (`[graphsweep] memory peaks reset after iteration i`, both entry programs, after the capture iteration).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from graphsweep import logformat as lf
from graphsweep.parse.numbers import group_float
from graphsweep.parse.records import Evidence, RunSummary


def read_line(raw: bytes) -> tuple[int, list[float]] | None:
    """(iteration, the lf.MEM_FIELDS values in 1e9-byte GB, NaN for a field the line lacks), or None."""
    m = lf.MEM_HEAD.search(raw)
    if not m:
        return None
    gb = m.group(2) == b"GB"
    pats = lf.MEM_GB if gb else lf.MEM_MB
    vals = [group_float(pats[k].search(raw, m.end())) for k in lf.MEM_FIELDS]
    return int(m.group(1)), vals if gb else [v * lf.MIB_TO_GB for v in vals]


def merge(old: Sequence[float] | None, new: Sequence[float]) -> list[float]:
    """Field by field the larger, NaN meaning absent: the ranks of one iteration, or the files of one run."""
    if old is None:
        return list(new)
    return [o if math.isnan(v) else (v if math.isnan(o) else max(o, v)) for o, v in zip(old, new)]


def _top(values: Iterable[float]) -> float | None:
    return max((x for x in values if not math.isnan(x)), default=None)


def steady_figures(s: RunSummary, ev: Evidence) -> None:
    """Max over the steady window's memory lines of current allocated, current reserved and, only for lines after the
    peaks were reset (before that a running peak remembers warmup), peak allocated. None where no line says it."""
    if s.steady_first is None or s.steady_last is None:
        return
    rows = {i: v for i, v in ev.memory.items() if s.steady_first <= i <= s.steady_last}
    s.steady_mem_allocated_gb = _top(v[0] for v in rows.values())
    s.steady_mem_reserved_gb = _top(v[3] for v in rows.values())
    if ev.peaks_reset is not None:
        s.steady_mem_peak_gb = _top(v[1] for i, v in rows.items() if i > ev.peaks_reset)
