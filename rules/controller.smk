# The controller's lifecycle: its checks before any job runs, its hold on the sweep while it runs, and its last lines
# (the verdict counts and the report; or the command that carries on). graphsweep/run/controller.py words them.
import atexit
import contextlib
import time
from pathlib import Path

from snakemake.exceptions import IncompleteCheckpointException, WorkflowError
from snakemake.io import is_flagged
from snakemake.iocontainers import Wildcards

from graphsweep.fileio import UnusableFile
from graphsweep.plan.looks import check_looks, read_look
from graphsweep.plan.owner import SweepOwnedError, check_owner, claim
from graphsweep.run.controller import (
    done_when_interrupted,
    end_of_sweep,
    hold,
    holder,
    how_to_resume,
    release,
    written_since,
)
from graphsweep.run.sbatch import merged_slurm
from graphsweep.smk import (
    date_restored,
    file_versions,
    refuse,
    room_problem,
    slurm_first_words,
    time_limit_problem,
    unwritable,
)
from graphsweep.store.readback import check_sweep
from graphsweep.sweepspec.load import schema_property


def check_time_limit():
    """A profile's `set-resources` time limit of the run rule is one for every attempt (smk.time_limit_problem)."""
    # execution_settings is None in a dry run
    retries = getattr(workflow.execution_settings, "retries", 0)
    problem = time_limit_problem(
        workflow.resource_settings.overwrite_resources,
        attempts=retries + 1,
        wildcards=(
            Wildcards(fromdict={"results": RESULTS, "sweep": SWEEP, "run_id": r})
            for r in SUBMITTED or [""]
        ),
        most_min=schema_property("executor.timeout_min")["maximum"],
    )
    if problem:
        refuse(
            f"graphsweep: invalid workflow setting (the Snakemake profile or --set-resources): {problem}"
        )


def pending_runs():
    """The runs this invocation may submit: the first look's and those the looks taken so far asked for, less the
    ones with a result (the loop's later looks are not known yet: they may never be asked for).
    """
    runs, k = list(FIRST_LOOK), 1
    while PATHS.look(k).exists():
        runs += read_look(PATHS.look(k)).next_runs
        k += 1
    return [r for r in dict.fromkeys(runs) if not PATHS.run_json(r).exists()]


def check_this_controller():
    """The controller's own checks before anything runs (not repeated in a `run:` job's subprocess)."""
    check_time_limit()
    if problem := unwritable(PATHS.root):
        refuse(
            f"graphsweep: invalid workflow setting: results '{RESULTS}': {problem} "
            "(give a folder you can write: --config results=DIR)"
        )
    if problem := room_problem(RESULTS_DIR, config["min_free_mb"]):
        # before Snakemake writes its locks, copies a table for a job (update()) or a job writes: nothing changes
        refuse(
            f"graphsweep: results '{RESULTS}': {problem}; nothing was run or changed"
        )
    try:
        # results/{sweep} of another spec that happens to have this sweep name is never taken over (plan/owner.py);
        # an unreadable owner.json or controller.json refuses too: a guard fails closed
        check_owner(PATHS, SPEC)
        other_controller = holder(PATHS)
        # every file the jobs will read back: a damaged one stops the sweep here, before a job could fail on it
        check_sweep(PATHS, SUBMITTED, PAIRS)
        check_looks(PATHS)
    except (SweepOwnedError, UnusableFile) as error:
        refuse(f"graphsweep: {error}")
    if other_controller:
        # another live snakemake runs this sweep: one line, not Snakemake's IncompleteFilesException and its
        # --rerun-incomplete advice (graphsweep/run/controller.py)
        refuse(f"graphsweep: {other_controller}")
    if (config.get("cluster") or SPEC.executor.cluster) == "slurm":
        # a dry run names the Slurm cluster and partition; a real run on a host without Slurm stops with one line
        # (not a 'Could not detect srun' traceback per run)
        slurm_first_words(
            pending_runs(),
            merged_slurm(config.get("slurm") or {}, SPEC.executor.slurm),
            config["spec"],
            workflow.output_settings.dryrun,
        )


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
    KEPT_VERSIONS.update(file_versions(update_outputs()))
    claim(PATHS, SPEC)
    hold(PATHS)


# onstart: the update() outputs this invocation's jobs rewrite, as they were (smk.file_versions)
KEPT_VERSIONS = {}


def update_outputs():
    """The update() outputs of the jobs this invocation runs (their last good versions are what a failure keeps)."""
    return [
        str(f)
        for job in workflow.dag.needrun_jobs()
        for f in job.output
        if is_flagged(f, "update")
    ]


def date_restored_outputs():
    """After a failure: the outputs Snakemake restored get their old mtime back, so the next run remakes them."""
    date_restored(KEPT_VERSIONS)


# the workflow's folder (--directory): at exit Snakemake is back in the folder it was started from
WORKDIR = Path.cwd()


def final_outputs_now():
    """The sweep's final outputs as the looks on disk say (None while the loop has a look to take), as absolute
    paths read from the workflow's folder."""
    try:
        with contextlib.chdir(WORKDIR):
            return [Path(p).resolve() for p in get_final_outputs()]
    except (
        IncompleteCheckpointException,
        WorkflowError,
        UnusableFile,
        FileNotFoundError,
    ):
        return None


def say_if_complete(paths):
    """At exit, after Snakemake's "Nothing to be done": the sweep is complete, with its verdicts and its report.

    Absolute paths: Snakemake is back in the folder it was started from by then (--directory).
    """
    dag = workflow.dag
    if STARTED or dag is None or len(dag):
        return
    outputs = final_outputs_now()
    if outputs and all(p.exists() for p in outputs):
        print(end_of_sweep(paths, already=True), file=sys.stderr, flush=True)


def finish_sweep():
    """onsuccess: the verdict counts and the path of report.html, as the last lines of the run."""
    ENDED.append(time.time())
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
    ENDED.append(time.time())
    release(PATHS)
    date_restored_outputs()  # before unrecorded_jobs: a restored output is no output written by its job
    unrecorded = unrecorded_jobs()
    # a disk that filled up while the sweep ran (what failed its jobs: their lines are above): said first
    full = room_problem(RESULTS_DIR, max(config["min_free_mb"], 1))
    print(
        (
            how_to_resume(PATHS, run_ids=SUBMITTED, pairs=PAIRS, problem=full)
            if unrecorded is None
            else done_when_interrupted(PATHS, unrecorded)
        ),
        file=sys.stderr,
        flush=True,
    )


ENDED = []  # onsuccess or onerror ran


def stop_without_hook():
    """At exit: a controller that stopped inside Snakemake (a copy of an update() output that found no room, an
    error of Snakemake's own) runs neither onsuccess nor onerror; it ends with the same last line as onerror.
    """
    if STARTED and not ENDED:
        stop_sweep()


if workflow.is_main_process:
    check_this_controller()
    atexit.register(stop_without_hook)
    atexit.register(say_if_complete, SweepPaths(Path(RESULTS).resolve(), SWEEP))


onstart:
    start_sweep()


onsuccess:
    finish_sweep()


onerror:
    stop_sweep()
