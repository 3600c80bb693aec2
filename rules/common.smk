# Helpers for the rules: the sweep spec, its planned runs, the results layout and the input functions.
# No rule logic lives in lambdas; every path comes from graphsweep.layout.SweepPaths.
import atexit
import re
import sys
import time
from pathlib import Path

from snakemake.common.configfile import load_configfile
from snakemake.exceptions import WorkflowError
from snakemake.settings.enums import RerunTrigger
from snakemake.utils import validate

from graphsweep.plan.owner import SweepOwnedError, check_owner, claim
from graphsweep.plan.planner import gate_inputs, submitted
from graphsweep.plan.sweep_plan import plan_for, stale_configs
from graphsweep.resources import CONFIG_SCHEMA, data_file
from graphsweep.plan.repeats import RepeatsError
from graphsweep.run.controller import (
    done_when_interrupted,
    end_of_sweep,
    hold,
    holder,
    how_to_resume,
    release,
    written_since,
)
from graphsweep.run.ingest import IngestError, match_files, unseeded_note
from graphsweep.store.readback import check_sweep
from graphsweep.smk import (
    config_problem,
    refuse,
    setting_file,
    unsafe_setting,
    unwritable,
)
from graphsweep.layout import SweepPaths
from graphsweep.fileio import UnusableFile
from graphsweep.records import SpecError
from graphsweep.vocab import PAIR


def setting_problem(key, problem):
    """One line naming the file (or --config) the setting comes from, its key and value, and what is wrong."""
    # the profile's config files are applied after the Snakefile's own configfile
    files = [
        *[
            f
            for f in workflow.configfiles
            if f not in workflow.config_settings.configfiles
        ],
        *workflow.config_settings.configfiles,
    ]
    where = setting_file(key, workflow.config_settings.config, files, load_configfile)
    return f"graphsweep: invalid workflow setting ({where}): {problem}"


# a line break in a partition or a comment would become a shell line of every batch script; a NaN passes every bound
if found := unsafe_setting(config):
    refuse(setting_problem(*found))
try:
    validate(config, str(data_file(CONFIG_SCHEMA)))
except WorkflowError as error:
    # a mistyped --config (archive_logs=maybe, cluster=slrum, specs=...), an interval out of its range: one line
    refuse(setting_problem(*config_problem(error)))

try:
    # a broken spec stops the workflow before anything is planned or submitted. Every run is planned once for this
    # invocation (graphsweep/plan/sweep_plan.py, as `graphsweep plan` and `check-spec` plan it): the spec with the
    # repeats `graphsweep more-repeats` asked for (results/{sweep}/extra_repeats.yaml); the executor the rules use
    # decides whether a graph arm needs a CUDA device on this machine; a run beyond the time limit, a sweep over its
    # GPU-hour budget (what its finished runs took, the rest's estimates corrected by them) is refused before any job
    SWEEP_PLAN = plan_for(config["spec"], config["results"], config.get("cluster"))
except (SpecError, RepeatsError) as error:
    refuse(f"graphsweep: invalid sweep spec: {error}")

SPEC = SWEEP_PLAN.spec
PLAN = SWEEP_PLAN.planned
SWEEP = SPEC.name
RESULTS = config["results"]
PATHS = SWEEP_PLAN.paths  # this sweep's files
PATTERN = SweepPaths("{results}", "{sweep}")  # the same files as rule patterns
PLANNED = {p.run.run_id: p for p in PLAN}
PLAN_DIGEST = SWEEP_PLAN.digest()  # the plan rule's trigger
STALE = stale_configs(
    SWEEP_PLAN
)  # the plan job's config.yaml outputs: missing, or another config than the plan's
SUBMITTED = [p.run.run_id for p in submitted(PLAN)]
PAIRS = [
    p.run.run_id for p in PLAN if p.run.arm == PAIR
]  # their summary.json holds both arms


wildcard_constraints:
    results=re.escape(RESULTS),
    sweep=re.escape(SWEEP),
    run_id=r"[A-Za-z0-9][A-Za-z0-9.+_~-]*",


def is_ingest():
    """A spec with a `source` block takes its runs from existing logs: rules/ingest.smk, no job is submitted."""
    return SPEC.is_ingest


def get_final_outputs():
    tables = [
        PATHS.plan,
        PATHS.runs,
        PATHS.iterations,
        PATHS.comparison,
        PATHS.report_md,
        PATHS.report_html,
    ]
    # Every run's own files are targets too: Snakemake does not remake a deleted intermediate whose consumers are up
    # to date, so without them deleting results/{sweep}/runs/{run_id}/ would never rerun that run.
    per_run = [
        path
        for run_id in SUBMITTED
        for path in (
            PATHS.run_json(run_id),
            PATHS.run_summary(run_id),
            PATHS.run_iterations(run_id),
        )
    ]
    return [str(p) for p in tables + per_run]


def get_planned(wildcards):
    try:
        return PLANNED[wildcards.run_id]
    except KeyError:
        raise ValueError(
            f"run '{wildcards.run_id}' is not part of sweep '{SWEEP}' ({config['spec']})"
        ) from None


def get_kept_configs(wildcards=None):
    """The changed config.yaml files the plan job keeps as their jobs ran them: all of them when Snakemake's params
    trigger is off (`--rerun-triggers mtime`: tools/rederive_examples.sh re-derives the committed sweeps so), as a
    per-run params trigger was the only thing that rewrote them. Known once the DAG is built (the settings are).
    """
    return sorted(kept_configs())


def kept_configs():
    if not KEPT:  # once, as the DAG is built
        keep = RerunTrigger.PARAMS not in workflow.rerun_triggers
        KEPT.append({r for r in STALE if keep and PATHS.run_config(r).is_file()})
    return KEPT[0]


KEPT = []


def get_run_config(wildcards):
    """A run's config.yaml; ancient() when the plan job keeps it, so that the run does not wait for that job."""
    path = str(PATTERN.run_config(wildcards.run_id)).format(
        results=wildcards.results, sweep=wildcards.sweep
    )
    return ancient(path) if wildcards.run_id in kept_configs() else path


def get_stale_configs():
    """The plan rule's outputs besides plan.parquet: the config.yaml of the runs whose config is missing or changed
    (update(): a plan job that fails leaves the last version in place)."""
    return [update(str(PATHS.run_config(run_id))) for run_id in STALE]


def get_gate_summaries(wildcards):
    """spec launch_gate: a graph run waits for its shape's eager runs' summaries (their GPU-busy diagnostic)."""
    planned = get_planned(wildcards)
    return [str(PATHS.run_summary(r)) for r in gate_inputs(planned, PLAN)]


def get_summaries(wildcards):
    return [str(PATHS.run_summary(run_id)) for run_id in SUBMITTED]


def get_run_jsons(wildcards):
    return [str(PATHS.run_json(run_id)) for run_id in SUBMITTED]


def get_run_iterations(wildcards):
    return [str(PATHS.run_iterations(run_id)) for run_id in SUBMITTED]


def get_run_ranks(wildcards):
    """A run's folder of further log files (the run rule's output): a run folder written before the run rule made
    one has none, and its parse then declares none (so that it is not run again for it).
    """
    run = PATHS.run(wildcards.run_id)
    return [str(run.ranks)] if run.ranks.exists() or not run.run_json.exists() else []


def get_sweep_dir(wildcards):
    """The sweep's results folder (archive packs all of it; the controller's filesystem, the rule is local)."""
    return str(PATHS.root)


def get_jobs_dir(wildcards):
    return str(PATHS.jobs_dir(wildcards.run_id))


def get_attempt(wildcards, attempt):
    return attempt


def get_timeout_min(wildcards, attempt):
    """Each retry gets more time: a run that hit its limit before the measurement window is retried, not recorded."""
    return SPEC.executor.timeout_min * attempt


def get_run_gpus(wildcards):
    return get_planned(wildcards).run.gpus


def get_extra_repeats_file(wildcards):
    """The plan is remade when `graphsweep more-repeats` writes this file (only new runs follow from it)."""
    return [str(PATHS.extra_repeats)] if PATHS.extra_repeats.exists() else []


def check_this_controller():
    """The controller's own checks before anything runs (not repeated in a `run:` job's subprocess)."""
    if problem := unwritable(PATHS.root):
        refuse(
            f"graphsweep: invalid workflow setting: results '{RESULTS}': {problem} "
            "(give a folder you can write: --config results=DIR)"
        )
    try:
        # results/{sweep} of another spec that happens to have this sweep name is never taken over (plan/owner.py);
        # an unreadable owner.json or controller.json refuses too: a guard fails closed
        check_owner(PATHS, SPEC)
        other_controller = holder(PATHS)
        # every file the jobs will read back: a damaged one stops the sweep here, before a job could fail on it
        check_sweep(PATHS, SUBMITTED, PAIRS)
    except (SweepOwnedError, UnusableFile) as error:
        refuse(f"graphsweep: {error}")
    if other_controller:
        # another live snakemake runs this sweep: one line, not Snakemake's IncompleteFilesException and its
        # --rerun-incomplete advice (graphsweep/run/controller.py)
        refuse(f"graphsweep: {other_controller}")


STARTED = (
    []
)  # onstart ran: Snakemake found jobs to run (it skips every hook when there is nothing to do)


def slurm_needs_its_executor():
    """Runs that go to Slurm are submitted and waited for by the graphsweep executor, which the Slurm profile names:
    on any other executor one line says so, before any job (known once the DAG and the executor are).
    """
    cluster = config.get("cluster") or SPEC.executor.cluster
    if cluster != "slurm" or workflow.executor_plugin.name == "graphsweep":
        return
    if any(job.rule.name == "run" for job in workflow.dag.needrun_jobs()):
        where = (
            "--config cluster=slurm"
            if config.get("cluster")
            else f"executor.cluster: slurm in {SPEC.path}"
        )
        refuse(
            f"graphsweep: the runs of sweep '{SWEEP}' go to Slurm ({where}), which needs the graphsweep executor: "
            "run snakemake --profile slurm (its cluster.yaml says where the jobs go); nothing was submitted"
        )


def start_sweep():
    """onstart: this spec owns results/{sweep} and this controller holds the sweep until it stops."""
    slurm_needs_its_executor()
    STARTED.append(time.time())
    claim(PATHS, SPEC)
    hold(PATHS)


def say_if_complete(paths, final_outputs):
    """At exit, after Snakemake's "Nothing to be done": the sweep is complete, with its verdicts and its report.

    Absolute paths: Snakemake is back in the folder it was started from by then (--directory).
    """
    dag = workflow.dag
    if STARTED or dag is None or len(dag):
        return
    if all(p.exists() for p in final_outputs):
        print(end_of_sweep(paths, already=True), file=sys.stderr, flush=True)


def finish_sweep():
    """onsuccess: the verdict counts and the path of report.html, as the last lines of the run."""
    release(PATHS)
    print(end_of_sweep(PATHS), file=sys.stderr, flush=True)


def unrecorded_jobs():
    """The rules of the jobs Snakemake did not record as finished, when every one of them wrote all its outputs in
    this invocation (Ctrl-C as the last jobs ended: Snakemake waits for them, then stops); None otherwise.
    """
    # `all` writes nothing: it is done once its inputs are
    left = [job for job in workflow.dag.needrun_jobs() if job.output]
    if STARTED and all(written_since(job.output, STARTED[0]) for job in left):
        return [job.rule.name for job in left]
    return None


def stop_sweep():
    """onerror (a failed job, or Ctrl-C): the damaged file a job met, if any, and the exact command that carries on;
    or, when every job had finished after all, what the sweep found."""
    release(PATHS)
    unrecorded = unrecorded_jobs()
    print(
        (
            how_to_resume(PATHS, run_ids=SUBMITTED, pairs=PAIRS)
            if unrecorded is None
            else done_when_interrupted(PATHS, unrecorded)
        ),
        file=sys.stderr,
        flush=True,
    )


def get_sweep_plan(wildcards):
    """The plan job's param: this invocation's one plan (a record Snakemake cannot serialise, so never a trigger)."""
    return SWEEP_PLAN


if workflow.is_main_process:
    check_this_controller()
    atexit.register(
        say_if_complete,
        SweepPaths(Path(RESULTS).resolve(), SWEEP),
        [Path(p).resolve() for p in get_final_outputs()],
    )


onstart:
    start_sweep()


onsuccess:
    finish_sweep()


onerror:
    stop_sweep()
