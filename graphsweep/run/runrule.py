"""The run rule: one run's job from its config.yaml to its run.json, in steps that both ways of waiting share.

- `begin_run`: read the run's config.yaml (validated) and its settings; a graph arm the launch gate skips is
  recorded at once (its run.json says no job ran and holds the decision; a run the gate lets run keeps it too);
- a job is submitted or reattached (run/submit.py) and waited for: by the run rule's own process (`execute_run`,
  Snakemake's local executor: one process per run) or by the graphsweep executor's one loop for all runs
  (run/executor.py);
- `job_record`: the job's result as run.json's record, its logs linked into the run folder;
- `retry_transient`: a run whose training failed on a known-transient signature for its arm (a node or network
  fault, docs/failures.md) runs once more, its first log kept;
- `finish_run` writes run.json and forgets the job; `fail_run` records an infrastructure failure (the rule fails and
  Snakemake's --retries reruns only that run, with more time).

Deterministic outcomes (the training exited non-zero: OOM, config rejected, crash) are results, not failures.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from graphsweep.fileio import copy_file, link_file, link_tree, write_json, write_text
from graphsweep.parse.ask import find_transient
from graphsweep.run import gate as launch_gate
from graphsweep.run.sbatch import SubmitRefused, merged_slurm
from graphsweep.run.slurmstate import InfraFailure
from graphsweep.run.submit import (
    SubmitSettings,
    read_side,
    record_failure,
    run_local,
    settings_from_spec,
    slurm_outcome,
    submit_slurm,
    waiting_limits,
)
from graphsweep.run.watch import SlurmWaiter, still_there
from graphsweep.store.runfiles import read_run_config
from graphsweep.layout import JobsDir, RunDir
from graphsweep.records import GateDecision, LaunchPlan


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


def begin_run(
    run: RunDir,
    jobs: JobsDir | str | Path,
    attempt: int = 1,
    timeout_min: int | None = None,
    cluster: str | None = None,
    slurm: Mapping[str, Any] | None = None,
    gate: Sequence[Path] = (),
    say: Callable[[str], None] = print,
) -> RunTask | dict[str, Any]:
    """The run to execute, or the run.json record of a graph arm the launch gate skipped (written already: run/gate.py
    record_skipped).

    `timeout_min`, `cluster`, `slurm`: the rule's resources and the workflow config (the Slurm profile), over the
    spec's executor. `gate`: the summaries of the shape's eager runs, for a graph arm of a spec with
    `launch_gate: true` (run/gate.py)."""
    jobs = jobs if isinstance(jobs, JobsDir) else JobsDir(jobs)
    cfg = read_run_config(run)
    run.ranks.mkdir(parents=True, exist_ok=True)  # a declared output: the job's per-rank files land there, if any
    plan = LaunchPlan.from_dict(cfg["launch"])
    decision = launch_gate.decide(gate, float(cfg["gate"]["margin"])) if cfg.get("gate") and gate else None
    if decision is not None and decision.skip:
        record = launch_gate.record_skipped(run, cfg["run"]["run_id"], plan, decision)
        say(f"{record['run_id']}: skipped by the launch gate (no graph can win more than {decision.ceiling:.3f}x)")
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


def job_record(task: RunTask, facts: Mapping[str, Any], side: Mapping[str, Any], state: str) -> dict[str, Any]:
    """run.json's record of a finished job; its training log (and torchrun's per-rank files) linked into the run
    folder, where the job wrote them elsewhere (the jobs folder: Snakemake never deletes it mid-job)."""
    log = task.run.log
    job_log = Path(side.get("log") or log)
    if job_log.exists() and job_log.resolve() != log.resolve():
        link_file(job_log, log)
    elif not log.exists():
        write_text(log, "[graphsweep] the job produced no training output\n")
    rank_dir = side.get("rank_log_dir")
    if rank_dir and Path(rank_dir).is_dir():  # this job's per-rank files replace an earlier attempt's
        link_tree(Path(rank_dir), task.run.ranks)
    plan = task.plan
    record = {
        "run_id": task.run_id,
        "executor": task.settings.cluster,
        "job_id": str(side["job_id"]),
        "attempt": task.attempt,
        "state": state,
        "command": plan.shell(),
        "gpus": plan.gpus,
        "nodes": plan.nodes,
        "submitted_utc": side.get("submitted_utc"),
        "time_limit_min": side.get("timeout_min"),
        **facts,
    }
    record["gpu_seconds"] = round(plan.gpus * float(record.get("wall_s") or 0.0), 3)
    return record


def transient_of(task: RunTask, record: Mapping[str, Any]) -> str | None:
    """The known-transient signature a failed training run died on, when every cause in its log is transient for
    its arm (a CUDA error of a graph arm is the graph's, an NCCL timeout during the capture is the capture's)."""
    if record["exit_code"] == 0 or record.get("previous_attempts"):
        return None  # one automatic retry, never two
    return find_transient(task.run.log, arm=task.arm, warmup=task.warmup, run_info=record)


def keep_first_attempt(task: RunTask, record: Mapping[str, Any], transient: str, say: Callable[[str], None]) -> dict:
    """Before the one retry: the first job's log kept aside, its side file gone (the retry is a fresh job)."""
    kept = task.jobs.transient_log(str(record["job_id"]))
    copy_file(task.run.log, kept)
    say(f"{task.run_id}: transient failure ({transient}); retrying once")
    task.jobs.side.unlink(missing_ok=True)
    return {**record, "log": str(kept), "signature": transient}


def finish_run(task: RunTask, record: Mapping[str, Any]) -> None:
    if task.gate is not None:
        record = {**record, "gate": task.gate.to_dict()}
    write_json(task.run.run_json, record)
    task.jobs.side.unlink(missing_ok=True)  # finished: nothing to reattach to any more
    task.jobs.failure.unlink(missing_ok=True)


def fail_run(task: RunTask, exc: InfraFailure | SubmitRefused, say: Callable[[str], None]) -> None:
    record_failure(task.jobs, exc, task.attempt)
    if isinstance(exc, InfraFailure):  # a refusal says itself, once, where it stops the rule
        say(f"{task.run_id}: infrastructure failure, will be retried: {exc}")


# --------------------------------------------------------------------------------------------------
# The run rule's own process waits (Snakemake's local executor)


class _Interrupted(BaseException):
    def __init__(self, signum: int):
        self.signum = signum


def _raise_interrupted(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise _Interrupted(signum)


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _wait_slurm(task: RunTask, say: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any], str]:
    s, run_id = task.settings, task.run_id
    waiter: SlurmWaiter | None = None
    # Signal handlers exist only in the main thread (the rule's script); elsewhere (a library caller) none are set.
    main = threading.current_thread() is threading.main_thread()
    old = {sig: signal.signal(sig, _raise_interrupted) for sig in _SIGNALS} if main else {}
    try:
        side = read_side(task.jobs)
        if side and side.get("cluster") == "slurm":
            waiter = SlurmWaiter(run_id, side, s.state_cache(), say, waiting_limits(s))
            view = None if waiter.pickle.exists() else waiter.look_now()
            if waiter.pickle.exists():  # looked at after sacct too: a job may finish between the two looks
                say(f"reattaching {run_id} to Slurm job {side['job_id']} (finished, result present)")
            elif still_there(view):
                state = view.record.state if view.record else "unknown: sacct failed"
                say(f"reattaching {run_id} to Slurm job {side['job_id']} (state {state})")
            else:
                ended = view.record.state if view.record else "without a sacct record"
                say(f"previous Slurm job {side['job_id']} of {run_id} ended {ended} without a result; submitting a "
                    "new one")  # fmt: skip
                waiter.forget()
                waiter = None
        if waiter is None:
            side = submit_slurm(run_id, task.plan, task.jobs, s, task.attempt, say)
            waiter = SlurmWaiter(run_id, side, s.state_cache(), say, waiting_limits(s))
        state = waiter.wait()
    except _Interrupted as exc:
        if waiter is not None:
            waiter.interrupted()
        raise SystemExit(128 + exc.signum) from None
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    try:
        facts = slurm_outcome(waiter.side)
    finally:
        waiter.forget()
    return facts, dict(waiter.side), state


def submit_and_wait(task: RunTask, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Submit (or reattach to) the job of one run, wait for it here, and return its run.json record."""
    try:
        if task.settings.cluster == "slurm":
            facts, side, state = _wait_slurm(task, say)
        else:
            facts, side, state = run_local(task.run_id, task.jobs, task.plan, task.settings, task.attempt, say)
    except (InfraFailure, SubmitRefused) as exc:
        fail_run(task, exc, say)
        raise
    return job_record(task, facts, side, state)


def execute_run(
    run: RunDir,
    jobs: JobsDir | str | Path,
    attempt: int = 1,
    timeout_min: int | None = None,
    cluster: str | None = None,
    slurm: Mapping[str, Any] | None = None,
    say: Callable[[str], None] = print,
    gate: Sequence[Path] = (),
) -> dict[str, Any]:
    """The run rule in its own process: submit (or reattach), wait, retry once on a known-transient signature,
    write run.json. Reads the run's config.yaml and writes its run.json and log.txt (the rule's declared files)."""
    task = begin_run(run, jobs, attempt, timeout_min, cluster, slurm, gate, say)
    if not isinstance(task, RunTask):
        return task
    record = submit_and_wait(task, say)
    transient = transient_of(task, record)
    if transient:
        first = keep_first_attempt(task, record, transient, say)
        record = submit_and_wait(task, say)
        record["previous_attempts"] = [first]
    finish_run(task, record)
    return record
