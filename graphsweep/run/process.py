"""Processes named so that a reused pid is not mistaken for them: host, pid and start time (Linux /proc).

The controller's record (run/controller.py) and a local job's side file (run/local.py) name their process this way;
`graphsweep status` asks `process_alive` whether a local job still runs, and `stop_tree` ends a local job with every
process below it. Standard library only: the run rule's process imports it.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (field 3 on), or [] where there is none."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return []


def process_start(pid: int) -> str | None:
    """The start time of a process in clock ticks since boot (/proc/PID/stat field 22), None where unknown."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else None


def process_alive(pid: Any, host: str | None = None, start: str | None = None) -> bool | None:
    """Whether the process still runs: True, False, or None when it cannot be told from here (another host)."""
    if host and host != socket.gethostname():
        return None
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return None
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    fields = _stat(pid)
    if fields and fields[0] in ("Z", "X"):
        return False  # killed, and not yet reaped by its parent: it runs no more
    return start is None or process_start(pid) in (None, start)


def this_process() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "start": process_start(pid)}


def tree(pid: int) -> list[tuple[int, str | None]]:
    """A process and every process below it, each named by pid and start time (what stop_tree may signal)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))):
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append((p, process_start(p)))
        todo += children.get(p, [])
    return out


def stop_tree(pid: int, start: str | None, grace_s: float = 10.0) -> bool:
    """Stop a process and everything below it: SIGINT to the process (submitit's local controller stops its tasks on
    it, and a task's subprocess.run kills the training), then, after `grace_s`, SIGKILL to whatever of the tree is
    left (a task killed outright would leave its training behind). True once none of them runs any more."""
    if not process_alive(pid, None, start):
        return True
    procs = tree(pid)
    _signal(pid, start, signal.SIGINT)
    for sig in (None, signal.SIGKILL):
        if sig is not None:
            for p, s in procs:
                _signal(p, s, sig)
        end = time.monotonic() + grace_s
        while time.monotonic() < end:
            if not any(process_alive(p, None, s) for p, s in procs):
                return True
            time.sleep(0.2)
    return not any(process_alive(p, None, s) for p, s in procs)


def _signal(pid: int, start: str | None, sig: int) -> None:
    if process_alive(pid, None, start):  # the same process, not a pid used again since
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
