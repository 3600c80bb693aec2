"""The local executor's job (`cluster: local` or `debug`): a child process of the run rule's own process (Snakemake's
local executor: one process per run), started through submitit's local executor and waited for there.

A local job ends with the process that waits for it: on Ctrl-C, SIGTERM or SIGHUP, and when its Snakemake controller
is gone (`kill -9` of the controller alone leaves the run rule's process behind: it sees its parent change within a
poll), the job is stopped with every process below it and nothing is recorded. Before a run's local job starts, the
earlier one its side file names (a controller killed with all its processes) is known gone: stopped, and confirmed
by host, pid and start time. So two trainings of one run never share the machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import submitit

from graphsweep.entry.job import job_main, tees_rank_files, utc_now
from graphsweep.fileio import UnusableFile, write_json
from graphsweep.layout import TORCHRUN_LOG_DIR_ENV, JobsDir
from graphsweep.parse.progress import latest_iteration
from graphsweep.records import JobSide, LaunchPlan
from graphsweep.run.process import process_alive, process_start, stop_tree
from graphsweep.run.slurm import InfraFailure
from graphsweep.run.submit import SubmitSettings, attempt_log, read_side

STOP_GRACE_S = 10.0  # SIGINT first (submitit stops its task, the task its training), SIGKILL after this


class ControllerGone(SystemExit):
    """The Snakemake controller of this run rule died (kill -9): the local job has been stopped, nothing recorded."""


def stop_earlier(jobs: JobsDir, say: Callable[[str], None]) -> None:
    """The local job the run's side file names, if it still runs (its controller was killed with the run rule's
    process, so nobody stopped it): stopped, and confirmed gone, before a new one starts. A Slurm job there may still
    be queued or running: nothing starts beside it (UnusableFile, saying how to go on)."""
    side = read_side(jobs)
    if side is None:
        return
    if side.cluster == "slurm":
        raise UnusableFile(jobs.side, f"names Slurm job {side.job_id} of run {jobs.run_id}, which may still be queued "
                           "or running", "run the sweep with --profile slurm to reattach to it, or scancel it and "
                           "delete this file")  # fmt: skip
    alive = process_alive(side.job_id, side.host, side.pid_start)
    if alive is None:
        raise UnusableFile(jobs.side, f"names local job {side.job_id} of host {side.host}, which cannot be checked "
                           "from here", f"if no training of run {jobs.run_id} runs on {side.host} any more, delete it")
    if alive:
        say(f"{jobs.run_id}: its earlier local job {side.job_id} (of a controller that is gone) still runs: stopping "
            "it before a new one starts")  # fmt: skip
        if not stop_tree(int(side.job_id), side.pid_start, STOP_GRACE_S):
            raise InfraFailure("LOCAL", f"the earlier local job {side.job_id} of run {jobs.run_id} did not stop: not "
                                        "starting a second one beside it")  # fmt: skip
    jobs.side.unlink(missing_ok=True)


def run_local(
    run_id: str, jobs: JobsDir, plan: LaunchPlan, s: SubmitSettings, attempt: int, say: Callable[[str], None]
) -> tuple[dict[str, Any], JobSide]:
    """A local job, waited for here: (the job's facts, its side record). Its id is the pid of this process's child,
    submitit's local controller: nothing to reattach to, always a fresh job."""
    job_log = attempt_log(jobs, attempt)
    ex = submitit.AutoExecutor(folder=str(jobs.submitit / "%j"), cluster=s.cluster)
    # submitit's local executor hides all GPUs unless gpus_per_node is set.
    gpus = {"gpus_per_node": max(1, plan.gpus_per_node)} if s.cluster == "local" else {}
    ex.update_parameters(timeout_min=int(s.timeout_min), name=f"gs-{run_id}"[:64], **gpus)
    env = dict(plan.env)
    # torchrun's per-rank files next to the job's log (linked into the run folder when the job is done, as the log)
    rank_dir = job_log.with_suffix(".ranks").resolve() if tees_rank_files(plan) else None
    if rank_dir is not None:
        env[TORCHRUN_LOG_DIR_ENV] = str(rank_dir)
    controller = os.getppid()
    with _children_write_to(jobs.local_controller_log):
        job = ex.submit(job_main, list(plan.argv), env, str(job_log.resolve()))
    pid = int(job.job_id) if str(job.job_id).isdigit() else None
    side = JobSide(cluster=s.cluster, job_id=str(job.job_id), folder=str((jobs.submitit / "%j").resolve()),
                   log=str(job_log.resolve()), attempt=attempt, timeout_min=int(s.timeout_min),
                   submitted_utc=utc_now(), host=socket.gethostname(),
                   pid_start=process_start(pid) if pid else None,  # `graphsweep status` asks if it still runs
                   rank_log_dir=str(rank_dir) if rank_dir is not None else None)  # fmt: skip
    write_json(jobs.side, side.to_dict())
    say(f"submitted {run_id} as {s.cluster} job {job.job_id}")
    last_note = time.monotonic()
    try:
        with _signals_stop():
            while not job.done():
                if os.getppid() != controller:
                    raise ControllerGone(1)
                if time.monotonic() - last_note > 60:
                    it = latest_iteration(job_log)
                    say(f"{run_id}: job {job.job_id} running" + (f", iteration {it[0]}/{it[1]}" if it else ""))
                    last_note = time.monotonic()
                time.sleep(s.poll_s)
    except BaseException as exc:  # nothing can reattach to a local job, so it ends with the process that waits for it
        if pid is not None:
            stop_tree(pid, side.pid_start, STOP_GRACE_S)
            proc = getattr(job, "_process", None)  # submitit's Popen of its local controller (no public name)
            if proc is not None:
                proc.poll()  # reaped
        if isinstance(exc, ControllerGone):
            say(f"{run_id}: the Snakemake controller is gone; stopped local job {job.job_id} (run the same snakemake "
                "command again to run it)")  # fmt: skip
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
    return facts, side


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached the run rule's process: it stops as on Ctrl-C."""


@contextlib.contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGTERM and SIGHUP raise in the wait as Ctrl-C does, so that the local job is stopped rather than orphaned
    (their default ends the process at once). Only the main thread can take signals; elsewhere nothing is set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:  # noqa: ARG001
        raise _Stopped(signum)

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


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
