"""The graphsweep executor: a Snakemake executor plugin that runs every run rule job as a Slurm job and waits for all
of them in ONE loop of the controller (`snakemake --profile slurm`: profiles/slurm/config.yaml `executor: graphsweep`),
and parses every finished run in the controller too.

A run rule job is the run's sequence (run/runrule.py run_steps), driven here (`OnSlurm`): `run_job` returns at once,
and every step that may block (begin, sbatch with its retries for up to submit_retry_s, confirming an old job gone,
reading a finished job's log) runs on this executor's own threads, never on Snakemake's scheduler thread nor on the
thread that polls. `check_active_jobs` (Snakemake calls it every poll_s from its waiting thread) polls every job at once
(run/watch.py Fleet: a stat of each result pickle, one batched sacct call per status interval, one progress line per
interval) and hands what it found to the run's next step: its run.json, the one retry of a transient failure, or an
infrastructure failure that Snakemake's --retries reruns. Before a run is submitted again, its old job is known gone
(scancel where it may still hold an allocation, then squeue until slurmctld holds it no more).

A parse rule job (rules/parse.smk) is parsed in this process, one at a time: Snakemake runs local rules without a
bound when the jobs go to a cluster (--local-cores is ignored), so a login node would hold one Python process per
finished run (benchmarks/login_node.py).

A controller that is killed leaves its jobs in the queue; the next one reattaches to each through its side file
(`.jobs/{run_id}/job.json`). Ctrl-C prints one summary of the jobs left running and cancels none of them.
Every other rule is a local rule (they all say `localrule: True`) and runs on Snakemake's local executor as before.

Snakemake finds the plugin as the package `snakemake_executor_plugin_graphsweep` (plugins/, installed by
`make install`), which is this module under the name Snakemake looks for.
"""

from __future__ import annotations

import sys
import threading
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncGenerator, Callable, Generator, List, Mapping

from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface
from snakemake_interface_executor_plugins.settings import CommonSettings

from graphsweep.fileio import UnusableFile
from graphsweep.layout import JobsDir
from graphsweep.parse.run_dir import parse_rule
from graphsweep.records import RunRecord, SpecError
from graphsweep.run import slurm
from graphsweep.run.local import stop_earlier
from graphsweep.run.runrule import JobEnd, Launch, RunTask, begin_run, run_steps
from graphsweep.run.sbatch import SubmitRefused
from graphsweep.run.slurm import InfraFailure, SacctWatcher
from graphsweep.run.submit import SubmitSettings, read_side, submit_slurm, waiting_limits
from graphsweep.run.watch import RESULT, VANISHED, Event, Fleet, Flight
from graphsweep.smk import run_config, run_dir

RUN_RULE, PARSE_RULE = "run", "parse"  # rules/run.smk, rules/parse.smk: the rules this executor runs
SUBMITTERS = 4  # threads that may sit in sbatch (and its retries) at once
FINISHED = "finished"  # a step's answer when the run's sequence has written its run.json

common_settings = CommonSettings(
    non_local_exec=True,
    implies_no_shared_fs=False,
    job_deploy_sources=False,
    pass_default_storage_provider_args=False,
    pass_default_resources_args=False,
    pass_envvar_declarations_to_cmd=False,
    auto_deploy_default_storage_provider=False,
    init_seconds_before_status_checks=0,
)


def say_to(log: str | Path | None) -> Callable[[str], None]:
    """A run's lines: into its rule's log, and on the controller's terminal with graphsweep's prefix."""

    def say(message: str) -> None:
        print(f"[graphsweep] {message}", file=sys.stderr, flush=True)
        if log:
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a") as f:
                f.write(message + "\n")

    return say


@dataclass
class Running:
    """A rule job in flight here: what runs for it on the executor's threads now (`step`), or the Slurm job its run
    waits for (`flight`); a run's sequence (`steps`, run/runrule.py) between them."""

    info: SubmittedJobInfo
    say: Callable[[str], None]
    step: Future | None = None
    flight: Flight | None = None
    task: RunTask | None = field(default=None, repr=False)
    steps: Generator[Launch, JobEnd, RunRecord] | None = field(default=None, repr=False)


def parse_job(job: Any) -> str:
    """A parse rule job, parsed in the controller as the rule's script does (scripts/parse_run.py)."""
    parse_rule(job.input, job.output)
    return FINISHED


class OnSlurm:
    """The run's sequence (run/runrule.py run_steps) driven with Slurm jobs: each step below runs on the executor's
    threads and answers what the run does next: wait for a Slurm job (a Flight), start one (a Launch), or nothing more
    (FINISHED); a failure raises."""

    def __init__(self, fleet: Fleet, config: Mapping[str, Any], stopping: threading.Event):
        self.fleet, self.config, self.stopping = fleet, config, stopping

    def begin(self, r: Running, job: Any) -> Flight | str:
        """begin (run/runrule.py begin_run), then the run's first job: submitted, or reattached."""
        config_file, config = run_config(job.input, job.output, job.params)
        run = run_dir(config_file, job.output.run, job.output.log, job.output.ranks)
        task = begin_run(run, JobsDir(job.params.jobs_dir), config, config_file if config is not None else None,
                         attempt=int(job.attempt), timeout_min=int(job.resources.timeout_min),
                         cluster=self.config.get("cluster"), slurm=self.config.get("slurm"),
                         gate=[Path(p) for p in job.input.gate], say=r.say)  # fmt: skip
        if isinstance(task, RunRecord):  # the launch gate skipped it: run.json is written
            return FINISHED
        if task.settings.cluster != "slurm":
            raise SpecError("profiles/slurm/config.yaml", "cluster", task.settings.cluster,
                            "the graphsweep executor submits Slurm jobs; run other clusters on Snakemake's local "
                            "executor (snakemake --cores N)")  # fmt: skip
        r.task, r.steps = task, run_steps(task, r.say)
        return self.launch(r, next(r.steps))

    def launch(self, r: Running, launch: Launch) -> Flight:
        """A job of the run: the one its side file names, where the launch may reattach; else a fresh one. sbatch's
        failures go into the run's sequence (recorded there) and fail the rule."""
        t = r.task
        side = read_side(t.jobs) if launch.reattach else None
        if side is not None and side.cluster == "slurm":  # the fleet's first poll says how it found the job
            return self.fleet.add(t.run_id, side, reattached=True, owner=r, limits=waiting_limits(t.settings))
        if side is not None:  # a local job of this run (an earlier sweep without the profile): known gone first
            stop_earlier(t.jobs, r.say)
        try:
            side = submit_slurm(t.run_id, t.plan, t.jobs, t.settings, t.attempt, r.say, stop=self.stopping)
        except (InfraFailure, SubmitRefused) as exc:
            r.steps.throw(exc)  # recorded, and raised again
        return self.fleet.add(t.run_id, side, owner=r, limits=waiting_limits(t.settings))

    def ended(self, r: Running, event: Event) -> Launch | str:
        """What a poll found, handed to the run's sequence: FINISHED, or the run's next job (the retry of a transient
        failure; a fresh job for a reattached one that ended without a result). A job that gave no result is known
        gone before the run may be submitted again: else the failure keeps it in the side file, and the next attempt
        reattaches to it."""
        f = event.flight
        if event.kind == RESULT:
            try:
                return r.steps.send(JobEnd(event.facts, f.side, f.watch.final_state))
            except StopIteration:
                return FINISHED
        failure = event.failure or InfraFailure("VANISHED", f"job {f.job_id} ended without a result")
        failure.gone = self.known_gone(f.job_id, failure.cancel, r.say)
        if event.kind == VANISHED and failure.gone:
            r.say(f"previous Slurm job {f.job_id} of {r.task.run_id} ended without a result; submitting a new one")
            return Launch(reattach=False)
        r.steps.throw(failure)  # recorded, and raised again
        raise AssertionError("the run's sequence raises what it is thrown")

    def known_gone(self, job_id: str, cancel: bool, say: Callable[[str], None]) -> bool:
        if cancel:
            slurm.cancel(job_id)
        if slurm.gone(job_id, stop=self.stopping):
            return True
        say(f"Slurm still holds job {job_id}: the run is not submitted again beside it (the next attempt reattaches "
            f"to it; scancel {job_id} to end it)")  # fmt: skip
        return False


class Executor(RemoteExecutor):
    def __post_init__(self) -> None:
        config = getattr(self.workflow, "config", None) or {}
        base = SubmitSettings(cluster="slurm", slurm=config.get("slurm") or {})
        self.fleet = Fleet(SacctWatcher(base.status_interval_s), waiting_limits(base), say_to(None))
        self.next_seconds_between_status_checks = base.poll_s
        self.stopping = threading.Event()  # the controller stops: no sbatch is retried, no old job waited for
        self.slurm = OnSlurm(self.fleet, config, self.stopping)
        self.submitting = ThreadPoolExecutor(SUBMITTERS, thread_name_prefix="graphsweep-submit")
        # one log read at a time (a parse, a finished run's retry decision): the controller's memory stays bounded
        self.reading = ThreadPoolExecutor(1, thread_name_prefix="graphsweep-read")
        self.running: dict[int, Running] = {}  # by Snakemake job id, for Ctrl-C (active_jobs is emptied while polled)
        self.running_lock = threading.Lock()

    def run_job(self, job: JobExecutorInterface) -> None:
        info = SubmittedJobInfo(job, aux={})
        r = info.aux["running"] = Running(info, say_to(next(iter(job.log), None)))
        rule = None if job.is_group() else job.rule.name
        if rule not in (RUN_RULE, PARSE_RULE):
            self._failed(r, SpecError("profiles/slurm/config.yaml", "executor", "graphsweep",
                                      f"the graphsweep executor runs the '{RUN_RULE}' and '{PARSE_RULE}' rules' jobs "
                                      f"only; rule '{rule}' must be a local rule (localrule: True)"))  # fmt: skip
            return
        self.workflow.async_run(job.prepare())
        if rule == PARSE_RULE:
            r.step = self.reading.submit(parse_job, job)
        else:
            r.step = self.submitting.submit(self.slurm.begin, r, job)
        with self.running_lock:
            self.running[job.jobid] = r
        self.report_job_submission(info)

    async def check_active_jobs(self, active_jobs: List[SubmittedJobInfo]) -> AsyncGenerator[SubmittedJobInfo, None]:
        if not active_jobs:  # also the calls Snakemake's waiting thread makes before __post_init__ has run
            return
        runs = [info.aux["running"] for info in active_jobs]
        for r in runs:
            if r.step is not None and r.step.done():
                self._step_done(r)
        events = {id(e.flight): e for e in self.fleet.poll(r.flight for r in runs if r.flight is not None)}
        for r in runs:
            if r.flight is not None and (event := events.get(id(r.flight))):
                self.fleet.forget([r.flight])
                # a result is read (the log, for the retry decision); a failure may wait for slurmctld to let go
                pool = self.reading if event.kind == RESULT else self.submitting
                r.flight, r.step = None, pool.submit(self.slurm.ended, r, event)
            if r.step is not None or r.flight is not None:
                yield r.info

    def cancel_jobs(self, active_jobs: List[SubmittedJobInfo]) -> None:
        """Ctrl-C (or a failed controller): the jobs stay in the queue for the next controller to reattach. A
        submission under way ends first (its side file written; no sbatch is retried any more), so that its job is in
        the summary too."""
        self.stopping.set()
        self.submitting.shutdown(wait=True, cancel_futures=True)
        with self.running_lock:
            runs = list(self.running.values())
        for r in runs:
            if r.flight is None and r.step is not None and r.step.done() and not r.step.cancelled() \
                    and r.step.exception() is None and isinstance(r.step.result(), Flight):  # fmt: skip
                r.flight = r.step.result()
        flights = [r.flight for r in runs if r.flight is not None]
        if flights:
            print(f"[graphsweep] {self.fleet.interrupt_message(flights)}", file=sys.stderr, flush=True)

    def shutdown(self) -> None:
        self.stopping.set()
        super().shutdown()
        for pool in (self.submitting, self.reading):
            pool.shutdown(wait=True, cancel_futures=True)

    def _step_done(self, r: Running) -> None:
        """A step on the executor's threads ended: the run now waits for a Slurm job, starts its next one, is
        finished, or failed."""
        step, r.step = r.step, None
        try:
            done = step.result()
        except BaseException as exc:  # noqa: BLE001 - one run's error fails that run, not the controller's others
            self._failed(r, exc)
            return
        if isinstance(done, Flight):
            r.flight = done
        elif isinstance(done, Launch):
            r.step = self.submitting.submit(self.slurm.launch, r, done)
        else:
            self._done(r)
            self.report_job_success(r.info)

    def _failed(self, r: Running, exc: BaseException) -> None:
        if isinstance(exc, InfraFailure):  # said by the run's sequence; Snakemake's --retries rerun the run
            msg = str(exc)
        elif isinstance(exc, (UnusableFile, SpecError)):  # SubmitRefused too: sbatch's own line, no retry
            msg = f"graphsweep: {' '.join(str(exc).split())}"
            r.say(msg)
        else:
            r.say("".join(traceback.format_exception(exc)))
            msg = f"{type(exc).__name__}: {exc}"
        self._done(r)
        self.report_job_error(r.info, msg=msg)

    def _done(self, r: Running) -> None:
        with self.running_lock:
            self.running.pop(r.info.job.jobid, None)
