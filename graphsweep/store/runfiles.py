"""A run's records that are not tables, read back and validated: `config.yaml`, `run.json` (records.RunRecord),
`summary.json` (through its RunDir) and `.jobs/{run_id}/job.json` (records.JobSide, through its JobsDir). A damaged
file is `UnusableFile` (graphsweep/fileio.py). No pandas or pyarrow here: the run rule reads these where a login node
may host one process per run in flight (tests/run/test_imports.py); the tables' readers are store/readback.py and
store/tables.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from graphsweep.layout import JobsDir, RunDir
from graphsweep.fileio import UnusableFile, read_json, read_text, write_text
from graphsweep.records import JobSide, RunRecord, RunSummary

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
    return check_run_config(read_yaml(run.config, run.fix_for(run.config)), run.config, parse, run.fix_for(run.config))


def check_run_config(cfg: Any, path: str | Path, parse: bool = False, fix: str = "") -> dict[str, Any]:
    """A run's config record (read from its config.yaml, or handed to the run rule as a mapping), checked to hold what
    the run and the parser read: UnusableFile naming `path` when it does not."""
    if not isinstance(cfg, dict):
        raise UnusableFile(path, "not the mapping of run, launch and executor graphsweep writes", fix)
    for section in ("run", "launch", "executor"):
        if not isinstance(cfg.get(section), dict):
            raise UnusableFile(path, f"lacks its '{section}' record", fix)
    rec = cfg["run"]
    missing = [k for k in ("run_id", *(("arm", "warmup") if parse else ())) if k not in rec]
    if missing:
        raise UnusableFile(path, f"lacks run.{', run.'.join(missing)}", fix)
    if parse and (not isinstance(rec["warmup"], int) or isinstance(rec["warmup"], bool) or rec["warmup"] < 0):
        raise UnusableFile(path, f"run.warmup = {rec['warmup']!r} is not a count of iterations", fix)
    if not isinstance(cfg["launch"].get("argv"), list) or not cfg["launch"]["argv"]:
        raise UnusableFile(path, "launch.argv is not the command of the run", fix)
    return cfg


def write_run_config(cfg: Mapping[str, Any], path: Path) -> None:
    """runs/{run_id}/config.yaml, whole or not at all (a temp file renamed over it)."""
    write_text(path, yaml.safe_dump(dict(cfg), sort_keys=False))


def read_run_info(run: RunDir) -> dict[str, Any]:
    """run.json: the job's facts (records.RunRecord: run/runrule.py, run/gate.py, run/ingest.py), validated, as the
    mapping its readers take."""
    fix = run.fix_for(run.run_json)
    try:
        return RunRecord.from_dict(read_json(run.run_json, fix, required=("run_id", "executor"))).to_dict()
    except ValueError as exc:
        raise UnusableFile(run.run_json, str(exc), fix) from None


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


def read_job_side(jobs: JobsDir) -> JobSide | None:
    """`.jobs/{run_id}/job.json`, the in-flight job of a run (run/submit.py, run/local.py), None when there is none.
    Fails closed: an unreadable one is UnusableFile, never "no job" (a resubmission could run a second job beside a
    queued one)."""
    side = jobs.side
    if not side.exists():
        return None
    fix = (f"it records the job of run {jobs.run_id} that may still be queued or running: look for it (squeue "
           f"--name gs-{jobs.run_id} on Slurm), scancel it if you do not want it, then delete {side}; the next "
           "snakemake submits the run again")
    try:
        return JobSide.from_dict(read_json(side, fix, required=("cluster", "job_id")))
    except ValueError as exc:
        raise UnusableFile(side, str(exc), fix) from None
