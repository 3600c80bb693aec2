"""The run's sequence, written once: begin -> submit or reattach -> result -> at most one transient retry -> finish.

`begin_run` takes the run's config record (validated; written to config.yaml where the rule asks for it), its
settings and the launch gate's decision (a graph arm the gate skips is finished at once: its run.json says no job
ran). `run_steps` is the rest of the sequence, a generator: it yields each job to start (a `Launch`: the first may
reattach to the job the run's side file names, a retry is always a fresh one) and is sent back how that job ended (a
`JobEnd`). A job that ended without a result is thrown in as its InfraFailure (or sbatch's SubmitRefused): recorded
for `graphsweep status` and raised again, so the rule fails and Snakemake's --retries rerun that run alone.

Two drivers start the jobs and wait; neither decides anything the sequence decides:
- `execute_run`, here: the run rule's own process on Snakemake's local executor, for a local job (run/local.py);
- the graphsweep executor (run/executor.py): every run's Slurm job, waited for in one loop of the controller.

Deterministic outcomes (the training exited non-zero: OOM, config rejected, crash) are results, not failures: only
a run whose every cause in its log is a known-transient one for its arm (parse/signatures.py) runs once more.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Generator, Mapping, Sequence

from graphsweep.fileio import copy_file, link_file, link_tree, write_json, write_text
from graphsweep.layout import JobsDir, RunDir
from graphsweep.parse.ask import find_transient
from graphsweep.records import GateDecision, JobSide, LaunchPlan, RunRecord, SpecError
from graphsweep.run import gate as launch_gate
from graphsweep.run.local import run_local, stop_earlier
from graphsweep.run.sbatch import SubmitRefused, merged_slurm
from graphsweep.run.slurm import InfraFailure
from graphsweep.run.submit import SubmitSettings, record_failure, settings_from_spec
from graphsweep.store.runfiles import check_run_config, read_run_config, write_run_config


@dataclass(frozen=True)
class RunTask:
    """One run as its run rule executes it."""

    run: RunDir
    jobs: JobsDir
    run_id: str
    arm: str | None
    warmup: int | None
    plan: LaunchPlan
    settings: SubmitSettings
    attempt: int
    gate: GateDecision | None = None  # the launch gate let it run: its decision goes into run.json too


@dataclass(frozen=True)
class Launch:
    """A job for the driver to start: with `reattach`, the job the run's side file names, where there is one (an
    earlier controller may have left it queued or running); otherwise a fresh one."""

    reattach: bool


@dataclass(frozen=True)
class JobEnd:
    """How a job ended with a result: what its function returned inside the job (entry/job.py job_main), its side
    record, and the scheduler's state for run.json."""

    facts: Mapping[str, Any]
    side: JobSide
    state: str = "COMPLETED"


def begin_run(
    run: RunDir,
    jobs: JobsDir | str | Path,
    config: Mapping[str, Any] | Any | None = None,
    config_to: str | Path | None = None,
    attempt: int = 1,
    timeout_min: int | None = None,
    cluster: str | None = None,
    slurm: Mapping[str, Any] | None = None,
    gate: Sequence[Path] = (),
    say: Callable[[str], None] = print,
) -> RunTask | RunRecord:
    """The run to execute, or the finished record of a graph arm the launch gate skipped (run.json written).

    `config`: the run's launch record (config.yaml's mapping, or a record with `to_dict`), else read from the run's
    config.yaml; `config_to`: where to write it (the rule's config.yaml output). `timeout_min`, `cluster`, `slurm`:
    the rule's resources and the workflow config (the Slurm profile), over the spec's executor. `gate`: the summaries
    of the shape's eager runs, for a graph arm of a spec with `launch_gate: true` (run/gate.py)."""
    jobs = jobs if isinstance(jobs, JobsDir) else JobsDir(jobs)
    if config is None:
        cfg = read_run_config(run)
    else:
        cfg = check_run_config(dict(config.to_dict() if hasattr(config, "to_dict") else config), run.config)
        if config_to is not None:
            write_run_config(cfg, Path(config_to))
    run.ranks.mkdir(parents=True, exist_ok=True)  # a declared output: the job's per-rank files land there, if any
    plan = LaunchPlan.from_dict(cfg["launch"])
    decision = launch_gate.decide(gate, float(cfg["gate"]["margin"])) if cfg.get("gate") and gate else None
    if decision is not None and decision.skip:
        record = launch_gate.record_skipped(run, cfg["run"]["run_id"], plan, decision)
        say(f"{record.run_id}: skipped by the launch gate (no graph can win more than {decision.ceiling:.3f}x)")
        return record
    overrides: dict[str, Any] = {}
    if timeout_min:
        overrides["timeout_min"] = int(timeout_min)
    if cluster:
        overrides["cluster"] = cluster
    if slurm:
        overrides["slurm"] = merged_slurm(slurm, cfg["executor"].get("slurm") or {})  # the spec's where it says
    jobs.root.mkdir(parents=True, exist_ok=True)
    return RunTask(run, jobs, cfg["run"]["run_id"], cfg["run"].get("arm"), cfg["run"].get("warmup"), plan,
                   settings_from_spec(cfg["executor"], overrides), attempt, decision)  # fmt: skip


def run_steps(task: RunTask, say: Callable[[str], None]) -> Generator[Launch, JobEnd, RunRecord]:
    """The run from its first job to its run.json. Yields each job to start; is sent each job's end, or thrown the
    InfraFailure of a job that gave no result; returns the record it wrote."""
    try:
        record = job_record(task, (yield Launch(reattach=True)))
        transient = transient_of(task, record)
        if transient:
            first = keep_first_attempt(task, record, transient, say)
            record = replace(job_record(task, (yield Launch(reattach=False))), previous_attempts=(first,))
        finish_run(task, record)
        return record
    except (InfraFailure, SubmitRefused) as exc:
        fail_run(task, exc, say)
        raise


def job_record(task: RunTask, end: JobEnd) -> RunRecord:
    """run.json's record of a finished job; its training log (and torchrun's per-rank files) linked into the run
    folder, where the job wrote them elsewhere (the jobs folder: Snakemake never deletes it mid-job)."""
    log, side = task.run.log, end.side
    job_log = Path(side.log or log)
    if job_log.exists() and job_log.resolve() != log.resolve():
        link_file(job_log, log)
    elif not log.exists():
        write_text(log, "[graphsweep] the job produced no training output\n")
    if side.rank_log_dir and Path(side.rank_log_dir).is_dir():  # this job's per-rank files replace an earlier one's
        link_tree(Path(side.rank_log_dir), task.run.ranks)
    plan = task.plan
    wall = end.facts.get("wall_s")
    return RunRecord.from_dict({
        **end.facts, "run_id": task.run_id, "executor": task.settings.cluster, "job_id": side.job_id,
        "attempt": task.attempt, "state": end.state, "command": plan.shell(), "gpus": plan.gpus, "nodes": plan.nodes,
        "submitted_utc": side.submitted_utc, "time_limit_min": side.timeout_min,
        "gpu_seconds": round(plan.gpus * float(wall or 0.0), 3),
    })  # fmt: skip


def transient_of(task: RunTask, record: RunRecord) -> str | None:
    """The known-transient signature a failed training run died on, when every cause in its log is transient for
    its arm (a CUDA error of a graph arm is the graph's, an NCCL timeout during the capture is the capture's): the
    parser's classifier answers (parse/ask.py find_transient, from a small child process)."""
    if record.exit_code == 0 or record.previous_attempts:
        return None  # one automatic retry, never two
    return find_transient(task.run.log, arm=task.arm, warmup=task.warmup, run_info=record.to_dict())


def keep_first_attempt(task: RunTask, record: RunRecord, transient: str, say: Callable[[str], None]) -> RunRecord:
    """Before the one retry: the first job's log kept aside, its side file gone (its job ended: the retry is a fresh
    job)."""
    kept = task.jobs.transient_log(str(record.job_id))
    copy_file(task.run.log, kept)
    say(f"{task.run_id}: transient failure ({transient}); retrying once")
    task.jobs.side.unlink(missing_ok=True)
    return replace(record, log=str(kept), signature=transient)


def finish_run(task: RunTask, record: RunRecord) -> None:
    write_json(task.run.run_json, replace(record, gate=task.gate).to_dict())
    task.jobs.side.unlink(missing_ok=True)  # finished: nothing to reattach to any more
    task.jobs.failure.unlink(missing_ok=True)


def fail_run(task: RunTask, exc: InfraFailure | SubmitRefused, say: Callable[[str], None]) -> None:
    """An infrastructure failure (or sbatch's refusal), kept for `graphsweep status`; the job is forgotten only when it
    is known gone (InfraFailure.gone), else the next attempt reattaches to it."""
    record_failure(task.jobs, exc, task.attempt, gone=getattr(exc, "gone", True))
    if isinstance(exc, InfraFailure):  # a refusal says itself, once, where it stops the rule
        say(f"{task.run_id}: infrastructure failure, will be retried: {exc}")


# --------------------------------------------------------------------------------------------------
# The local driver: the run rule's own process (Snakemake's local executor) runs a local job and waits for it


def execute_run(
    run: RunDir,
    jobs: JobsDir | str | Path,
    attempt: int = 1,
    timeout_min: int | None = None,
    cluster: str | None = None,
    slurm: Mapping[str, Any] | None = None,
    say: Callable[[str], None] = print,
    gate: Sequence[Path] = (),
    config: Mapping[str, Any] | Any | None = None,
    config_to: str | Path | None = None,
) -> RunRecord:
    """The run rule in its own process: the run's sequence with a local job (submitit's local executor), waited
    for here. A run on Slurm belongs to the graphsweep executor (`--profile slurm`), which waits for all of them."""
    task = begin_run(run, jobs, config, config_to, attempt, timeout_min, cluster, slurm, gate, say)
    if isinstance(task, RunRecord):
        return task
    if task.settings.cluster == "slurm":
        raise SpecError(run.config, "executor.cluster", "slurm", SLURM_NEEDS_PROFILE)
    steps = run_steps(task, say)
    launch = next(steps)
    while True:
        try:
            if launch.reattach:  # a local job cannot be reattached: the one an earlier controller left is stopped
                stop_earlier(task.jobs, say)
            facts, side = run_local(task.run_id, task.jobs, task.plan, task.settings, task.attempt, say)
        except InfraFailure as exc:
            steps.throw(exc)  # recorded, and raised again
        try:
            launch = steps.send(JobEnd(facts, side))
        except StopIteration as done:
            return done.value


SLURM_NEEDS_PROFILE = ("a run on Slurm is submitted and waited for by the graphsweep executor, which the Slurm "
                       "profile names: run it as snakemake --profile slurm (or set cluster: local to run it on this "
                       "machine)")  # fmt: skip
