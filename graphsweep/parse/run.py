"""Parse one run: every log file of it (ranks, restarts, requeued attempts), merged by iteration, then classified.

    parse_run(paths, arm=..., warmup=..., run_info=...) -> ParsedRun(iterations frame, RunSummary)

graphsweep/parse/read.py reads and classifies (scan, merge, evidence, classify); this adds the iterations table
(iterations.parquet's rows) and the time stamps of the first and last iteration line. Pass files in chronological
order. Never raises for content: a bad log is a result (unparseable), not a crash. What later stages need of the
logs beyond the outcome (the training processes' provenance lines, the first and last iteration's time stamps) goes
into the summary too: no stage after this one opens a log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from graphsweep import logformat as lf
from graphsweep.parse.evidence import Merged, merge_memory
from graphsweep.parse.filescan import FileScan
from graphsweep.parse import work
from graphsweep.parse.read import read_run
from graphsweep.parse.records import RunSummary
from graphsweep.parse.window import MIN_STEADY
from graphsweep.records import GateDecision
from graphsweep.store.tables import ITERATION_COLUMNS
from graphsweep.vocab import EAGER


@dataclass
class ParsedRun:
    iterations: pd.DataFrame
    summary: RunSummary


def _frame(scans: Sequence[FileScan], rows: Merged, run_id: str) -> pd.DataFrame:
    """iterations.parquet's rows of the run: one per iteration, with the memory line of that iteration."""
    df = pd.DataFrame({
        "iteration": rows.iteration.astype("int64"), "elapsed_ms": rows.elapsed_ms, "tflops": rows.tflops,
        "loss": rows.loss, "grad_norm": rows.grad_norm, "source_file": _strings([fs.path for fs in scans], rows.scan),
        "line": rows.line.astype("int64"), "skipped_iterations": rows.skipped,
    })
    memory = merge_memory(scans)
    mem = np.full((len(df), len(lf.MEM_FIELDS)), np.nan)
    if memory and len(df):
        # iterations are unique and sorted here: a binary search, not a dict of every row (1.35 M rows: ~100 MB)
        its = rows.iteration
        keys = np.fromiter(memory.keys(), dtype=np.int64, count=len(memory))
        vals = np.asarray(list(memory.values()), dtype=np.float64)
        k = np.minimum(np.searchsorted(its, keys), len(its) - 1)
        hit = its[k] == keys
        mem[k[hit]] = vals[hit]
    df["mem_allocated_gb"] = mem[:, 0]
    df["mem_max_allocated_gb"] = mem[:, 1]
    df["mem_max_reserved_gb"] = mem[:, 2]
    df["mem_reserved_gb"] = mem[:, 3]
    df["run_id"] = _strings([run_id], np.zeros(len(df), dtype=np.int64))
    return df[ITERATION_COLUMNS]


def _strings(values: Sequence[str], codes: np.ndarray) -> pd.Series:
    """values[codes] as a pandas string column, built in Arrow (a file name per row: 1.35 M Python strings are slow)."""
    text = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(list(values) or [""], pa.string()))
    return pd.Series(pd.array(text.cast(pa.string()), dtype="string"))


def _stamp(path: str, offset: int, iteration: int) -> str | None:
    """The time stamp on the iteration line at byte `offset` of `path`, as it was printed."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.readline()
    except OSError:
        return None
    for m in lf.ITER_STAMP.finditer(text):  # ranks glued into one line: the stamp of this iteration's head
        if int(m[2]) == iteration:
            return m[1].decode()
    return None


def _stamps(scans: Sequence[FileScan], rows: Merged) -> tuple[str | None, str | None]:
    """The time stamps of the first and the last iteration row (store/timeparts.py splits the job's time there)."""
    if not len(rows):
        return None, None
    return tuple(_stamp(scans[int(rows.scan[k])].path, int(rows.offset[k]), int(rows.iteration[k]))  # type: ignore
                 for k in (0, len(rows) - 1))


def parse_run(paths: Sequence[Path | str], *, arm: str = EAGER, warmup: int | None = None,
              run_info: Mapping | None = None, run_id: str = "", min_steady: int = MIN_STEADY,
              given: Mapping[str, str] | None = None, gate: GateDecision | None = None) -> ParsedRun:
    """Parse every log file of one run (chronological order) and classify it. Never raises for content. `given`: what
    its config.yaml gave it (parse/work.py given_config), for the configuration keys its log does not print; `gate`:
    the launch gate's decision that run.json records (its reader turns it into the record, once)."""
    read = read_run(paths, arm=arm, warmup=warmup, run_info=run_info, min_steady=min_steady, gate=gate)
    summary = read.summary
    summary.first_iteration_stamp, summary.last_iteration_stamp = _stamps(read.scans, read.rows)
    df = _frame(read.scans, read.rows, run_id)
    work.record(summary, work.of_run(paths, df, summary.steady_first, summary.steady_last, given))
    return ParsedRun(df, summary)
