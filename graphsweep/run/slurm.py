"""What Slurm says about the jobs of a controller, asked from the controller itself (the graphsweep executor):

- `SacctWatcher`: every job in flight from ONE `sacct -j id1,id2,...` call at most every `interval_s`, kept in this
  process (a rate-limited dict; submitit's SlurmInfoWatcher calls sacct the same way, but bypasses a failed call
  and has no timeout: a waiter must know that sacct could not answer, and a hung sacct must not hang the controller);
- `slurmctld_state` and `gone`: whether slurmctld still holds a job (`squeue`), the scheduler's own word where sacct
  has none, and what "the old job is known dead" means before a run is submitted again;
- `job_result`: what a finished job gave back (submitit's result pickle), and `InfraFailure`, a job that gave none.

A finished job is seen from its result pickle (a file stat); sacct is asked only to notice a job that ended without
one (cancelled, time limit, node failure), one sacct has lost, or one that hangs (PREEMPTED, UNKNOWN).
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import submitit

from graphsweep.parse.progress import latest_iteration
from graphsweep.records import JobSide

# sacct states in which a job may still finish: keep waiting.
ALIVE_STATES = frozenset(
    {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "COMPLETING", "CONFIGURING", "RESIZING",
     "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED", "READY", "RESV_DEL_HOLD"}
)  # fmt: skip
# States a job can sit in forever without finishing (submitit's own wait loops forever on them): wall-clock guarded.
STUCK_STATES = frozenset({"PREEMPTED", "UNKNOWN"})
# Ends that Slurm gave the job, not its training: a training that exits non-zero in such a job was stopped (scancel's
# SIGTERM reaches every process of the job: the training exits -15 and the job function still returns its facts).
SLURM_ENDS = frozenset({"CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "DEADLINE", "BOOT_FAIL"})
SACCT_FIELDS = ("JobID", "State", "ExitCode", "Elapsed", "Timelimit", "NodeList", "Reason")
SACCT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class JobRecord:
    """One job's line from sacct (allocation only, `-X`)."""

    job_id: str
    state: str  # first word: "CANCELLED by 0" -> "CANCELLED"
    exit_code: str = ""
    elapsed: str = ""
    timelimit: str = ""
    nodes: str = ""
    reason: str = ""


def parse_sacct(text: str) -> dict[str, JobRecord]:
    """`sacct -X -n -P -o JobID,State,ExitCode,Elapsed,Timelimit,NodeList,Reason` output -> records by job id.

    A requeued job has one line per run when asked with -D; without it sacct prints the latest, and if several lines
    still come back the last one wins.
    """
    records: dict[str, JobRecord] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or not parts[0]:
            continue
        parts += [""] * (len(SACCT_FIELDS) - len(parts))
        job_id, state = parts[0], (parts[1].split() or [""])[0]
        records[job_id] = JobRecord(job_id, state, *parts[2 : len(SACCT_FIELDS)])
    return records


def sacct(job_ids: Iterable[str], timeout_s: float = SACCT_TIMEOUT_S) -> dict[str, JobRecord]:
    """One batched sacct call for all job_ids. Raises OSError / CalledProcessError / TimeoutExpired on failure."""
    ids = sorted({str(j) for j in job_ids}, key=lambda j: (len(j), j))
    if not ids:
        return {}
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", ",".join(SACCT_FIELDS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    ).stdout
    return parse_sacct(out)


@dataclass(frozen=True)
class Lookup:
    """What the watcher knows about one job after a look."""

    record: JobRecord | None
    queried_at: float  # time.monotonic() of the last sacct call (0: none yet)
    ok: bool  # the last sacct call answered
    error: str = ""


@dataclass
class SacctWatcher:
    """The sacct records of every job the controller waits for: one call for all of them, at most once per
    `interval_s` (10 s: 6 calls a minute, however many runs are in flight), kept in this process."""

    interval_s: float
    timeout_s: float = SACCT_TIMEOUT_S
    records: dict[str, JobRecord] = field(default_factory=dict)
    queried_at: float = 0.0
    ok: bool = False
    error: str = ""
    calls: int = 0

    def look(self, job_ids: Iterable[str], now: float | None = None) -> dict[str, Lookup]:
        """Each job's latest record; sacct is asked again (for all of them) once the last answer is interval_s old."""
        now = time.monotonic() if now is None else now
        ids = [str(j) for j in job_ids]
        if ids and (self.calls == 0 or now - self.queried_at >= self.interval_s):
            self.queried_at, self.calls = now, self.calls + 1  # also on failure: a broken sacct is not hammered
            try:
                self.records = sacct(ids, timeout_s=self.timeout_s)
                self.ok, self.error = True, ""
            except (OSError, subprocess.SubprocessError) as exc:
                stderr = getattr(exc, "stderr", "") or ""
                self.ok, self.error = False, f"{type(exc).__name__}: {exc} {stderr}".strip()[:500]
        return {j: Lookup(self.records.get(j), self.queried_at, self.ok, self.error) for j in ids}


# --------------------------------------------------------------------------------------------------
# slurmctld's own word: is the job still held?

GONE = ""  # slurmctld_state's answer for a job slurmctld no longer holds


def slurmctld_state(job_id: str) -> str | None:
    """The job's state as slurmctld holds it (`squeue`: PENDING, RUNNING, COMPLETING, ...), GONE when it holds the job
    no more (ended, or purged: "Invalid job id specified"), None when squeue could not say (slurmctld unreachable).
    squeue asks slurmctld, not the accounting database: it knows a job that sacct has no record of."""
    try:
        res = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%T"], capture_output=True, text=True,
                             timeout=SACCT_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode == 0:
        return (res.stdout.split() or [GONE])[0]
    return GONE if "Invalid job id" in res.stderr else None


def cancel(job_id: str) -> None:
    subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=SACCT_TIMEOUT_S, check=False,
                   stdin=subprocess.DEVNULL)  # fmt: skip


def gone(job_id: str, wait_s: float = 90.0, poll_s: float = 1.0, stop: threading.Event | None = None) -> bool:
    """Whether slurmctld holds the job no more, asked until `wait_s` has passed or `stop` is set (a cancelled job is
    COMPLETING while Slurm kills its processes, KillWait: 30 s by default). Before a run is submitted again its old
    job is known gone."""
    end = time.monotonic() + wait_s
    stop = stop or threading.Event()
    while True:
        if slurmctld_state(job_id) == GONE:
            return True
        if time.monotonic() >= end or stop.wait(poll_s):
            return False


# --------------------------------------------------------------------------------------------------
# What a job gave back


class InfraFailure(RuntimeError):
    """The job did not produce a result for infrastructure reasons; the run must be retried, not recorded.
    `cancel`: the job may still hold its allocation (stuck in PREEMPTED or UNKNOWN): cancel it before the retry.
    `gone`: the job is known to have ended (else the next attempt reattaches to it instead of submitting another)."""

    def __init__(self, state: str, message: str, cancel: bool = False, gone: bool = True):
        self.state, self.cancel, self.gone = state, cancel, gone
        super().__init__(f"{state}: {message}")


@dataclass(frozen=True)
class WaitLimits:
    """How the controller waits (the profile's slurm: block, config.schema.yaml, gives every one of them a range)."""

    poll_s: float = 2.0  # result pickle check (a file stat, no scheduler call)
    status_interval_s: float = 10.0  # at most one sacct call per this many seconds, for every job together
    progress_interval_s: float = 120.0
    stuck_limit_s: float = 1800.0
    lost_after_s: float = 600.0
    result_grace_s: float = 30.0


def result_pickle(side: JobSide) -> Path:
    """submitit's result file of task 0 of the job."""
    return Path(side.folder.replace("%j", side.job_id)) / f"{side.job_id}_0_result.pkl"


def job_result(side: JobSide) -> dict[str, Any]:
    """The job function's return value from its result pickle; InfraFailure when the wrapper itself failed."""
    outcome, value = submitit.core.utils.pickle_load(result_pickle(side))
    if outcome == "success":
        return dict(value)
    text = str(value)
    if "timed-out" in text:  # submitit's USR2 handler: "Job not requeued because: timed-out and not checkpointable."
        raise InfraFailure("TIMEOUT", f"job {side.job_id} hit its time limit of {side.timeout_min} min")
    raise InfraFailure("FAILED", f"job {side.job_id}'s wrapper raised: {text.strip().splitlines()[-1][:300]}")


# --------------------------------------------------------------------------------------------------
# What the controller says while it waits


@dataclass(frozen=True)
class InFlight:
    """One job in a progress line or the Ctrl-C summary."""

    job_id: str
    label: str  # the run id
    log: str = ""  # its training log (the running ones' latest iteration is read from its tail)
    record: JobRecord | None = None


def progress_line(jobs: list[InFlight], max_detail: int = 4) -> str:
    """One line for a controller's in-flight jobs: counts by state, then the running ones with their iteration."""
    by_state: dict[str, int] = {}
    details: list[str] = []
    for j in jobs:
        state = j.record.state if j.record else "SUBMITTED"
        by_state[state] = by_state.get(state, 0) + 1
        if state == "RUNNING":
            it = latest_iteration(j.log) if j.log else None
            where = f"iteration {it[0]}/{it[1]}" if it else f"running {j.record.elapsed if j.record else ''}".strip()
            details.append(f"{j.label} (job {j.job_id}) {where}")
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(by_state.items(), key=lambda kv: (-kv[1], kv[0])))
    more = f" +{len(details) - max_detail} more" if len(details) > max_detail else ""
    stamp = time.strftime("%H:%M:%S")
    return f"{stamp} Slurm: {len(jobs)} in flight ({counts})" + (
        " | " + "; ".join(details[:max_detail]) + more if details else ""
    )


def interrupt_message(jobs: list[InFlight]) -> str:
    """What a cancelled controller tells the user about the jobs it left behind."""
    if not jobs:
        return "interrupted; no Slurm job was in flight."
    jobs = sorted(jobs, key=lambda j: (len(j.job_id), j.job_id))
    lines = [f"interrupted; {len(jobs)} Slurm job(s) left running (they keep their allocation):"]
    for j in jobs:
        lines.append(f"  {j.job_id}  {j.record.state if j.record else 'SUBMITTED':<10} {j.label}")
    lines.append(f"  cancel them:  scancel {' '.join(j.job_id for j in jobs)}")
    lines.append(
        "  or reattach:  run the same snakemake command again (after `snakemake --unlock` if it says the directory "
        "is locked); finished and running jobs are picked up, nothing is submitted twice"
    )
    return "\n".join(lines)

