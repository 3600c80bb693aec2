"""How a process that died says so: the exception that ended it, a fatal line, the launcher's exit report, a signal.

graphsweep/parse/scan.py hands every prefiltered error line of a file to `observe`; graphsweep/parse/run.py merges
the files with `merge`; graphsweep/parse/classify.py decides with the result (rule 17, and teardown). The texts are
logformat's (each with its source: Bridge 0.6.2 pretrain.py, torch 2.11 elastic, CPython, libstdc++).

What counts as the cause, in order: Bridge's `Pretrain failed on rank=N with X: ...` (printed once, before the
traceback, naming the exception that ended pretrain()); else the first exception line after the last iteration line
(a chained traceback prints its root cause first), never the launcher's own report of a child's failure (torchrun's
`ChildFailedError`, a wrapper's `CalledProcessError`, the agent's `SignalException`); a `Fatal Python error:` or
`terminate called ...` or c10 `[F... file.cpp:N]` (LOG(FATAL)) line when no exception was printed. torch's CUDA help
lines, a bare `Traceback` and the launcher's reports name no cause (logformat.BOILERPLATE, LAUNCHER_EXCEPTIONS).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Callable, Sequence

from graphsweep import logformat as lf
from graphsweep.parse.records import Death, Evidence, Mark

Line = tuple[int, str]  # (line number, trimmed text)


@dataclass
class CrashLines:
    """One file's death lines (filled line by line; `rows` is the number of iteration rows when a line was seen)."""

    bridge_failed: Line | None = None
    cause: Line | None = None
    cause_rows: int = -1
    fatal: Line | None = None
    fatal_rows: int = -1
    launcher: Line | None = None
    launcher_exit: int | None = None
    signal: Line | None = None
    signal_name: str | None = None
    launcher_signal: Line | None = None
    launcher_signal_name: str | None = None


def signal_name(value: str | int | None) -> str | None:
    """`9` / `-9` / `SIGKILL` / `Signals.SIGKILL` -> `SIGKILL` (None when it names no signal)."""
    text = str(value or "").removeprefix("Signals.")
    if text.startswith("SIG"):
        return text
    try:
        return signal.Signals(abs(int(text))).name
    except ValueError:
        return None


def observe(c: CrashLines, raw: bytes, lineno: int, rows: int, text: Callable[[bytes], str]) -> None:
    """Record what this line says about a death. `rows`: iteration rows of the file so far."""
    # each pattern only on lines that hold its literal: this runs on every prefiltered error line
    if c.bridge_failed is None and b"Pretrain failed" in raw and lf.BRIDGE_FAILED.search(raw):
        c.bridge_failed = (lineno, text(raw))
    if c.launcher is None and b"exitcode" in raw and (m := lf.LAUNCHER_FAILED.search(raw)):
        c.launcher, c.launcher_exit = (lineno, text(raw)), int(m.group(1))
        if c.launcher_exit < 0 and c.signal is None:
            c.signal, c.signal_name = (lineno, text(raw)), signal_name(c.launcher_exit)
    if b"Signal" in raw and (c.signal is None or c.signal == c.launcher) and (m := lf.WORKER_SIGNAL.search(raw)):
        c.signal, c.signal_name = (lineno, text(raw)), (m.group(2) or m.group(3)).decode()
    if c.launcher_signal is None and b"signal" in raw and (m := lf.LAUNCHER_SIGNAL.search(raw)):
        c.launcher_signal = (lineno, text(raw))
        c.launcher_signal_name = signal_name((m.group(1) or m.group(2)).decode())
    if (any(f in raw for f in lf.FATAL) or b"[F" in raw and lf.C10_FATAL.search(raw)) \
            and (c.fatal is None or c.fatal_rows < rows):
        c.fatal, c.fatal_rows = (lineno, text(raw)), rows
    if (b"rror" in raw or b"Exception" in raw or b"Interrupt" in raw) and (m := lf.EXC_LINE.search(raw)) \
            and b"Warning" not in m.group(1) \
            and not any(w in m.group(1) for w in lf.LAUNCHER_EXCEPTIONS) and (c.cause is None or c.cause_rows < rows):
        c.cause, c.cause_rows = (lineno, text(raw)), rows


def merge(files: Sequence[tuple[str, CrashLines, int]]) -> Death:
    """The run's death lines: for each kind the first file (in the given order) that has one. Each file comes with
    its number of iteration rows: an exception or fatal line counts only when no iteration line followed it."""
    d = Death()

    def mark(path: str, line: Line | None) -> Mark | None:
        return Mark(path, line[0], line[1]) if line else None

    for path, c, rows in files:
        d.bridge_failed = d.bridge_failed or mark(path, c.bridge_failed)
        d.cause = d.cause or (mark(path, c.cause) if c.cause_rows == rows else None)
        d.fatal = d.fatal or (mark(path, c.fatal) if c.fatal_rows == rows else None)
        if d.launcher is None and c.launcher:
            d.launcher, d.launcher_exit = mark(path, c.launcher), c.launcher_exit
        if d.signal is None and c.signal:
            d.signal, d.signal_name = mark(path, c.signal), c.signal_name
        if d.launcher_signal is None and c.launcher_signal:
            d.launcher_signal, d.launcher_signal_name = mark(path, c.launcher_signal), c.launcher_signal_name
    return d


def real_death(d: Death) -> bool:
    """A worker died of its own accord (not only because the launcher was told to stop: Ctrl-C's KeyboardInterrupt
    tracebacks and the agent's SIGTERM to its workers are the stop itself)."""
    cause = d.cause is not None and "KeyboardInterrupt" not in d.cause.text
    return bool(d.bridge_failed or d.fatal or cause or (d.launcher_exit or 0) > 0
                or (d.signal_name and d.signal_name not in ("SIGTERM", "SIGINT")))


def _earlier(a: Mark | None, b: Mark | None) -> Mark | None:
    if a is None or b is None:
        return a or b
    return b if b.file == a.file and b.line < a.line else a


def culprit(ev: Evidence) -> tuple[Mark | None, str | None]:
    """The proving line of a death no signature explains, and its error class (None: the exit code names it).

    Bridge's own line first, then the first exception or fatal line after the last iteration, then the launcher's
    reports (srun's, a signal's, torchrun's exit code), then any exception, then the log's last line."""
    d = ev.death
    if ev.straggler is not None:
        return ev.straggler, "straggler_exit"
    if d.bridge_failed is not None:
        return d.bridge_failed, "python_error"
    first = _earlier(d.cause, d.fatal)
    if first is not None:
        return first, "python_error" if first is d.cause else "fatal_error"
    if d.signal is not None and d.signal_name:
        return d.signal, f"signal:{d.signal_name}"
    if ev.srun_exit is not None or d.launcher is not None:
        return ev.srun_exit or d.launcher, None
    if d.launcher_signal is not None and d.launcher_signal_name:
        return d.launcher_signal, f"signal:{d.launcher_signal_name}"
    if ev.last_exception is not None:
        return ev.last_exception, "python_error"
    last = ev.last_line
    return (last if last is not None and not lf.is_boilerplate(last.text) else None), None


def signal_note(d: Death, exit_code: int | None) -> str:
    """`, killed by SIGKILL (signal 9)` when a signal ended a process (a launcher's report, or a shell's 128 + N)."""
    name = d.signal_name
    if name is None and exit_code is not None and 128 < exit_code < 128 + 65:
        name = signal_name(exit_code - 128)
        return f" (128 + {exit_code - 128}: {name})" if name else ""
    if name is None:
        return ""
    try:
        return f", killed by {name} (signal {int(signal.Signals[name])})"
    except KeyError:
        return f", killed by {name}"
