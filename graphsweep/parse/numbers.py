"""Numbers as a log prints them: a text that is no number (cut, glued, `1.2.3`) is NaN, never an exception."""

from __future__ import annotations

import math
import re


def to_float(raw: bytes | str | None) -> float:
    """The number `raw` spells; NaN when it is absent or no number (a `nan` loss, `inf`, junk). Python's float()
    reads any number of digits (a 5,000-digit one is inf), unlike int(), whose 4,300-digit limit the log grammar's
    `\\d{1,18}` groups keep away (graphsweep/logformat.py)."""
    if raw is None:
        return math.nan
    try:
        return float(raw)
    except ValueError:
        return math.nan


def group_float(m: re.Match | None, group: int = 1) -> float:
    """A pattern's group as a float; NaN when it did not match or is no number."""
    return math.nan if m is None else to_float(m.group(group))
