"""Every file of a results folder that graphsweep reads back, validated where it is read.

A run's records (`config.yaml`, `run.json`, `summary.json`, `iterations.parquet`, through its RunDir) and the sweep's
tables each have one reader here or in store/tables.py; a damaged file is `UnusableFile` (graphsweep/vocab.py): one
line naming the file, what is wrong, and how to go on. `check_sweep` reads all of them the way the workflow will, so
the controller refuses a damaged folder before any job starts (rules/common.smk) and names the file again when a
job failed on one (run/controller.py how_to_resume).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from graphsweep.store.tables import KEY_COLUMNS, read_table
from graphsweep.vocab import JOB_SIDE, PAIR, RunDir, SweepPaths, UnusableFile, read_json, read_text

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: a sweep has thousands of configs


def read_yaml(path: str | Path, fix: str = "") -> Any:
    """A YAML file graphsweep wrote (or a user's side file), or UnusableFile naming the line that is wrong."""
    text = read_text(path, fix)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())[:160]
        raise UnusableFile(path, f"not valid YAML ({where}{problem})", fix) from None


def read_run_config(run: RunDir, parse: bool = False) -> dict[str, Any]:
    """config.yaml (what configure_run wrote from the plan): its `run`, `launch` and `executor` records; with `parse`
    also what the parser needs of the run (its arm and warmup)."""
    fix = run.fix_for(run.config)
    cfg = read_yaml(run.config, fix)
    if not isinstance(cfg, dict):
        raise UnusableFile(run.config, "not the mapping of run, launch and executor graphsweep writes", fix)
    for section in ("run", "launch", "executor"):
        if not isinstance(cfg.get(section), dict):
            raise UnusableFile(run.config, f"lacks its '{section}' record", fix)
    rec = cfg["run"]
    missing = [k for k in ("run_id", *(("arm", "warmup") if parse else ())) if k not in rec]
    if missing:
        raise UnusableFile(run.config, f"lacks run.{', run.'.join(missing)}", fix)
    if parse and (not isinstance(rec["warmup"], int) or isinstance(rec["warmup"], bool) or rec["warmup"] < 0):
        raise UnusableFile(run.config, f"run.warmup = {rec['warmup']!r} is not a count of iterations", fix)
    if not isinstance(cfg["launch"].get("argv"), list) or not cfg["launch"]["argv"]:
        raise UnusableFile(run.config, "launch.argv is not the command of the run", fix)
    return cfg


def read_run_info(run: RunDir) -> dict[str, Any]:
    """run.json: the job's facts (run/submit.py, run/ingest.py)."""
    return read_json(run.run_json, run.fix_for(run.run_json), required=("run_id", "executor"))


def read_summary(run: RunDir, pair: bool = False) -> dict[str, Any]:
    """summary.json: what the log says (a pair job's holds its two arms under `arms`)."""
    fix = run.fix_for(run.summary)
    summary = read_json(run.summary, fix, required=("outcome", "arms") if pair else ("outcome",))
    if pair and not (isinstance(summary["arms"], dict) and all(isinstance(a, dict) and "run_id" in a
                                                               for a in summary["arms"].values())):  # fmt: skip
        raise UnusableFile(run.summary, "its 'arms' are not the per-arm records graphsweep writes", fix)
    return summary


def read_job_side(jobs_dir: Path) -> dict[str, Any] | None:
    """`.jobs/{run_id}/job.json`, the in-flight job of a run (run/submit.py), None when there is none. Fails closed:
    an unreadable one is UnusableFile, never "no job" (a resubmission could run a second job beside a queued one)."""
    side = jobs_dir / JOB_SIDE
    if not side.exists():
        return None
    fix = (f"it records the job of run {jobs_dir.name} that may still be queued or running: look for it (squeue "
           f"--name gs-{jobs_dir.name} on Slurm), scancel it if you do not want it, then delete {side}; the next "
           "snakemake submits the run again")
    return read_json(side, fix, required=("cluster", "job_id"))


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
    for run_id in run_ids:
        run = paths.run(run_id)
        if outside := run.link_out():  # its outputs would be written through the link
            raise outside
        read_job_side(paths.jobs_dir(run_id))
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


def pair_ids(plan_rows: Iterable[tuple[str, str]]) -> list[str]:
    """The pair jobs among (run_id, arm) rows (their summary.json holds both arms)."""
    return [run_id for run_id, arm in plan_rows if arm == PAIR]
