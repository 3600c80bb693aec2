"""Submit one run's job through submitit and read its result: the Slurm parameters of a run, sbatch, the side file,
the result pickle; and the local executor's job (a child process of this controller).

Reattach: the job id is written to a side file (`results/{sweep}/.jobs/{run_id}/job.json`, layout.JobsDir) that is
NOT a declared output, so a controller that was killed and started again finds its in-flight Slurm job instead of
submitting a duplicate. The training log is written under the same folder too and only linked to the declared
`log.txt` when the job has finished (run/runrule.py): Snakemake deletes incomplete outputs before a rerun, which must
not cut a running job's log.

Infrastructure failures (the job died without a result: cancelled, node failure, preempted, lost by sacct,
walltime) raise InfraFailure so the rule fails and Snakemake's --retries reruns only that run, with more time.
Waiting is run/watch.py's; nothing here imports pandas (the run rule's process may be one of many:
tests/run/test_imports.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import submitit
import yaml

from graphsweep import resources
from graphsweep.fileio import write_json
from graphsweep.parse.progress import latest_iteration
from graphsweep.entry.job import job_argv, job_main, tees_rank_files, utc_now
from graphsweep.run.process import process_start
from graphsweep.run.sbatch import SLURM_DEFAULTS, SubmitRefused, sbatch_transient, slurm_parameters
from graphsweep.run.slurmstate import (
    InfraFailure,
    SlurmStateCache,
    WaitLimits,
    default_state_dir,
    result_pickle,
)
from graphsweep.store.runfiles import read_job_side
from graphsweep.layout import TORCHRUN_LOG_DIR_ENV, JobsDir
from graphsweep.fileio import UnusableFile
from graphsweep.records import LaunchPlan


def _timeout_default() -> int:
    schema = yaml.safe_load(resources.read_text(resources.SWEEP_SCHEMA))
    return int(schema["properties"]["executor"]["properties"]["timeout_min"]["default"])



@dataclass
class SubmitSettings:
    cluster: str = "local"  # local | slurm | debug
    timeout_min: int = field(default_factory=_timeout_default)  # the spec's executor.timeout_min (schema default)
    gpus_per_node: int = 0  # 0: the run's own GPU count on one node
    slurm: Mapping[str, Any] = field(default_factory=dict)  # profiles/slurm/cluster.yaml `slurm:` (see slurm_parameters)
    poll_s: float = 2.0  # how often a waiter looks for its result pickle (a file stat, no scheduler call)

    def knob(self, key: str) -> float:
        value = self.slurm.get(key)
        return float(SLURM_DEFAULTS[key] if value in (None, "") else value)

    @property
    def status_interval_s(self) -> float:
        """Minimum seconds between two sacct calls of all waiters together (10 s = 6 calls a minute)."""
        return self.knob("status_interval_s")

    @property
    def progress_interval_s(self) -> float:
        return self.knob("progress_interval_s")

    @property
    def stuck_limit_s(self) -> float:
        """How long a job may sit in PREEMPTED/UNKNOWN before it is cancelled and resubmitted."""
        return self.knob("stuck_guard_min") * 60.0

    @property
    def lost_after_s(self) -> float:
        """A job sacct has no record of for this long after submission is lost (purged, or never reached slurmdbd)."""
        return self.knob("lost_after_min") * 60.0

    @property
    def result_grace_s(self) -> float:
        """After sacct says the job ended, how long to wait for its result pickle (shared filesystem lag)."""
        return self.knob("result_grace_s")

    @property
    def submit_retry_s(self) -> float:
        """How long sbatch failures (slurmctld restarting, 'Socket timed out') are retried before the rule fails."""
        return self.knob("submit_retry_s")

    def state_cache(self) -> SlurmStateCache:
        state_dir = self.slurm.get("state_dir") or default_state_dir()
        return SlurmStateCache(
            Path(os.path.expanduser(str(state_dir))),
            min_interval_s=self.status_interval_s,
            lease_s=max(180.0, 3 * self.status_interval_s),
        )


def read_side(jobs: JobsDir) -> dict[str, Any] | None:
    """The in-flight job of a run, None when there is none. Fails closed: an unreadable side file is UnusableFile,
    never "no job" (submitting again could run a second job of the run next to one still in the queue)."""
    return read_job_side(jobs)


def read_failure(jobs: JobsDir) -> dict[str, Any] | None:
    """The last infrastructure failure of a run (for `graphsweep status`), None when there is none."""
    try:
        return json.loads(jobs.failure.read_text())
    except (OSError, ValueError):
        return None


def record_failure(jobs: JobsDir, exc: InfraFailure | SubmitRefused, attempt: int) -> None:
    """An infrastructure failure or sbatch's refusal: kept for `graphsweep status`, and the job forgotten so the next
    attempt submits a fresh one (its log stays under the jobs folder as evidence)."""
    try:
        failed = read_side(jobs) or {}
    except UnusableFile:
        failed = {}
    write_json(jobs.failure, {**failed, "state": exc.state, "message": str(exc), "failed_utc": utc_now(),
                              "attempt": attempt})  # fmt: skip
    jobs.side.unlink(missing_ok=True)


def waiting_limits(s: SubmitSettings) -> WaitLimits:
    return WaitLimits(
        poll_s=s.poll_s,
        status_interval_s=s.status_interval_s,
        progress_interval_s=s.progress_interval_s,
        stuck_limit_s=s.stuck_limit_s,
        lost_after_s=s.lost_after_s,
        result_grace_s=s.result_grace_s,
    )


class _Interrupted(BaseException):
    def __init__(self, signum: int):
        self.signum = signum


def _raise_interrupted(signum: int, frame: Any) -> None:  # noqa: ARG001
    raise _Interrupted(signum)


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C/SIGTERM/SIGHUP while sbatch runs and the side file is written: an interrupt in between would leave
    a job nobody knows about (no side file: the rerun submits a duplicate). The signal is delivered right after."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


def _attempt_log(jobs: JobsDir, attempt: int) -> Path:
    log = jobs.attempt_log(attempt, f"{dt.datetime.now():%Y%m%d-%H%M%S}")
    log.parent.mkdir(parents=True, exist_ok=True)
    return log


def submit_slurm(
    run_id: str, plan: LaunchPlan, jobs: JobsDir, s: SubmitSettings, attempt: int, say: Callable[[str], None]
) -> dict[str, Any]:
    """sbatch through submitit and record the job in the side file; returns the side record. The sbatch failures Slurm
    calls transient (slurmctld restarting, 'Socket timed out', SBATCH_TRANSIENT) are retried for submit_retry_s, any
    other refusal fails the run at once with sbatch's own line (SubmitRefused)."""
    # One folder for all of this run's jobs, created before sbatch: with submitit's `%j` folders Slurm can start the
    # job before submitit has made its folder, and a job whose --output folder is missing fails at once (FAILED, 0 s).
    folder = jobs.submitit
    folder.mkdir(parents=True, exist_ok=True)
    job_log = _attempt_log(jobs, attempt)
    ex = submitit.AutoExecutor(
        folder=str(folder), cluster="slurm", **({"slurm_python": s.slurm["python"]} if s.slurm.get("python") else {})
    )
    ex.update_parameters(**slurm_parameters(plan, s.slurm, s.timeout_min, name=f"gs-{run_id}"[:64]))
    argv = job_argv(plan, s.slurm)
    deadline = time.monotonic() + s.submit_retry_s
    while True:
        with _signals_deferred():
            try:
                job = ex.submit(job_main, argv, dict(plan.env), str(job_log.resolve()))
            except (submitit.core.utils.FailedJobError, submitit.core.utils.FailedSubmissionError, OSError) as exc:
                error: Exception = exc
            else:
                side = {
                    "cluster": "slurm",
                    "job_id": str(job.job_id),
                    "folder": str(folder.resolve()),
                    "log": str(job_log.resolve()),
                    "attempt": attempt,
                    "timeout_min": int(s.timeout_min),
                    "submitted_utc": utc_now(),
                }
                write_json(jobs.side, side)
                say(f"submitted {run_id} as Slurm job {job.job_id} (time limit {s.timeout_min} min, attempt {attempt})")
                return side
        text = (str(error).strip().splitlines() or [type(error).__name__])[-1]
        if not sbatch_transient(str(error)):
            raise SubmitRefused(text) from None
        if time.monotonic() > deadline:
            raise InfraFailure("SUBMIT", f"sbatch kept failing for {s.submit_retry_s:.0f} s: {text}") from error
        say(f"{run_id}: sbatch failed ({text[:200]}); retrying in 15 s")
        time.sleep(15)


def slurm_outcome(side: Mapping[str, Any]) -> dict[str, Any]:
    """The job function's return value from its result pickle; InfraFailure when the wrapper itself failed."""
    outcome, value = submitit.core.utils.pickle_load(result_pickle(side))
    if outcome == "success":
        return dict(value)
    text = str(value)
    if "timed-out" in text:  # submitit's USR2 handler: "Job not requeued because: timed-out and not checkpointable."
        raise InfraFailure("TIMEOUT", f"job {side['job_id']} hit its time limit of {side.get('timeout_min')} min")
    raise InfraFailure("FAILED", f"job {side['job_id']}'s wrapper raised: {text.strip().splitlines()[-1][:300]}")


def _executor(folder: Path, plan: LaunchPlan, s: SubmitSettings, name: str) -> submitit.AutoExecutor:
    ex = submitit.AutoExecutor(folder=str(folder / "%j"), cluster=s.cluster)
    params: dict[str, Any] = {"timeout_min": int(s.timeout_min), "name": name}
    if s.cluster == "local":
        # submitit's local executor hides all GPUs unless gpus_per_node is set.
        params["gpus_per_node"] = max(1, plan.gpus_per_node)
    ex.update_parameters(**params)
    return ex


@contextlib.contextmanager
def _children_write_to(path: Path) -> Iterator[None]:
    """Processes started in here write their stdout and stderr to `path`, not to the controller's terminal.

    submitit's local executor starts a controller process (python -m submitit.local._local) that inherits the
    terminal; on Ctrl-C it printed a KeyboardInterrupt traceback under the controller's last line (the resume
    command). Its output is kept next to the job's files instead."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()
    saved = (os.dup(1), os.dup(2))
    try:
        with open(path, "ab") as out:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def run_local(
    run_id: str, jobs: JobsDir, plan: LaunchPlan, s: SubmitSettings, attempt: int, say: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A local job, waited for here: (the job's facts, its side record, its state). Its id is a PID of this
    controller's child: nothing to reattach to, always a fresh job."""
    job_log = _attempt_log(jobs, attempt)
    ex = _executor(jobs.submitit, plan, s, name=f"gs-{run_id}"[:64])
    env = dict(plan.env)
    # torchrun's per-rank files next to the job's log (linked into the run folder when the job is done, as the log)
    rank_dir = job_log.with_suffix(".ranks").resolve() if tees_rank_files(plan) else None
    if rank_dir is not None:
        env[TORCHRUN_LOG_DIR_ENV] = str(rank_dir)
    with _children_write_to(jobs.local_controller_log):
        job = ex.submit(job_main, list(plan.argv), env, str(job_log.resolve()))
    side = {
        "cluster": s.cluster,
        "job_id": str(job.job_id),
        # a local job is a process of this host: `graphsweep status` asks whether it still runs (after a Ctrl-C)
        "host": socket.gethostname(),
        "pid_start": process_start(int(job.job_id)) if str(job.job_id).isdigit() else None,
        "folder": str((jobs.submitit / "%j").resolve()),
        "log": str(job_log.resolve()),
        "rank_log_dir": str(rank_dir) if rank_dir is not None else None,
        "attempt": attempt,
        "timeout_min": int(s.timeout_min),
        "submitted_utc": utc_now(),
    }
    write_json(jobs.side, side)
    say(f"submitted {run_id} as {s.cluster} job {job.job_id}")
    last_note = time.monotonic()
    try:
        while not job.done():
            if time.monotonic() - last_note > 60:
                it = latest_iteration(job_log)
                say(f"{run_id}: job {job.job_id} running" + (f", iteration {it[0]}/{it[1]}" if it else ""))
                last_note = time.monotonic()
            time.sleep(s.poll_s)
    except BaseException:  # Ctrl-C, a stopped controller: nothing can reattach to a local job, so it ends with us
        _stop_local(job)
        raise
    try:
        facts = job.result()
    except submitit.core.utils.FailedJobError as exc:  # subclass of UncompletedJobError: catch first
        text = str(exc)
        if "timed-out" in text:
            raise InfraFailure("TIMEOUT", "the job hit its time limit (submitit: timed-out and not checkpointable)")
        raise InfraFailure("FAILED", f"the job's wrapper raised: {text.strip().splitlines()[-1][:300]}")
    except submitit.core.utils.UncompletedJobError as exc:
        raise InfraFailure("UNKNOWN", f"job {job.job_id} produced no result: {str(exc).strip()[:300]}")
    return facts, side, "COMPLETED"


LOCAL_STOP_GRACE_S = 10.0


def _stop_local(job: Any) -> None:
    """End a local job and wait for its process, so that once the run rule's process is gone `graphsweep status`
    finds no job still running. submitit's local controller forwards the SIGINT to its task and SIGKILLs it 1 s later
    (submitit/local/local.py kill_tasks); its Popen is LocalJob._process, which submitit gives no public name."""
    proc = getattr(job, "_process", None)
    if proc is None or proc.poll() is not None:
        return
    job.cancel(check=False)
    try:
        proc.wait(LOCAL_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def settings_from_spec(executor: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> SubmitSettings:
    merged = {**executor, **(overrides or {})}
    known = {f for f in SubmitSettings.__dataclass_fields__}
    return SubmitSettings(**{k: v for k, v in merged.items() if k in known})
