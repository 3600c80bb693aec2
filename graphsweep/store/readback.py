"""Every file of a results folder that graphsweep reads back, validated where it is read.

A run's records (`config.yaml`, `run.json`, `summary.json` in store/runfiles.py, `iterations.parquet` here, through
its RunDir) and the sweep's tables (store/tables.py) each have one reader; a damaged file is `UnusableFile`
(graphsweep/fileio.py): one line naming the file, what is wrong, and how to go on. `check_sweep` reads all of them the way the workflow will, so
the controller refuses a damaged folder before any job starts (rules/common.smk) and names the file again when a
job failed on one (run/controller.py how_to_resume).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from graphsweep.store.runfiles import read_job_side, read_run_config, read_run_info, read_summary
from graphsweep.store.tables import KEY_COLUMNS, read_table
from graphsweep.layout import RunDir, SweepPaths
from graphsweep.fileio import UnusableFile


def read_run_iterations(run: RunDir) -> pd.DataFrame:
    return read_table(run.iterations, "iterations", fix=run.fix_for(run.iterations))


def _check_table(path: Path, table: str, fix: str) -> None:
    """The footer, the table's name and its key columns: what a reader needs, without reading every row (one open:
    a sweep has one of these per run)."""
    try:
        meta = pq.ParquetFile(path).metadata
        names = set(meta.schema.names)
        kind = (meta.metadata or {}).get(b"graphsweep.table", b"").decode() or None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise UnusableFile(path, f"not a readable Parquet file ({(str(exc).splitlines() or [''])[0]})", fix) from None
    if kind and kind != table:
        raise UnusableFile(path, f"holds the '{kind}' table, expected '{table}'", fix)
    missing = [c for c in KEY_COLUMNS[table] if c not in names]
    if missing and meta.num_rows:
        raise UnusableFile(path, f"the '{table}' table lacks its column(s) {', '.join(missing)}", fix)


def _entries(folder: Path) -> set[str]:
    """The names in a folder (links included, dangling or not); none when it is missing or not a folder."""
    try:
        with os.scandir(folder) as it:
            return {e.name for e in it}
    except OSError:
        return set()


def check_sweep(paths: SweepPaths, run_ids: Iterable[str], pairs: Iterable[str] = (), full: bool = False) -> None:
    """Read every file the workflow will read back from results/{sweep}: raise UnusableFile for the first damaged one.

    Files that do not exist yet are fine (the workflow makes them); a file that exists must be usable, so that no job
    starts on a damaged one and no good output is replaced because of one. The sweep's tables are read whole (a
    damaged page hides behind a good footer); each run's iterations.parquet by its footer and columns, or whole with
    `full` (after a job failed: which file it met)."""
    for table, path in (("plan", paths.plan), ("runs", paths.runs), ("iterations", paths.iterations),
                        ("comparison", paths.comparison)):  # fmt: skip
        if path.exists() or path.is_symlink():
            read_table(path, table)
    pairs = set(pairs)
    # a run with nothing on disk (no entry in runs/ or .jobs/, not even a dangling link) has nothing to read: one
    # listing of each folder instead of a dozen stat calls per run the loop may ask for (8,000 in a large sweep)
    on_disk = _entries(paths.run_dirs) | _entries(paths.root / SweepPaths.JOBS)
    shared_checked = False
    for run_id in run_ids:
        if run_id not in on_disk and shared_checked:
            continue
        run = paths.run(run_id)
        if outside := run.link_out():  # its outputs would be written through the link (runs/, .jobs/: the first run)
            raise UnusableFile(*outside)
        shared_checked = True
        read_job_side(paths.jobs(run_id))
        if not run.root.exists():
            continue
        if run.log.exists() and not run.log.is_file():
            raise UnusableFile(run.log, "is not a file (the run's training log is)", run.fix_for(run.run_json))
        if run.config.exists():
            read_run_config(run)
        if run.run_json.exists():
            read_run_info(run)
        if run.summary.exists():
            read_summary(run, pair=run_id in pairs)
        if run.iterations.exists():
            if full:
                read_run_iterations(run)
            else:
                _check_table(run.iterations, "iterations", run.fix_for(run.iterations))


