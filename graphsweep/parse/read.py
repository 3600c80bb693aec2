"""A run's logs into its classified summary, without the iterations table: the one reader both the parse step and the
run rule use (numpy, no pandas).

    read_run(paths, arm=..., warmup=..., run_info=...) -> Read(scans, rows, summary)
    find_transient(log, arm=..., warmup=..., run_info=...) -> the transient signature's text, or None

The run rule asks find_transient whether a failed job earns its one automatic retry: that is the classifier's own
answer (RunSummary.transient, graphsweep/parse/retry.py), from the same reading of the log and the same phases, so
the retry and the recorded outcome never disagree. A pair job's log (graphsweep/run/abba.py) is read per segment,
each with its own arm.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from graphsweep.parse.classify import classify
from graphsweep.parse.evidence import Merged, evidence, merge_rows
from graphsweep.parse.filescan import FileScan
from graphsweep.parse.records import RunSummary
from graphsweep.parse.scan import scan_file, scan_text
from graphsweep.parse.segments import split_segments
from graphsweep.parse.window import MIN_STEADY
from graphsweep.vocab import COMPLETED, EAGER, GRAPH, PAIR
from graphsweep.records import GateDecision


@dataclass
class Read:
    scans: list[FileScan]  # every attempt of every file, in order
    rows: Merged
    summary: RunSummary


def _previous(run_info: Mapping | None) -> list[dict]:
    """Earlier attempts (run.json previous_attempts) with the proving line of their signature, when readable."""
    out = []
    for p in (run_info or {}).get("previous_attempts") or []:
        d = dict(p)
        sig, log = d.get("signature"), d.get("log")
        if sig and log and Path(log).is_file():
            h = next((h for fs in scan_file(log) for h in fs.hits if h.sig.needle.decode() == sig), None)
            if h is not None:
                d.update(file=h.file, line=h.line, text=h.text)
        out.append(d)
    return out


def read_run(paths: Sequence[Path | str], *, arm: str = EAGER, warmup: int | None = None,
             run_info: Mapping | None = None, min_steady: int = MIN_STEADY,
             scans: Sequence[FileScan] | None = None, gate: GateDecision | None = None) -> Read:
    """Read every log file of one run (chronological order) and classify it. Never raises for content.
    `scans`: the files already scanned (scan_text), instead of `paths`; `gate`: the launch gate's decision."""
    if arm not in (EAGER, GRAPH):
        raise ValueError(f"arm must be 'eager' or 'graph', got {arm!r}")
    found = list(scans) if scans is not None else [fs for p in paths for fs in scan_file(p)]
    rows = merge_rows(found)
    ev = evidence(found, rows)
    summary = classify(ev, arm=arm, warmup=warmup, run_info=run_info, min_steady=min_steady,
                       previous=_previous(run_info), gate=gate)
    summary.provenance_lines = ev.provenance
    return Read(found, rows, summary)


def find_transient(log: str | bytes | Path, *, arm: str | None = None, warmup: int | None = None,
                   run_info: Mapping | None = None) -> str | None:
    """The transient signature's text when the retry policy retries this failed run (docs/failures.md), else None:
    the classifier's own `transient`. `log`: the run's log (a path, or its text); `arm` and `warmup` as in the run's
    config.yaml (a pair job's log is read segment by segment, each with its arm; an unknown arm is read as a graph
    arm: no retry for a CUDA error); `run_info`: the job's record (exit code, state) as run.json will hold it."""
    if arm == PAIR:
        return _pair_transient(log, warmup, run_info)
    arm = arm if arm in (EAGER, GRAPH) else GRAPH
    if isinstance(log, Path) or (isinstance(log, str) and "\n" not in log and Path(log).is_file()):
        return read_run([log], arm=arm, warmup=warmup, run_info=run_info).summary.transient
    if isinstance(log, str) and "\n" not in log:
        return None  # a path that is not there (the job wrote no log)
    return _summary(log, arm, warmup, run_info).transient


def _pair_transient(log: str | bytes | Path, warmup: int | None, run_info: Mapping | None) -> str | None:
    """A pair job is retried only when every segment that failed failed on a transient signature for its arm."""
    if isinstance(log, (bytes, str)) and (isinstance(log, bytes) or "\n" in log):
        text = log.decode("utf-8", "surrogateescape") if isinstance(log, bytes) else log
    else:
        try:
            text = Path(log).read_text(errors="surrogateescape")
        except OSError:
            return None
    found: list[str | None] = []
    for seg in split_segments(text):
        info = {**(run_info or {}), "exit_code": seg.exit_code, "state": None}
        s = _summary(seg.text, GRAPH if seg.arm == GRAPH else EAGER, warmup, info)
        if s.outcome != COMPLETED:
            found.append(s.transient)
    return found[0] if found and all(t is not None for t in found) else None


def _summary(text: str | bytes, arm: str, warmup: int | None, run_info: Mapping | None) -> RunSummary:
    return read_run([], arm=arm, warmup=warmup, run_info=run_info, scans=scan_text(text, "log")).summary


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m graphsweep.parse.read --transient`: read.find_transient for a process that stays small
    (graphsweep/parse/ask.py): the question {"log", "arm", "warmup", "run_info"} as JSON on stdin, {"transient"} out."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["--transient"]:
        print("usage: python -m graphsweep.parse.read --transient < question.json", file=sys.stderr)
        return 2
    q = json.load(sys.stdin)
    print(json.dumps({"transient": find_transient(Path(q["log"]), arm=q.get("arm"), warmup=q.get("warmup"),
                                                  run_info=q.get("run_info") or None)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
