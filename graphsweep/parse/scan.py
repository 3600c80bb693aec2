"""Read one log file into one FileScan per attempt (graphsweep/parse/evidence.py merges a run's files and attempts).

Files are read as bytes, so non-UTF-8 bytes, srun labels (`mx_v1_perf/0 `), `[rankN]: ` / `[default0]:` prefixes and
lines of several ranks glued together do not matter: every pattern (the log grammar, graphsweep/logformat.py) is
searched anywhere in a line, never anchored. A line is looked at only when it holds a literal of the readers'
(lines.NEEDLES).

Two ways through a file, one result: the line loop hands every such line to lines.handle_line, in order (the
reference); the block reader (the default) reads 16 MiB of whole lines at a time, its plain iteration and Step Time
lines as columns by template (templates.py) and every other line through the same lines.handle_line, in file order
after the rows before it. The block reader gives the file to the line loop only on an error of Arrow's
(pa.ArrowException) or a line too long for a block (files.LineTooLong); any other exception is a bug and is raised.

A requeued job appends its next attempt to the same file (Slurm preemption with submitit's `--open-mode=append`): a
new attempt starts at a second start of the training loop or where the iteration numbers start over
(lines.starts_attempt), and gets its own FileScan; the run's outcome is its last attempt's.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa

from graphsweep.parse import templates
from graphsweep.parse.filescan import FileScan
from graphsweep.parse.files import LineTooLong, binary_reason, blocks
from graphsweep.parse.lines import NEEDLES, handle_line, starts_attempt

_BLOCK = 1 << 24  # bytes per block


class _Attempts:
    """The FileScans of one file, the current one last."""

    def __init__(self, path: str) -> None:
        self.scans = [FileScan(path)]

    @property
    def now(self) -> FileScan:
        return self.scans[-1]

    def next(self, lineno: int, n_bytes: int, last: bytes) -> FileScan:
        """A new attempt starts at line `lineno`; the current one ended before it."""
        self.now.finish(lineno - 1, n_bytes, last)
        self.scans.append(FileScan(self.now.path, attempt=len(self.scans) + 1, first_line=lineno))
        return self.now

    def line(self, raw: bytes, lineno: int, offset: int, last: bytes) -> None:
        """A prefiltered line, in file order (`last`: the line before it)."""
        if starts_attempt(self.now, raw):
            self.next(lineno, offset, last)
        handle_line(self.now, raw, lineno, offset)


def scan_file(path: Path | str, *, fast: bool = True) -> list[FileScan]:
    """Read one log file: its attempts in order (one, unless a requeued job appended another). Never raises for file
    content; an unreadable, empty or binary file is one FileScan with its `problem`."""
    path = Path(path)
    fs = FileScan(str(path))
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError as exc:
        fs.problem = f"cannot read {path}: {exc.strerror or exc}"
        return [fs]
    if not head:
        fs.problem = f"empty log {path}"
        return [fs]
    if reason := binary_reason(head):
        fs.problem = f"{reason}: {path}"
        return [fs]
    if fast:
        try:
            return _scan_blocks(path)
        except (pa.ArrowException, LineTooLong):  # Arrow's limits (a block over 2 GiB, a line over 128 MiB)
            pass
    with open(path, "rb") as f:
        return _scan_lines(str(path), f)


def scan_text(text: str | bytes, name: str = "<text>") -> list[FileScan]:
    """Scan log text held in memory (the line loop)."""
    data = text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else text
    if reason := binary_reason(data[:65536]):
        fs = FileScan(name)
        fs.problem = reason
        return [fs]
    return _scan_lines(name, io.BytesIO(data))


def _scan_lines(name: str, lines: io.BufferedIOBase | io.BytesIO) -> list[FileScan]:
    """The line loop: every line with a literal of the readers' to lines.handle_line, in order."""
    att = _Attempts(name)
    lineno = offset = 0
    last = b""
    for raw in lines:
        lineno += 1
        for n in NEEDLES:
            if n in raw:
                att.line(raw, lineno, offset, last)
                break
        offset += len(raw)
        last = raw
    att.now.finish(lineno, offset, last)
    return att.scans


def _scan_blocks(path: Path) -> list[FileScan]:
    """The block reader: rows and steps of each block by template, every other line through lines.handle_line, in
    file order after the rows and steps before it."""
    att = _Attempts(str(path))
    lineno = offset = 0
    last = b""
    for chunk in blocks(path, _BLOCK):
        ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + 1  # each line keeps its newline
        if len(ends) == 0 or ends[-1] != len(chunk):
            ends = np.append(ends, len(chunk))
        starts = np.concatenate([[0], ends]).astype(np.int64)
        reader = _Block(att, templates.read_block(chunk, starts), chunk, starts, lineno, offset)
        for j in reader.block.other.tolist():
            reader.upto(j)
            att.line(chunk[starts[j]:starts[j + 1]], lineno + j + 1, offset + int(starts[j]),
                     chunk[starts[j - 1]:starts[j]] if j else last)
        reader.upto(len(starts) - 1)
        last = chunk[starts[-2]:]
        lineno += len(starts) - 1
        offset += len(chunk)
    att.now.finish(lineno, offset, last)
    return att.scans


class _Block:
    """One block's rows and steps, appended to the attempts in file order up to a line."""

    def __init__(self, att: _Attempts, block: templates.Block, chunk: bytes, starts: np.ndarray, lineno: int,
                 offset: int) -> None:
        self.att, self.block, self.chunk, self.starts = att, block, chunk, starts
        self.lineno, self.offset = lineno, offset  # the block's place in the file: lines and bytes before it
        self.r = self.s = 0  # the next row, the next step

    def upto(self, j: int) -> None:
        """Append the rows and steps before line j; a new attempt where the iterations start over."""
        rows = self.block.rows
        stop = int(np.searchsorted(rows.idx, j))
        while self.r < stop:
            at = templates.append_rows(self.att.now, rows, self.r, stop, self.chunk, self.starts, self.lineno + 1,
                                       self.offset)
            if at < stop:  # the row at `at` starts over: a new attempt from its line
                k = int(rows.idx[at])
                self._steps(k)
                self.att.next(self.lineno + k + 1, self.offset + int(self.starts[k]),
                              self.chunk[self.starts[k - 1]:self.starts[k]] if k else b"")
            self.r = at
        self._steps(j)

    def _steps(self, j: int) -> None:
        stop = int(np.searchsorted(self.block.steps, j))
        if stop > self.s:
            self.att.now.step_tflops.extend(self.block.step_tflops[self.s:stop].tolist())
            self.s = stop
