"""The graphsweep executor: a Snakemake executor plugin that runs every run rule job as a Slurm job and waits for all
of them in ONE loop of the controller (`snakemake --profile slurm`: profiles/slurm/config.yaml `executor: graphsweep`).

On Snakemake's local executor each run rule is a process of its own that waits for its one job (run/runrule.py
execute_run): a login node holding 500 runs in flight held 500 of them. Here Snakemake hands each run rule job to
`run_job`, which takes the same steps as that process (run/runrule.py: config, launch gate, submit or reattach
through the side file) and returns; `check_active_jobs` (Snakemake calls it every `poll_s` from its own waiting
thread) polls them all at once (run/watch.py Fleet: a stat of each result pickle, one batched lookup of the shared
sacct cache per status interval, one progress line per interval) and finishes each run as the script would: its
run.json, the one retry of a transient failure, or an infrastructure failure that Snakemake's --retries reruns.
No process per run: a finished job is seen within `poll_s`.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncGenerator, Callable, List

from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface
from snakemake_interface_executor_plugins.settings import CommonSettings

from graphsweep.run.runrule import (
    RunTask,
    begin_run,
    fail_run,
    finish_run,
    job_record,
    keep_first_attempt,
    transient_of,
)
from graphsweep.run.slurmstate import InfraFailure
from graphsweep.run.sbatch import SubmitRefused
from graphsweep.run.submit import SubmitSettings, read_side, slurm_outcome, submit_slurm, waiting_limits
from graphsweep.run.watch import INFRA, RESULT, VANISHED, Event, Fleet, Flight
from graphsweep.smk import run_dir
from graphsweep.store.runfiles import write_run_config
from graphsweep.layout import JobsDir
from graphsweep.fileio import UnusableFile
from graphsweep.records import SpecError

RUN_RULE = "run"  # rules/run.smk: the only rule this executor runs

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
    """A run rule job in flight: its task, where it says things, and its first attempt when a transient failure sent
    it round again."""

    task: RunTask
    say: Callable[[str], None]
    first: dict[str, Any] | None = None
    flight: Flight | None = field(default=None, repr=False)


class Executor(RemoteExecutor):
    def __post_init__(self) -> None:
        config = getattr(self.workflow, "config", None) or {}
        base = SubmitSettings(cluster="slurm", slurm=config.get("slurm") or {})
        self.fleet = Fleet(base.state_cache(), waiting_limits(base), say_to(None))
        self.next_seconds_between_status_checks = base.poll_s
        self.running: dict[int, Running] = {}  # by Snakemake job id, for Ctrl-C (active_jobs is emptied while polled)
        self.running_lock = threading.Lock()

    # Snakemake's side ------------------------------------------------------------------------------------------
    def run_job(self, job: JobExecutorInterface) -> None:
        info = SubmittedJobInfo(job)
        say = say_to(next(iter(job.log), None))
        try:
            if job.is_group() or job.rule.name != RUN_RULE:
                raise SpecError("profiles/slurm/config.yaml", "executor", "graphsweep",
                                f"the graphsweep executor runs the '{RUN_RULE}' rule's jobs only; rule "
                                f"'{job.rule.name}' must be a local rule (localrule: True)")  # fmt: skip
            self.workflow.async_run(job.prepare())
            running = self._begin(job, say)
            if running is None:  # the launch gate skipped it: run.json is written
                self.report_job_success(info)
                return
        except (UnusableFile, SpecError) as exc:  # SubmitRefused too: sbatch's own line, no retry
            line = f"graphsweep: {' '.join(str(exc).split())}"
            say(line)
            self.report_job_error(info, msg=line)
            return
        except InfraFailure as exc:  # sbatch kept failing
            self.report_job_error(info, msg=str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - one run's error fails that run, not the controller's other runs
            say("".join(traceback.format_exception(exc)))
            self.report_job_error(info, msg=f"{type(exc).__name__}: {exc}")
            return
        info = SubmittedJobInfo(job, external_jobid=running.flight.job_id, aux={"running": running})
        with self.running_lock:
            self.running[job.jobid] = running
        self.report_job_submission(info)

    async def check_active_jobs(self, active_jobs: List[SubmittedJobInfo]) -> AsyncGenerator[SubmittedJobInfo, None]:
        if not active_jobs:  # also the calls Snakemake's waiting thread makes before __post_init__ has run
            return
        runs = [(info, info.aux["running"]) for info in active_jobs]
        events = {id(e.flight): e for e in self.fleet.poll(r.flight for _, r in runs)}
        for info, running in runs:
            event = events.get(id(running.flight))
            if event is None or self._still_running(info, running, event):
                yield info

    def cancel_jobs(self, active_jobs: List[SubmittedJobInfo]) -> None:
        """Ctrl-C (or a failed controller): the jobs stay in the queue for the next controller to reattach."""
        with self.running_lock:
            flights = [r.flight for r in self.running.values() if r.flight is not None]
        if flights:
            print(f"[graphsweep] {self.fleet.interrupt_message(flights)}", file=sys.stderr, flush=True)

    # The run's steps (run/runrule.py) ---------------------------------------------------------------------------
    def _begin(self, job: Any, say: Callable[[str], None]) -> Running | None:
        config = getattr(self.workflow, "config", None) or {}
        run = run_dir(job.output.config, job.output.run, job.output.log, job.output.ranks)
        write_run_config(run, job.params.config)  # the launch record is the rule's params (rules/run.smk)
        task = begin_run(run, JobsDir(job.params.jobs_dir),
                         attempt=int(job.attempt), timeout_min=int(job.resources.timeout_min),
                         cluster=config.get("cluster"), slurm=config.get("slurm"),
                         gate=[Path(p) for p in job.input.gate], say=say)  # fmt: skip
        if not isinstance(task, RunTask):
            return None
        if task.settings.cluster != "slurm":
            raise SpecError("profiles/slurm/config.yaml", "cluster", task.settings.cluster,
                            "the graphsweep executor submits Slurm jobs; run other clusters on Snakemake's local "
                            "executor (snakemake --cores N)")  # fmt: skip
        running = Running(task, say)
        side = read_side(task.jobs)
        if side and side.get("cluster") == "slurm":  # the fleet's first poll says how it found the job
            running.flight = self._watch(running, side, reattached=True)
        else:
            self._submit(running)
        return running

    def _watch(self, running: Running, side: dict[str, Any], reattached: bool = False) -> Flight:
        return self.fleet.add(running.task.run_id, side, reattached=reattached, owner=running,
                              limits=waiting_limits(running.task.settings))

    def _submit(self, running: Running) -> None:
        t = running.task
        try:
            side = submit_slurm(t.run_id, t.plan, t.jobs, t.settings, t.attempt, running.say)
        except (InfraFailure, SubmitRefused) as exc:  # recorded for `graphsweep status`, the job forgotten
            fail_run(t, exc, running.say)
            exc.recorded = True  # type: ignore[union-attr]  # _still_running records it not again
            raise
        running.flight = self._watch(running, side)

    def _still_running(self, info: SubmittedJobInfo, running: Running, event: Event) -> bool:
        """Finish the run a poll found done or failed; True while it is in flight again (a retry, a new job)."""
        t, say = running.task, running.say
        self.fleet.forget([event.flight])
        try:
            if event.kind == VANISHED:
                say(f"previous Slurm job {event.flight.job_id} of {t.run_id} ended without a result; submitting a "
                    "new one")  # fmt: skip
                self._submit(running)
                return True
            if event.kind == INFRA:
                raise event.failure
            assert event.kind == RESULT, event.kind
            record = job_record(t, slurm_outcome(event.flight.side), event.flight.side, event.flight.watch.final_state)
            transient = None if running.first else transient_of(t, record)
            if transient:
                running.first = keep_first_attempt(t, record, transient, say)
                self._submit(running)
                return True
            if running.first:
                record["previous_attempts"] = [running.first]
            finish_run(t, record)
        except InfraFailure as exc:
            if not getattr(exc, "recorded", False):
                fail_run(t, exc, say)
            self._done(info)
            self.report_job_error(info, msg=str(exc))
            return False
        except SubmitRefused as exc:  # a resubmission sbatch refused: recorded by _submit
            line = f"graphsweep: {' '.join(str(exc).split())}"
            say(line)
            self._done(info)
            self.report_job_error(info, msg=line)
            return False
        except Exception as exc:  # noqa: BLE001 - as in run_job
            say("".join(traceback.format_exception(exc)))
            self._done(info)
            self.report_job_error(info, msg=f"{type(exc).__name__}: {exc}")
            return False
        self._done(info)
        self.report_job_success(info)
        return False

    def _done(self, info: SubmittedJobInfo) -> None:
        with self.running_lock:
            self.running.pop(info.job.jobid, None)
