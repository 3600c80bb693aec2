"""Waiting for Slurm jobs: what one job's sacct records mean over time (JobWatch), said once for both waiters:

- `Fleet`: ONE loop for every run of a controller in flight (the graphsweep executor, run/executor.py): a result
  pickle is a file stat per job per poll, the states of all jobs come from one batched lookup of the shared sacct
  cache per status interval, and one progress line per interval covers them all; no process per run;
- `SlurmWaiter`: one process waits for one job (the run rule's script on Snakemake's local executor).

Both look at the result pickle first (a finished job is seen within one poll) and at sacct only to notice a job that
ended without a result (cancelled, time limit, node failure), one sacct has lost, or one that hangs (PREEMPTED,
UNKNOWN).
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from graphsweep.run.slurmstate import (
    ALIVE_STATES,
    STUCK_STATES,
    ControllerGone,
    InfraFailure,
    JobRecord,
    Lookup,
    SlurmStateCache,
    WaitLimits,
    Waiting,
    interrupt_message,
    progress_line,
    result_pickle,
)


@dataclass
class StuckGuard:
    """Wall-clock limit for a job that sits in PREEMPTED or UNKNOWN.

    submitit's own wait loop treats both as "not done" and would wait forever when Slurm never requeues the job or
    sacct lost it; observe() returns a reason once the job has been stuck for longer than limit_s in a row.
    """

    limit_s: float
    stuck_state: str | None = None
    stuck_since: float | None = None

    def observe(self, state: str, now: float) -> str | None:
        if state not in STUCK_STATES:
            self.stuck_state, self.stuck_since = None, None
            return None
        if state != self.stuck_state or self.stuck_since is None:
            self.stuck_state, self.stuck_since = state, now
        stuck_for = now - self.stuck_since
        if stuck_for > self.limit_s:
            return f"stuck in {state} for {stuck_for:.0f} s (limit {self.limit_s:.0f} s)"
        return None


class JobWatch:
    """One job's sacct records over time: `observe` raises InfraFailure once the job will never give a result."""

    def __init__(self, job_id: str, limits: WaitLimits, started: float | None = None):
        self.job_id, self.limits = str(job_id), limits
        self.started = time.time() if started is None else started  # wall clock, as the cache's queried_at
        self.state = "SUBMITTED"
        self.guard = StuckGuard(limits.stuck_limit_s)
        self.absent_since: float | None = None  # monotonic
        self.ended: tuple[str, float] | None = None

    def observe(self, view: Lookup, now: float) -> None:
        """One look at the job's record (`now`: time.monotonic())."""
        lim = self.limits
        if view.record is None:
            if view.ok and view.queried_at > self.started:
                self.absent_since = self.absent_since or now
                if now - self.absent_since > lim.lost_after_s:
                    raise InfraFailure("LOST", f"sacct has had no record of job {self.job_id} for "
                                               f"{now - self.absent_since:.0f} s")  # fmt: skip
            return
        self.absent_since = None
        self.state = view.record.state
        stuck = self.guard.observe(self.state, now)
        if stuck:
            raise InfraFailure(self.state, f"job {self.job_id} {stuck}; cancelled it so a retry can run", cancel=True)
        if self.state in ALIVE_STATES or self.state in STUCK_STATES:
            return
        # Ended. A result may still be on its way over a shared filesystem.
        if self.ended is None or self.ended[0] != self.state:
            self.ended = (self.state, now)
        elif now - self.ended[1] > lim.result_grace_s:
            rec = view.record
            reason = f" ({rec.reason})" if rec.reason not in ("", "None") else ""
            raise InfraFailure(self.state, f"job {self.job_id} ended {self.state}{reason} after {rec.elapsed} "
                                           f"without a result (time limit {rec.timelimit})")  # fmt: skip

    @property
    def final_state(self) -> str:
        """The state run.json records for a job whose result arrived."""
        return "COMPLETED" if self.state in ALIVE_STATES | {"SUBMITTED"} else self.state


def cancel_job(job_id: str) -> None:
    subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=60, check=False)


def still_there(view: Lookup) -> bool:
    """Whether a job found in a side file may still give its result: queued, running, stuck, or sacct could not say."""
    state = view.record.state if view.record else None
    return state in ALIVE_STATES | STUCK_STATES or (state is None and not view.ok)


# --------------------------------------------------------------------------------------------------
# One loop for all runs in flight


@dataclass
class Flight:
    """One run's Slurm job in flight. `reattached`: found in its side file when the controller started; whether it
    may still give its result is decided at the first sacct look made after that."""

    label: str
    side: Mapping[str, Any]
    watch: JobWatch
    reattached: bool = False
    decided: bool = True
    owner: Any = None  # the caller's handle (the executor's Snakemake job)

    @property
    def job_id(self) -> str:
        return str(self.side["job_id"])


@dataclass(frozen=True)
class Event:
    """What a poll found: `result` (the result pickle is there), `infra` (an InfraFailure), or `vanished` (a
    reattached job ended without a result: submit the run again)."""

    flight: Flight
    kind: str
    failure: InfraFailure | None = None


RESULT, INFRA, VANISHED = "result", "infra", "vanished"


@dataclass
class Fleet:
    """Every Slurm job of one controller, watched by one loop (`poll`, called every `limits.poll_s` seconds)."""

    cache: SlurmStateCache
    limits: WaitLimits
    say: Callable[[str], None] = print
    controller: int = field(default_factory=os.getpid)
    next_check: float = 0.0
    next_progress: float = 0.0
    last: dict[str, Lookup] = field(default_factory=dict)

    def add(self, label: str, side: Mapping[str, Any], reattached: bool = False, owner: Any = None,
            limits: WaitLimits | None = None) -> Flight:
        """A job to watch (`limits`: its run's, else the fleet's)."""
        return Flight(label, dict(side), JobWatch(str(side["job_id"]), limits or self.limits), reattached,
                      decided=not reattached, owner=owner)  # fmt: skip

    def poll(self, flights: Iterable[Flight], now: float | None = None) -> list[Event]:
        """Result pickles of all flights; their states once per status interval; a progress line once per interval."""
        now = time.monotonic() if now is None else now
        flights = list(flights)
        events: list[Event] = []
        waiting = []
        for f in flights:
            if result_pickle(f.side).exists():
                if not f.decided:  # a reattached job that finished before (or while) the controller came back
                    f.decided = True
                    self.say(f"reattaching {f.label} to Slurm job {f.job_id} (finished, result present)")
                events.append(Event(f, RESULT))
            else:
                waiting.append(f)
        if waiting and now >= self.next_check:
            self.next_check = now + self.limits.status_interval_s
            self.last = self.cache.lookup_many({f.job_id: (f.label, str(f.side.get("log") or "")) for f in waiting},
                                               self.controller)  # fmt: skip
            for f in waiting:
                view = self.last[f.job_id]
                if not f.decided:
                    if view.queried_at < f.watch.started:
                        continue  # no sacct look since the controller found the job: decide at the next one
                    f.decided = True
                    if not still_there(view):
                        events.append(Event(f, VANISHED))
                        continue
                    state = view.record.state if view.record else "unknown: sacct failed"
                    self.say(f"reattaching {f.label} to Slurm job {f.job_id} (state {state})")
                try:
                    f.watch.observe(view, now)
                except InfraFailure as exc:
                    if exc.cancel:
                        cancel_job(f.job_id)
                    events.append(Event(f, INFRA, exc))
        if flights and now >= self.next_progress:
            if self.next_progress:  # not at the first poll: the submissions just said where every run is
                self.say(progress_line(self._jobs(flights)))
            self.next_progress = now + self.limits.progress_interval_s
        return events

    def forget(self, flights: Iterable[Flight]) -> None:
        ids = [f.job_id for f in flights]
        if ids:
            self.cache.forget_many(ids)
        for job_id in ids:
            self.last.pop(job_id, None)

    def _jobs(self, flights: Iterable[Flight]) -> list[tuple[str, Waiting, JobRecord | None]]:
        out = []
        for f in sorted(flights, key=lambda f: f.label):
            view = self.last.get(f.job_id)
            waiting = Waiting(label=f.label, log=str(f.side.get("log") or ""))
            out.append((f.job_id, waiting, view.record if view else None))
        return out

    def interrupt_message(self, flights: Iterable[Flight]) -> str:
        """What a stopped controller says about the jobs it leaves running (one message for all of them)."""
        return interrupt_message(self._jobs(flights))


# --------------------------------------------------------------------------------------------------
# One process waiting for one job (the run rule's script)


class SlurmWaiter:
    """Waits for one Slurm job: result pickle first, states from the shared sacct cache, no per-process sacct.

    The controller is the parent process (Snakemake runs the rule's script as its direct child); when it dies the
    waiter leaves the job alone for a later reattach instead of living on as an orphan.
    """

    def __init__(
        self,
        label: str,
        side: Mapping[str, Any],
        cache: SlurmStateCache,
        say: Callable[[str], None] = print,
        limits: WaitLimits = WaitLimits(),
    ):
        self.label, self.side, self.cache, self.say, self.limits = label, side, cache, say, limits
        self.job_id = str(side["job_id"])
        self.pickle = result_pickle(side)
        self.parent = os.getppid()
        self.cache.register(self.job_id, label, side.get("log"), controller=self.parent)

    def controller_alive(self) -> bool:
        return os.getppid() == self.parent

    def look_now(self, deadline_s: float = 120.0) -> Lookup:
        """The job's record from a cache refresh made after this call started (reattach decisions)."""
        t0, end = time.time(), time.monotonic() + deadline_s
        while True:
            view = self.cache.lookup(self.job_id)
            if view.queried_at >= t0 or time.monotonic() > end:
                return view
            time.sleep(min(1.0, self.cache.min_interval_s / 4))

    def wait(self) -> str:
        """Block until the result pickle exists; return the state run.json records. InfraFailure when it never will."""
        lim = self.limits
        watch = JobWatch(self.job_id, lim)
        next_check = 0.0
        while True:
            # The controller first: an orphaned waiter must not finish the rule (write run.json, drop the side file)
            # behind the back of the next controller, which reattaches to the same job.
            if not self.controller_alive():
                self.say(
                    f"{self.label}: the Snakemake controller is gone; leaving Slurm job {self.job_id} ({watch.state}) "
                    f"running. Run the same snakemake command again to reattach, or cancel it: scancel {self.job_id}"
                )
                raise ControllerGone(1)
            if self.pickle.exists():
                return watch.final_state
            now = time.monotonic()
            if now >= next_check:
                next_check = now + lim.status_interval_s * random.uniform(0.5, 1.0)
                try:
                    watch.observe(self.cache.lookup(self.job_id), now)
                except InfraFailure as exc:
                    if exc.cancel:
                        cancel_job(self.job_id)
                    raise
                self.progress()
            time.sleep(lim.poll_s)

    def progress(self) -> None:
        jobs = self.cache.progress_due(self.parent, self.limits.progress_interval_s)
        if jobs:
            self.say(progress_line(jobs))

    def interrupted(self) -> None:
        """Ctrl-C / SIGTERM: one waiter per controller prints what is left running and how to cancel or reattach."""
        self.cache.lookup(self.job_id)  # a fresh state for the summary when the rate limit allows
        jobs = self.cache.interrupted(self.parent)
        if jobs is not None:
            self.say(interrupt_message(jobs))

    def forget(self) -> None:
        self.cache.forget(self.job_id)
