"""A pair job's combined log (graphsweep/run/abba.py) into its segments, one per training process, at the ABBA
driver's markers (graphsweep/logformat.py). Standard library only: the run rule splits a failed pair job's log too
(graphsweep/parse/read.py find_transient)."""

from __future__ import annotations

from dataclasses import dataclass

from graphsweep import logformat as lf
from graphsweep.parse.numbers import to_float


@dataclass
class Segment:
    label: str  # A1, B1, ...
    arm: str  # eager | graph | control
    text: str
    exit_code: int | None = None  # None: no end marker (the job died inside this segment)
    wall_s: float | None = None


def split_segments(text: str) -> list[Segment]:
    """The segments of a pair job's combined log, in the order they ran."""
    segments: list[Segment] = []
    current: Segment | None = None
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if lf.ABBA_MARK in line:
            if m := lf.RE_SEGMENT_START.search(line):
                if current is not None:  # started without an end: the previous one never finished
                    current.text = "".join(lines)
                current, lines = Segment(m["label"], m["arm"], ""), []
                segments.append(current)
                continue
            if (m := lf.RE_SEGMENT_END.search(line)) and current is not None and m["label"] == current.label:
                current.text, current.exit_code, current.wall_s = "".join(lines), int(m["exit"]), to_float(m["wall"])
                current, lines = None, []
                continue
        if current is not None:
            lines.append(line)
    if current is not None:
        current.text = "".join(lines)
    return segments
