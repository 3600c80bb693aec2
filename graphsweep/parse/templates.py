"""A block of a long log at a time: its lines by template, the plain iteration and Step Time lines read as columns.

A long run prints the same lines over and over with other digits. A line's template is the line with every digit
read as `0`; lines of one template differ in digits only, so one line of a template says what all of them are:
- `other`: the template holds a literal a line reader looks for (lines.NEEDLES other than the iteration and Step Time
  texts, with their digits as `0`): those lines go to lines.handle_line one by one, in file order;
- `iteration`: a plain iteration line (one `iteration i/N |` head, a readable elapsed time, nothing else the reader
  looks for): its numbers sit at the same places in every line of the template, so they are cut out of all of them
  at once and cast with Arrow;
- `step`: a plain `Step Time : ...` line, read the same way;
- `ignore`: nothing a reader looks for.
A template whose one line the reader would read otherwise (a head glued to another, a number that is no number) is
`other`: the line reader stays the reference (tests/parse/test_fixtures.py compares the two on every fixture).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphsweep import logformat as lf
from graphsweep.parse.filescan import FileScan, text
from graphsweep.parse.lines import NEEDLES
from graphsweep.parse.numbers import to_float

IGNORE, OTHER, ITERATION, STEP = 0, 1, 2, 3

_ZERO = bytes(48 if 48 <= c <= 57 else c for c in range(256))  # every digit read as `0`
# what makes a line `other`: a literal of the reader's (lines.handle_line also looks inside the lines it is given for
# these few texts), as a template spells it
_OTHER = tuple(dict.fromkeys(n.translate(_ZERO) for n in NEEDLES + (
    b"raining", b"etup", b"initialize megatron", b"xiting program", b"StopIteration", b"no samples left", b"raph",
) if n not in (lf.ITER_NEEDLE, lf.STEP_NEEDLE)))
_FLOATS = ("elapsed", "tflops", "loss", "grad_norm", "skipped")
_MIN = np.iinfo(np.int64).min


@dataclass
class Rows:
    """The plain iteration rows of a block, in file order (numpy columns), and what follows from each row alone and
    its neighbours in the block (append_rows adds what the attempt so far says)."""

    idx: np.ndarray  # the row's line in the block
    it: np.ndarray
    total: np.ndarray
    elapsed: np.ndarray
    tflops: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    skipped: np.ndarray
    loss_key: np.ndarray  # the line prints `lm loss`
    grad_key: np.ndarray  # the line prints `grad norm`
    loss_scale: np.ndarray  # the line prints `loss scale` (a whole line: a missing lm loss is a NaN there)
    decimals: np.ndarray  # the decimals of the elapsed time (-1: not a plain decimal)
    good: np.ndarray = None  # type: ignore[assignment] - a time above 0 ms: a row (else an unparsed line)
    good_idx: np.ndarray = None  # type: ignore[assignment] - the good rows' positions
    prev: np.ndarray = None  # type: ignore[assignment] - the previous good row's iteration in the block (MIN: none)

    def __post_init__(self) -> None:
        self.good = (self.elapsed > 0) & np.isfinite(self.elapsed)  # else no timing (lines.iteration_segments)
        self.good_idx = np.flatnonzero(self.good)
        prev = np.full(len(self.it), _MIN, dtype=np.int64)
        if len(self.good_idx) > 1:  # a good row's previous good row (what lines.span_of reads)
            prev[self.good_idx[1:]] = self.it[self.good_idx[:-1]]
        self.prev = prev

    def bad(self, k: np.ndarray, all_skipped: np.ndarray) -> np.ndarray:
        """NaN/Inf in rows k (lines.iteration_segments' test)."""
        loss, gn, key = self.loss[k], self.grad_norm[k], self.loss_key[k]
        return (self.grad_key[k] & np.isnan(gn)) | np.isinf(gn) \
            | (~all_skipped & (np.isinf(loss) | (key & np.isnan(loss))))

    def missing(self, k: np.ndarray, all_skipped: np.ndarray) -> np.ndarray:
        """Rows k whose whole line has no `lm loss` key though not every iteration of it was skipped."""
        return ~self.loss_key[k] & self.loss_scale[k] & ~all_skipped


@dataclass
class Block:
    """A block's lines by what the readers do with them."""

    other: np.ndarray  # lines for lines.handle_line, ascending
    rows: Rows
    steps: np.ndarray  # the Step Time lines, ascending
    step_tflops: np.ndarray  # their GPU utilization figure


def _probe_iteration(raw: bytes) -> dict[str, Any] | None:
    """Where a plain iteration line's numbers are (spans from the line's start), or None when the line reader would
    read it in any other way than one row."""
    heads = list(lf.ITER_HEAD.finditer(raw))
    if len(heads) != 1 or lf.STEP_NEEDLE in raw:
        return None
    at = heads[0].end()
    seg = raw[at:]  # as lines.iteration_segments reads it
    found = {k: p.search(seg) for k, p in (("elapsed", lf.ELAPSED), ("tflops", lf.THROUGHPUT), ("loss", lf.LM_LOSS),
                                           ("grad_norm", lf.GRAD_NORM), ("skipped", lf.SKIPPED))}
    if found["elapsed"] is None or any(m is not None and math.isnan(to_float(m.group(1))) and
                                       m.group(1).lower() != b"nan" for m in found.values()):
        return None
    spans = {k: (at + m.start(1), at + m.end(1)) if m else None for k, m in found.items()}
    spans["it"], spans["total"] = heads[0].span(1), heads[0].span(2)
    d = lf.decimals(found["elapsed"].group(1))
    return {"spans": spans, "loss_scale": b"loss scale" in seg, "decimals": -1 if d is None else d}


def _probe_step(raw: bytes) -> tuple[int, int] | None:
    m = lf.STEP.search(raw)
    if m is None or lf.ITER_NEEDLE in raw or math.isnan(to_float(m.group(2))):
        return None
    return m.span(2)


def _kinds(lines: pa.Array, chunk: bytes, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """(each line's template, each template's kind, each template's probe)."""
    templates = pa.Array.from_buffers(pa.binary(), len(lines), [None, lines.buffers()[1],
                                                                  pa.py_buffer(chunk.translate(_ZERO))])
    enc = templates.dictionary_encode()
    codes = enc.indices.to_numpy(zero_copy_only=False)
    _, first = np.unique(codes, return_index=True)
    kinds = np.zeros(len(enc.dictionary), dtype=np.int8)
    probes: list[Any] = [None] * len(kinds)
    for t, template in enumerate(enc.dictionary.to_pylist()):
        if any(n in template for n in _OTHER):
            kinds[t] = OTHER
            continue
        is_iter, is_step = lf.ITER_NEEDLE in template, lf.STEP_NEEDLE in template
        if not (is_iter or is_step):
            continue
        j = int(first[t])
        raw = chunk[starts[j]:starts[j + 1]]
        probes[t] = _probe_iteration(raw) if is_iter else _probe_step(raw)
        kinds[t] = OTHER if probes[t] is None else ITERATION if is_iter else STEP
    return codes, kinds, probes


def _column(buf: np.ndarray, at: np.ndarray, span: tuple[int, int], kind: pa.DataType) -> np.ndarray:
    """The number at `span` of every line starting at `at` (lines of one template: it sits at the same place)."""
    a, b = span
    w = b - a
    cut = np.empty((len(at), w), dtype=np.uint8)
    for j in range(w):  # one byte column at a time: no (rows x width) index array
        np.take(buf, at + (a + j), out=cut[:, j])
    offsets = np.arange(0, len(at) * w + 1, w, dtype=np.int64)
    strings = pa.Array.from_buffers(pa.large_string(), len(at), [None, pa.py_buffer(offsets), pa.py_buffer(cut)])
    return pc.cast(strings, kind).to_numpy(zero_copy_only=False)


def read_block(chunk: bytes, starts: np.ndarray) -> Block:
    """The block's lines (line k is chunk[starts[k]:starts[k + 1]]) by template kind, its plain rows and steps."""
    n = len(starts) - 1
    lines = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(starts.astype(np.int32)), pa.py_buffer(chunk)])
    codes, kinds, probes = _kinds(lines, chunk, starts)
    line_kind = kinds[codes]
    buf = np.frombuffer(chunk, dtype=np.uint8)
    order = np.argsort(codes, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(kinds)))])
    parts: list[dict[str, np.ndarray]] = []
    step_idx: list[np.ndarray] = []
    step_val: list[np.ndarray] = []
    for t in np.flatnonzero(kinds >= ITERATION):
        idx = order[bounds[t]:bounds[t + 1]]
        at = starts[idx].astype(np.int64)
        if kinds[t] == STEP:
            step_idx.append(idx)
            step_val.append(_column(buf, at, probes[t], pa.float64()))
            continue
        p = probes[t]
        spans = p["spans"]
        cols = {"idx": idx, "it": _column(buf, at, spans["it"], pa.int64()),
                "total": _column(buf, at, spans["total"], pa.int64())}
        for k in _FLOATS:
            cols[k] = _column(buf, at, spans[k], pa.float64()) if spans[k] else np.full(len(idx), math.nan)
        cols["loss_key"] = np.full(len(idx), spans["loss"] is not None)
        cols["grad_key"] = np.full(len(idx), spans["grad_norm"] is not None)
        cols["loss_scale"] = np.full(len(idx), p["loss_scale"])
        cols["decimals"] = np.full(len(idx), p["decimals"])
        parts.append(cols)
    if parts:
        merged = {k: np.concatenate([c[k] for c in parts]) for k in parts[0]}
        back = np.argsort(merged["idx"], kind="stable")
        rows = Rows(**{k: v[back] for k, v in merged.items()})
    else:
        rows = Rows(*(np.array([], dtype=t) for t in (np.int64,) * 3 + (np.float64,) * 5 + (bool,) * 3 + (np.int64,)))
    if step_idx:
        si, sv = np.concatenate(step_idx), np.concatenate(step_val)
        back = np.argsort(si, kind="stable")
        si, sv = si[back], sv[back]
    else:
        si, sv = np.array([], dtype=np.int64), np.array([], dtype=np.float64)
    return Block(np.flatnonzero(line_kind == OTHER), rows, si, sv)


def append_rows(fs: FileScan, rows: Rows, a: int, b: int, chunk: bytes, starts: np.ndarray, first_line: int,
                first_byte: int) -> int:
    """Append rows a..b-1 to the attempt, as lines.iteration_segments would one line at a time, and return where it
    stopped: b, or the first row that starts over (its iteration at or before the attempt's last: scan.py starts a
    new attempt there). `first_line`, `first_byte`: where the block starts in the file."""
    last = fs.it[-1] if fs.it else _MIN
    seen = np.where(rows.good[a:b], rows.it[a:b], _MIN)  # the attempt's iterations so far, row by row
    over = rows.it[a:b] <= np.maximum.accumulate(np.concatenate([[last], seen[:-1]]))
    if over.any():
        b = a + int(np.argmax(over))
    k0, k1 = np.searchsorted(rows.good_idx, (a, b))
    keep = rows.good_idx[k0:k1]
    fs.iter_lines_unparsed += (b - a) - len(keep)
    if len(keep) == 0:
        return b
    its = rows.it[keep]
    prev = rows.prev[keep]
    prev[0] = last if fs.it else fs.start_iteration  # the attempt's previous row (lines.span_of)
    all_skipped = rows.skipped[keep] >= np.maximum(1, its - prev)  # no loss in the line's mean (lf.SKIPPED)
    line_of = rows.idx[keep]
    d = rows.decimals[keep]
    if (d >= 0).any():
        fs.note_decimals(int(d[d >= 0].min()))
    fs.it.frombytes(its.tobytes())
    fs.it_line.frombytes((line_of + first_line).tobytes())
    fs.it_offset.frombytes((starts[line_of] + first_byte).tobytes())
    for name in ("elapsed", "tflops", "loss", "grad_norm", "skipped"):
        getattr(fs, name).frombytes(getattr(rows, name)[keep].tobytes())
    fs.train_iters = int(rows.total[keep[-1]])
    fs.lm_loss_seen = fs.lm_loss_seen or bool(rows.loss_key[keep].any())

    def mark(k: int) -> tuple[int, int, str]:
        j = int(line_of[k])
        return int(its[k]), j + first_line, text(chunk[starts[j]:starts[j + 1]])

    if fs.loss_missing is None and (missing := np.flatnonzero(rows.missing(keep, all_skipped))).size:
        fs.loss_missing = mark(int(missing[0]))
    if fs.nan_iteration is None and (bad := np.flatnonzero(rows.bad(keep, all_skipped))).size:
        fs.nan_iteration = mark(int(bad[0]))
    return b
