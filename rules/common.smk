# Helpers for the rules: the sweep spec, its runs, and the input functions. No rule logic lives in lambdas.
import re
import sys
from pathlib import Path

from snakemake.utils import validate

from graphsweep.spec import SpecError, load_spec, runs_by_id
from graphsweep.plan import submitted_run_ids
from graphsweep.repeats import RepeatsError, apply_extra, extra_repeats_path


validate(config, "../configs/schema/config.schema.yaml")

try:
    SPEC = load_spec(config["spec"])
except SpecError as error:
    # A broken spec stops the workflow before anything is planned or submitted.
    sys.exit(f"graphsweep: invalid sweep spec: {error}")

SWEEP = SPEC.name
RESULTS = config.get("results", "results")
try:
    # more repeats for inconclusive cells, asked for by `graphsweep more-repeats` (results/{sweep}/extra_repeats.yaml)
    SPEC = apply_extra(SPEC, RESULTS)
except RepeatsError as error:
    sys.exit(f"graphsweep: {error}")
RUNS = runs_by_id(SPEC)
SUBMITTED = submitted_run_ids(SPEC)


wildcard_constraints:
    results=re.escape(RESULTS),
    sweep=re.escape(SWEEP),
    run_id=r"[A-Za-z0-9][A-Za-z0-9.+_~-]*",


def get_final_outputs():
    names = ["plan.parquet", "runs.parquet", "iterations.parquet", "comparison.parquet", "report.md", "report.html"]
    # Every run's own files are targets too: Snakemake does not remake a deleted intermediate whose consumers are up
    # to date, so without them deleting results/{sweep}/runs/{run_id}/ would never rerun that run.
    per_run = [f"{RESULTS}/{SWEEP}/runs/{run_id}/{name}" for run_id in SUBMITTED for name in ("run.json", "summary.json")]
    return [f"{RESULTS}/{SWEEP}/{name}" for name in names] + per_run


def get_run(wildcards):
    try:
        return RUNS[wildcards.run_id]
    except KeyError:
        raise ValueError(f"run '{wildcards.run_id}' is not part of sweep '{SWEEP}' ({config['spec']})") from None


def get_run_config(wildcards):
    """What configure_run writes: the run's settings and exact command (a params trigger when they change)."""
    from graphsweep.plan import run_config

    return run_config(get_run(wildcards))


def get_summaries(wildcards):
    return [f"{RESULTS}/{SWEEP}/runs/{run_id}/summary.json" for run_id in SUBMITTED]


def get_run_dirs(wildcards):
    return [f"{RESULTS}/{SWEEP}/runs/{run_id}" for run_id in SUBMITTED]


def get_attempt(wildcards, attempt):
    return attempt


def get_timeout_min(wildcards, attempt):
    """Each retry gets more time: a run that hit its limit before the measurement window is retried, not recorded."""
    return int(SPEC.executor.get("timeout_min", 10)) * attempt


def get_run_gpus(wildcards):
    return get_run(wildcards).gpus


def get_extra_repeats_file(wildcards):
    """The plan is remade when `graphsweep more-repeats` writes this file (only new runs follow from it)."""
    path = extra_repeats_path(RESULTS, SWEEP)
    return [str(path)] if path.exists() else []
