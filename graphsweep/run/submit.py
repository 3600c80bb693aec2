"""Submit one run through submitit, wait for it, and write its run.json (the controller side, in the run rule).

Reattach: the job id is written to a side file (`results/{sweep}/.jobs/{run_id}/job.json`) that is NOT a declared
output, so a controller that was killed and started again finds its in-flight Slurm job instead of submitting
a duplicate. The training log is written under the same folder too and only linked to the declared `log.txt` when
the job has finished: Snakemake deletes incomplete outputs before a rerun, which must not cut a running job's log.

Deterministic outcomes (the training exited non-zero: OOM, config rejected, crash) are results; infrastructure
failures (the job died without a result: cancelled, node failure, preempted, lost by sacct, walltime) raise
InfraFailure so the rule fails and Snakemake's --retries reruns only that run, with more time.

Waiting on Slurm never uses submitit's per-process watcher (`job.done()` / `job.state` call sacct from every
waiting process): the result pickle is checked first, and job states come from the shared, rate-limited sacct
cache in graphsweep/run/slurmstate.py. The waiting process stays small (no pandas: a login node hosts one per run
in flight): the retry policy's check reads the log with graphsweep/parse/signatures.py alone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import submitit
import yaml

from graphsweep import resources
from graphsweep.parse.progress import latest_iteration
from graphsweep.parse.signatures import find_transient
from graphsweep.run import gate as launch_gate
from graphsweep.run.controller import process_start
from graphsweep.run.job import job_argv, job_main, tees_rank_files, utc_now
from graphsweep.run.sbatch import SLURM_DEFAULTS, SubmitRefused, merged_slurm, sbatch_transient, slurm_parameters
from graphsweep.run.slurmstate import (
    ALIVE_STATES,
    STUCK_STATES,
    InfraFailure,
    SlurmStateCache,
    SlurmWaiter,
    WaitLimits,
    default_state_dir,
    result_pickle,
)
from graphsweep.store.readback import read_job_side, read_run_config
from graphsweep.vocab import JOB_FAILURE, JOB_SIDE, TORCHRUN_LOG_DIR_ENV, LaunchPlan, RunDir, UnusableFile, write_json


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


def _side_file(jobs_dir: Path) -> Path:
    return jobs_dir / JOB_SIDE


def _failure_file(jobs_dir: Path) -> Path:
    return jobs_dir / JOB_FAILURE


def _read_side(jobs_dir: Path) -> dict[str, Any] | None:
    """The in-flight job of a run, None when there is none. Fails closed: an unreadable side file is UnusableFile,
    never "no job" (submitting again could run a second job of the run next to one still in the queue)."""
    return read_job_side(jobs_dir)


def _write_side(jobs_dir: Path, record: Mapping[str, Any], path: Path | None = None) -> None:
    jobs_dir.mkdir(parents=True, exist_ok=True)
    target = path or _side_file(jobs_dir)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(target)


def read_failure(jobs_dir: Path) -> dict[str, Any] | None:
    """The last infrastructure failure of a run (for `graphsweep status`), None when there is none."""
    try:
        return json.loads(_failure_file(jobs_dir).read_text())
    except (OSError, ValueError):
        return None


def _waiting_limits(s: SubmitSettings) -> WaitLimits:
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


def _submit_slurm(
    run_id: str, plan: LaunchPlan, jobs_dir: Path, s: SubmitSettings, attempt: int, say: Callable[[str], None]
) -> SlurmWaiter:
    """sbatch through submitit, record the job in the side file and the shared cache; the sbatch failures Slurm calls
    transient (slurmctld restarting, 'Socket timed out', SBATCH_TRANSIENT) are retried for submit_retry_s, any other
    refusal fails the run at once with sbatch's own line."""
    # One folder for all of this run's jobs, created before sbatch: with submitit's `%j` folders Slurm can start the
    # job before submitit has made its folder, and a job whose --output folder is missing fails at once (FAILED, 0 s).
    folder = jobs_dir / "submitit"
    folder.mkdir(parents=True, exist_ok=True)
    job_log = jobs_dir / "logs" / f"{dt.datetime.now():%Y%m%d-%H%M%S}-attempt{attempt}.log"
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
                _write_side(jobs_dir, side)
                waiter = SlurmWaiter(run_id, side, s.state_cache(), say, _waiting_limits(s))
                say(f"submitted {run_id} as Slurm job {job.job_id} (time limit {s.timeout_min} min, attempt {attempt})")
                return waiter
        text = (str(error).strip().splitlines() or [type(error).__name__])[-1]
        if not sbatch_transient(str(error)):
            raise SubmitRefused(text) from None
        if time.monotonic() > deadline:
            raise InfraFailure("SUBMIT", f"sbatch kept failing for {s.submit_retry_s:.0f} s: {text}") from error
        say(f"{run_id}: sbatch failed ({text[:200]}); retrying in 15 s")
        time.sleep(15)


def _slurm_outcome(side: Mapping[str, Any]) -> dict[str, Any]:
    """The job function's return value from its result pickle; InfraFailure when the wrapper itself failed."""
    outcome, value = submitit.core.utils.pickle_load(result_pickle(side))
    if outcome == "success":
        return dict(value)
    text = str(value)
    if "timed-out" in text:  # submitit's USR2 handler: "Job not requeued because: timed-out and not checkpointable."
        raise InfraFailure("TIMEOUT", f"job {side['job_id']} hit its time limit of {side.get('timeout_min')} min")
    raise InfraFailure("FAILED", f"job {side['job_id']}'s wrapper raised: {text.strip().splitlines()[-1][:300]}")


def _wait_slurm(
    run_id: str, jobs_dir: Path, plan: LaunchPlan, s: SubmitSettings, attempt: int, say: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any], str]:
    waiter: SlurmWaiter | None = None
    # Signal handlers exist only in the main thread (the rule's script); elsewhere (a library caller) none are set.
    main = threading.current_thread() is threading.main_thread()
    old = {sig: signal.signal(sig, _raise_interrupted) for sig in _SIGNALS} if main else {}
    try:
        side = _read_side(jobs_dir)
        if side and side.get("cluster") == "slurm":
            waiter = SlurmWaiter(run_id, side, s.state_cache(), say, _waiting_limits(s))
            state, ok = (None, True) if waiter.pickle.exists() else waiter.state_now()
            if waiter.pickle.exists():  # looked at after sacct too: a job may finish between the two looks
                say(f"reattaching {run_id} to Slurm job {side['job_id']} (finished, result present)")
            elif state in ALIVE_STATES | STUCK_STATES or (state is None and not ok):
                say(f"reattaching {run_id} to Slurm job {side['job_id']} (state {state or 'unknown: sacct failed'})")
            else:
                say(f"previous Slurm job {side['job_id']} of {run_id} ended {state or 'without a sacct record'} "
                    "without a result; submitting a new one")  # fmt: skip
                waiter.forget()
                waiter = None
        if waiter is None:
            waiter = _submit_slurm(run_id, plan, jobs_dir, s, attempt, say)
        state = waiter.wait()
    except _Interrupted as exc:
        if waiter is not None:
            waiter.interrupted()
        raise SystemExit(128 + exc.signum) from None
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    try:
        facts = _slurm_outcome(waiter.side)
    finally:
        waiter.forget()
    return facts, dict(waiter.side), "COMPLETED" if state in ALIVE_STATES | {"SUBMITTED"} else state


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


def _wait_local(
    run_id: str, jobs_dir: Path, plan: LaunchPlan, s: SubmitSettings, attempt: int, say: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A local job's id is a PID of this controller's child: nothing to reattach to, always a fresh job."""
    job_log = jobs_dir / "logs" / f"{dt.datetime.now():%Y%m%d-%H%M%S}-attempt{attempt}.log"
    ex = _executor(jobs_dir / "submitit", plan, s, name=f"gs-{run_id}"[:64])
    env = dict(plan.env)
    # torchrun's per-rank files next to the job's log (linked into the run folder when the job is done, as the log)
    rank_dir = job_log.with_suffix(".ranks").resolve() if tees_rank_files(plan) else None
    if rank_dir is not None:
        env[TORCHRUN_LOG_DIR_ENV] = str(rank_dir)
    with _children_write_to(jobs_dir / "submitit" / "controller.log"):
        job = ex.submit(job_main, list(plan.argv), env, str(job_log.resolve()))
    side = {
        "cluster": s.cluster,
        "job_id": str(job.job_id),
        # a local job is a process of this host: `graphsweep status` asks whether it still runs (after a Ctrl-C)
        "host": socket.gethostname(),
        "pid_start": process_start(int(job.job_id)) if str(job.job_id).isdigit() else None,
        "folder": str((jobs_dir / "submitit" / "%j").resolve()),
        "log": str(job_log.resolve()),
        "rank_log_dir": str(rank_dir) if rank_dir is not None else None,
        "attempt": attempt,
        "timeout_min": int(s.timeout_min),
        "submitted_utc": utc_now(),
    }
    _write_side(jobs_dir, side)
    say(f"submitted {run_id} as {s.cluster} job {job.job_id}")
    last_note = time.monotonic()
    while not job.done():
        if time.monotonic() - last_note > 60:
            it = latest_iteration(job_log)
            say(f"{run_id}: job {job.job_id} running" + (f", iteration {it[0]}/{it[1]}" if it else ""))
            last_note = time.monotonic()
        time.sleep(s.poll_s)
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


def _link(src: Path, dst: Path) -> None:
    """dst becomes the job's log: a hard link (no copy of a large log), a copy across filesystems."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    tmp.replace(dst)


def _link_tree(src: Path, dst: Path) -> None:
    """dst becomes a copy of the folder src made of hard links (copies across filesystems); an older dst goes."""
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, copy_function=lambda a, b: _link(Path(a), Path(b)))
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)


def submit_and_wait(
    run_id: str,
    plan: LaunchPlan,
    log_path: Path,
    jobs_dir: Path,
    settings: SubmitSettings,
    attempt: int = 1,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Submit (or reattach to) the job of one run, wait for it, and return its run.json record."""
    jobs_dir.mkdir(parents=True, exist_ok=True)
    wait = _wait_slurm if settings.cluster == "slurm" else _wait_local
    side: dict[str, Any] | None = None
    try:
        facts, side, state = wait(run_id, jobs_dir, plan, settings, attempt, say)
    except (InfraFailure, SubmitRefused) as exc:
        # Forget the job so the retry submits a fresh one; its log stays under jobs_dir/logs as evidence.
        try:
            failed = _read_side(jobs_dir) or {}
        except UnusableFile:
            failed = {}
        _write_side(jobs_dir, {**failed, "state": exc.state, "message": str(exc), "failed_utc": utc_now(),
                               "attempt": attempt}, _failure_file(jobs_dir))  # fmt: skip
        _side_file(jobs_dir).unlink(missing_ok=True)
        if isinstance(exc, InfraFailure):
            say(f"{run_id}: infrastructure failure, will be retried: {exc}")
        raise
    job_log = Path(side.get("log") or log_path)
    if job_log.exists() and job_log.resolve() != log_path.resolve():
        _link(job_log, log_path)
    elif not log_path.exists():
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("[graphsweep] the job produced no training output\n")
    rank_dir = side.get("rank_log_dir")
    if rank_dir and Path(rank_dir).is_dir():  # this job's per-rank files replace an earlier attempt's
        _link_tree(Path(rank_dir), RunDir(log_path.parent).ranks)
    record = {
        "run_id": run_id,
        "executor": settings.cluster,
        "job_id": str(side["job_id"]),
        "attempt": attempt,
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


def settings_from_spec(executor: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> SubmitSettings:
    merged = {**executor, **(overrides or {})}
    known = {f for f in SubmitSettings.__dataclass_fields__}
    return SubmitSettings(**{k: v for k, v in merged.items() if k in known})


def execute_run(
    run: RunDir,
    jobs_dir: Path,
    attempt: int = 1,
    timeout_min: int | None = None,
    cluster: str | None = None,
    slurm: Mapping[str, Any] | None = None,
    say: Callable[[str], None] = print,
    gate: Sequence[Path] = (),
) -> dict[str, Any]:
    """The run rule: submit (or reattach), wait, retry once on a known-transient signature, write run.json.

    Reads the run's config.yaml (validated) and writes its run.json, log.txt and ranks/ (the rule's declared files).
    `gate`: the summaries of the shape's eager runs, for a graph arm of a spec with `launch_gate: true` (run/gate.py)."""
    cfg = read_run_config(run)
    run_json, log_path = run.run_json, run.log
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
        overrides["slurm"] = merged_slurm(slurm, cfg["executor"].get("slurm") or {})
    settings = settings_from_spec(cfg["executor"], overrides)
    run_id = cfg["run"]["run_id"]
    record = submit_and_wait(run_id, plan, log_path, jobs_dir, settings, attempt, say)
    transient = None
    if record["exit_code"] != 0:
        # the retry policy is the arm's: a CUDA error of a graph arm is the graph's, an NCCL timeout during the
        # capture is the capture's (docs/failures.md)
        transient = find_transient(log_path, arm=cfg["run"].get("arm"), warmup=cfg["run"].get("warmup"))
    if transient:
        # One automatic retry when every cause in the log is transient for this arm (a node or network fault).
        kept = jobs_dir / f"log.transient.{record['job_id']}.txt"
        shutil.copy(log_path, kept)
        say(f"{run_id}: transient failure ({transient}); retrying once")
        _side_file(jobs_dir).unlink(missing_ok=True)
        first = {**record, "log": str(kept), "signature": transient}
        record = submit_and_wait(run_id, plan, log_path, jobs_dir, settings, attempt, say)
        record["previous_attempts"] = [first]
    if decision is not None:  # the gate let it run: its decision is kept as well
        record["gate"] = decision.to_dict()
    write_json(run_json, record)
    _side_file(jobs_dir).unlink(missing_ok=True)  # finished: nothing to reattach to any more
    _failure_file(jobs_dir).unlink(missing_ok=True)
    return record
