"""The run rule's question to the classifier, from a process that stays small: does this failed job earn its one
automatic retry? Standard library only.

On Snakemake's local executor one run-rule process waits for each run in flight, and what it imports is most of its
memory (tests/run/test_imports.py keeps numpy and Arrow out of it). The answer must still be the classifier's own
(graphsweep/parse/read.py find_transient: the parse step's reader, its phase model, RunSummary.transient), so it is
asked of a short-lived child process that imports them: `python -m graphsweep.parse.read --transient`, the question
as JSON on its stdin, the answer as JSON on its stdout. A caller that has numpy loaded anyway (the controller's
executor) may call read.find_transient itself: the same function.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

from graphsweep.resources import SOURCE_ROOT

TIMEOUT_S = 600  # a 1 GB log reads in well under a minute (benchmarks/parse_throughput.py)


def find_transient(log: str | Path, *, arm: str | None = None, warmup: int | None = None,
                   run_info: Mapping[str, Any] | None = None) -> str | None:
    """The transient signature's text when the retry policy retries this failed run, else None (read.find_transient,
    asked of a child process). A child that cannot answer is no retry, said on stderr: the run keeps its result."""
    question = json.dumps({"log": str(log), "arm": arm, "warmup": warmup, "run_info": dict(run_info or {})},
                          default=str)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SOURCE_ROOT), os.environ.get("PYTHONPATH"))
                                                       if p)}  # the child imports this very graphsweep
    try:
        out = subprocess.run([sys.executable, "-m", "graphsweep.parse.read", "--transient"], input=question, env=env,
                             capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"graphsweep: could not ask the classifier about {log} ({exc}): no automatic retry", file=sys.stderr)
        return None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"graphsweep: the classifier failed on {log} ({last}): no automatic retry", file=sys.stderr)
        return None
    return json.loads(out.stdout)["transient"]
