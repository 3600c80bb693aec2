"""Processes named so that a reused pid is not mistaken for them: host, pid and start time (Linux /proc).

The controller's record (run/controller.py) and a local job's side file (run/submit.py) name their process this way;
`graphsweep status` asks `process_alive` whether a local job still runs. Standard library only: the run rule's
process imports it.
"""

from __future__ import annotations

import os
import socket
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
