"""A run's records that are not tables, read back and validated: `config.yaml`, `run.json`, `summary.json` (through
its RunDir) and `.jobs/{run_id}/job.json` (through its JobsDir). A damaged file is `UnusableFile`
(graphsweep/fileio.py). No pandas or pyarrow here: the run rule reads these where a login node may host one process per
run in flight (tests/run/test_imports.py); the tables' readers are store/readback.py and store/tables.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from graphsweep.layout import JobsDir, RunDir
from graphsweep.fileio import UnusableFile, read_json, read_text, write_text
from graphsweep.records import RunSummary

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
    """config.yaml (what the run rule wrote from the plan): its `run`, `launch` and `executor` records; with `parse`
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


def write_run_config(run: RunDir, record: Any) -> None:
    """runs/{run_id}/config.yaml, whole or not at all: the launch record the run rule got from the plan (its params),
    written by the run rule itself as its first output, so that Snakemake's params trigger keeps the rerun books."""
    write_text(run.config, yaml.safe_dump(dict(record), sort_keys=False))


def read_run_info(run: RunDir) -> dict[str, Any]:
    """run.json: the job's facts (run/runrule.py, run/ingest.py)."""
    return read_json(run.run_json, run.fix_for(run.run_json), required=("run_id", "executor"))


def read_summary(run: RunDir, pair: bool = False) -> dict[str, Any]:
    """summary.json: what the log says, every field as records.RunSummary holds it (a pair job's holds its two arms,
    each such a record, under `arms`)."""
    fix = run.fix_for(run.summary)
    summary = read_json(run.summary, fix, required=("outcome", "arms") if pair else ("outcome",))
    if pair and not (isinstance(summary["arms"], dict) and all(isinstance(a, dict) and "run_id" in a
                                                               for a in summary["arms"].values())):  # fmt: skip
        raise UnusableFile(run.summary, "its 'arms' are not the per-arm records graphsweep writes", fix)
    records = {f"arms.{arm}.": a for arm, a in summary["arms"].items()} if "arms" in summary else {"": summary}
    for where, record in records.items():
        try:
            RunSummary.from_dict(record)
        except ValueError as exc:
            raise UnusableFile(run.summary, f"{where}{exc}", fix) from None
    return summary


def read_job_side(jobs: JobsDir) -> dict[str, Any] | None:
    """`.jobs/{run_id}/job.json`, the in-flight job of a run (run/submit.py), None when there is none. Fails closed:
    an unreadable one is UnusableFile, never "no job" (a resubmission could run a second job beside a queued one)."""
    side = jobs.side
    if not side.exists():
        return None
    fix = (f"it records the job of run {jobs.run_id} that may still be queued or running: look for it (squeue "
           f"--name gs-{jobs.run_id} on Slurm), scancel it if you do not want it, then delete {side}; the next "
           "snakemake submits the run again")
    return read_json(side, fix, required=("cluster", "job_id"))
