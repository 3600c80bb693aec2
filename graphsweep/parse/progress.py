"""How far a running job got: the last `iteration i/N` line in the tail of its training log (the run rule's and
the controller's progress lines, `graphsweep status`). Standard library only, for the waiting processes."""

from __future__ import annotations

import os
from pathlib import Path

from graphsweep import logformat as lf


def latest_iteration(log: str | Path | None, tail_bytes: int = 65536) -> tuple[int, int] | None:
    """(i, N) of the last `iteration i/N |` line in the log's tail; None when there is none (yet)."""
    if not log:
        return None
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - tail_bytes))
            tail = f.read()
    except OSError:
        return None
    matches = lf.ITER_HEAD.findall(tail)  # the iteration line of the log grammar
    if not matches:
        return None
    i, n = matches[-1]
    return int(i), int(n)
