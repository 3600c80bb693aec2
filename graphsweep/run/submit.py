"""Submit one run's Slurm job through submitit: the settings a run is submitted with, sbatch, and the side file.

Reattach: the job is written to a side file (`results/{sweep}/.jobs/{run_id}/job.json`, layout.JobsDir, a
records.JobSide) that is NOT a declared output, so a controller that was killed and started again finds its in-flight
Slurm job instead of submitting a duplicate. The training log is written under the same folder too and only linked
to the declared `log.txt` when the job has finished (run/runrule.py): Snakemake deletes incomplete outputs before a
rerun, which must not cut a running job's log. The side file goes once its job is known to have ended.

Infrastructure failures (the job died without a result: cancelled, node failure, preempted, lost by sacct,
walltime) raise InfraFailure so the rule fails and Snakemake's --retries reruns only that run, with more time.
The local executor's job is run/local.py's; waiting is run/watch.py's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import submitit
import yaml

from graphsweep import resources
from graphsweep.entry.job import job_argv, job_main, utc_now
from graphsweep.fileio import UnusableFile, write_json
from graphsweep.layout import JobsDir
from graphsweep.records import JobSide, LaunchPlan
from graphsweep.run.sbatch import SLURM_DEFAULTS, SubmitRefused, sbatch_transient, slurm_parameters
from graphsweep.run.slurm import InfraFailure, WaitLimits
from graphsweep.store.runfiles import read_job_side


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


def read_side(jobs: JobsDir) -> JobSide | None:
    """The in-flight job of a run, None when there is none. Fails closed: an unreadable side file is UnusableFile,
    never "no job" (submitting again could run a second job of the run next to one still in the queue)."""
    return read_job_side(jobs)


def read_failure(jobs: JobsDir) -> dict[str, Any] | None:
    """The last infrastructure failure of a run (for `graphsweep status`), None when there is none."""
    try:
        return json.loads(jobs.failure.read_text())
    except (OSError, ValueError):
        return None


def record_failure(jobs: JobsDir, exc: InfraFailure | SubmitRefused, attempt: int, gone: bool = True) -> None:
    """An infrastructure failure or sbatch's refusal: kept for `graphsweep status`. The job is forgotten when it is
    known to have ended (`gone`), so the next attempt submits a fresh one (its log stays under the jobs folder as
    evidence); a job Slurm may still hold stays in the side file, and the next attempt reattaches to it."""
    try:
        side = read_side(jobs)
    except UnusableFile:
        side = None
    failed = side.to_dict() if side else {}
    write_json(jobs.failure, {**failed, "state": exc.state, "message": str(exc), "failed_utc": utc_now(),
                              "attempt": attempt})  # fmt: skip
    if gone:
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


def attempt_log(jobs: JobsDir, attempt: int) -> Path:
    log = jobs.attempt_log(attempt, f"{dt.datetime.now():%Y%m%d-%H%M%S}")
    log.parent.mkdir(parents=True, exist_ok=True)
    return log


def submit_slurm(
    run_id: str, plan: LaunchPlan, jobs: JobsDir, s: SubmitSettings, attempt: int, say: Callable[[str], None],
    stop: threading.Event | None = None,
) -> JobSide:
    """sbatch through submitit and record the job in the side file; returns it. The sbatch failures Slurm calls
    transient (slurmctld restarting, 'Socket timed out', SBATCH_TRANSIENT) are retried for submit_retry_s, any other
    refusal fails the run at once with sbatch's own line (SubmitRefused). It blocks for as long (15 s between tries):
    the graphsweep executor calls it off Snakemake's threads (run/executor.py), and sets `stop` when the controller
    stops (no retry then)."""
    # One folder for all of this run's jobs, created before sbatch: with submitit's `%j` folders Slurm can start the
    # job before submitit has made its folder, and a job whose --output folder is missing fails at once (FAILED, 0 s).
    folder = jobs.submitit
    folder.mkdir(parents=True, exist_ok=True)
    job_log = attempt_log(jobs, attempt)
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
                side = JobSide(cluster="slurm", job_id=str(job.job_id), folder=str(folder.resolve()),
                               log=str(job_log.resolve()), attempt=attempt, timeout_min=int(s.timeout_min),
                               submitted_utc=utc_now())  # fmt: skip
                write_json(jobs.side, side.to_dict())
                say(f"submitted {run_id} as Slurm job {job.job_id} (time limit {s.timeout_min} min, attempt {attempt})")
                return side
        text = (str(error).strip().splitlines() or [type(error).__name__])[-1]
        if not sbatch_transient(str(error)):
            raise SubmitRefused(text) from None
        if time.monotonic() > deadline:
            raise InfraFailure("SUBMIT", f"sbatch kept failing for {s.submit_retry_s:.0f} s: {text}") from error
        say(f"{run_id}: sbatch failed ({text[:200]}); retrying in 15 s")
        if (stop or threading.Event()).wait(15):
            raise InfraFailure("SUBMIT", f"the controller stopped while sbatch kept failing: {text}") from error


def settings_from_spec(executor: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> SubmitSettings:
    merged = {**executor, **(overrides or {})}
    known = {f for f in SubmitSettings.__dataclass_fields__}
    return SubmitSettings(**{k: v for k, v in merged.items() if k in known})
