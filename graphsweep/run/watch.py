"""Waiting for Slurm jobs: ONE loop for every job of a controller in flight (`Fleet`, polled by the graphsweep executor,
run/executor.py), and what one job's sacct records mean over time (`JobWatch`).

Each poll stats every job's result pickle (a finished job is seen within one poll); the states of all jobs come from
one batched sacct call per status interval (run/slurm.py SacctWatcher), and one progress line per interval covers
them all. What a poll finds is an `Event` per job: its result, an infrastructure failure, or (a job found in a side
file when the controller started) that it ended without a result. Nothing here submits or cancels a job: the
executor does, off the thread that polls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from graphsweep.records import JobSide
from graphsweep.run.slurm import (
    ALIVE_STATES,
    GONE,
    SLURM_ENDS,
    STUCK_STATES,
    InFlight,
    InfraFailure,
    Lookup,
    SacctWatcher,
    WaitLimits,
    interrupt_message,
    job_result,
    progress_line,
    result_pickle,
    slurmctld_state,
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
    """One job's sacct records over time: `observe` raises InfraFailure once the job will never give a result.

    A job sacct has no record of for `lost_after_s` is asked about once more, of slurmctld itself (squeue): a job it
    still holds is not lost (the accounting lags or fails: waited for), one it holds no more is lost and known gone,
    and when slurmctld cannot say, the question waits for the next look. So a run is never submitted again beside
    its own job still in the queue."""

    def __init__(self, job_id: str, limits: WaitLimits, started: float | None = None,
                 ask_slurmctld: Callable[[str], str | None] = slurmctld_state):  # fmt: skip
        self.job_id, self.limits, self.ask_slurmctld = str(job_id), limits, ask_slurmctld
        self.started = time.monotonic() if started is None else started
        self.state = "SUBMITTED"
        self.guard = StuckGuard(limits.stuck_limit_s)
        self.absent_since: float | None = None
        self.ended: tuple[str, float] | None = None
        self.note: str | None = None  # a line to say once (slurmctld holds a job sacct does not know)

    def observe(self, view: Lookup, now: float) -> None:
        """One look at the job's record (`now`: time.monotonic())."""
        lim = self.limits
        if view.record is None:
            if view.ok and view.queried_at >= self.started:
                self.absent_since = self.absent_since or now
                if now - self.absent_since > lim.lost_after_s:
                    self._lost(now)
            return
        self.absent_since = None
        self.state = view.record.state
        stuck = self.guard.observe(self.state, now)
        if stuck:
            raise InfraFailure(self.state, f"job {self.job_id} {stuck}; cancelled it so a retry can run", cancel=True)
        if self.state in ALIVE_STATES or self.state in STUCK_STATES:
            self.ended = None
            return
        # Ended. A result may still be on its way over a shared filesystem.
        if self.ended is None or self.ended[0] != self.state:
            self.ended = (self.state, now)
        elif now - self.ended[1] > lim.result_grace_s:
            rec = view.record
            reason = f" ({rec.reason})" if rec.reason not in ("", "None") else ""
            raise InfraFailure(self.state, f"job {self.job_id} ended {self.state}{reason} after {rec.elapsed} "
                                           f"without a result (time limit {rec.timelimit})")  # fmt: skip

    def _lost(self, now: float) -> None:
        held = self.ask_slurmctld(self.job_id)
        if held == GONE:
            raise InfraFailure("LOST", f"sacct has had no record of job {self.job_id} for {now - self.absent_since:.0f} "
                                       "s and slurmctld holds it no more")  # fmt: skip
        if held is not None:  # in the queue: the accounting lags or fails, the job is there
            self.note = (f"sacct has had no record of job {self.job_id} for {now - self.absent_since:.0f} s, but "
                         f"slurmctld holds it ({held}): waiting for it")  # fmt: skip
            self.state, self.absent_since = held, now

    @property
    def final_state(self) -> str:
        """The state run.json records for a job whose result arrived."""
        return "COMPLETED" if self.state in ALIVE_STATES | {"SUBMITTED"} else self.state


def still_there(view: Lookup, ask_slurmctld: Callable[[str], str | None], job_id: str) -> bool | None:
    """Whether a job found in a side file may still give its result: queued, running, stuck, or sacct could not say
    (True); ended without one (False); None when neither sacct nor slurmctld can tell yet (no record, squeue failed)."""
    state = view.record.state if view.record else None
    if state in ALIVE_STATES | STUCK_STATES or (state is None and not view.ok):
        return True
    if state is not None:
        return False
    held = ask_slurmctld(job_id)  # no sacct record (the accounting lags, or lost it): slurmctld's own word
    return None if held is None else held != GONE


# --------------------------------------------------------------------------------------------------
# One loop for all runs in flight


@dataclass
class Flight:
    """One run's Slurm job in flight. `reattached`: found in its side file when the controller started; whether it
    may still give its result is decided at the first sacct look made after that. A result whose training did not
    exit 0 waits for Slurm's word on the job (`result_seen`): a job Slurm ended (scancel, time limit) is no result."""

    label: str
    side: JobSide
    watch: JobWatch
    reattached: bool = False
    decided: bool = True
    owner: Any = None  # the caller's handle (the executor's run)
    result_seen: float | None = None  # when the result pickle was found
    facts: dict[str, Any] | None = field(default=None, repr=False)  # what the job function returned

    @property
    def job_id(self) -> str:
        return self.side.job_id


@dataclass(frozen=True)
class Event:
    """What a poll found: `result` (the job's facts), `infra` (an InfraFailure), or `vanished` (a reattached job ended
    without a result: submit the run again)."""

    flight: Flight
    kind: str
    failure: InfraFailure | None = None

    @property
    def facts(self) -> dict[str, Any]:
        assert self.flight.facts is not None
        return self.flight.facts


RESULT, INFRA, VANISHED = "result", "infra", "vanished"


@dataclass
class Fleet:
    """Every Slurm job of one controller, watched by one loop (`poll`, called every `limits.poll_s` seconds)."""

    watcher: SacctWatcher
    limits: WaitLimits
    say: Callable[[str], None] = print
    ask_slurmctld: Callable[[str], str | None] = slurmctld_state
    next_progress: float = 0.0
    read_at: float = -1.0  # the sacct answer the last poll acted on
    last: dict[str, Lookup] = field(default_factory=dict)

    def add(self, label: str, side: JobSide, reattached: bool = False, owner: Any = None,
            limits: WaitLimits | None = None) -> Flight:
        """A job to watch (`limits`: its run's, else the fleet's)."""
        watch = JobWatch(side.job_id, limits or self.limits, ask_slurmctld=self.ask_slurmctld)
        return Flight(label, side, watch, reattached, decided=not reattached, owner=owner)

    def poll(self, flights: Iterable[Flight], now: float | None = None) -> list[Event]:
        """Result pickles of all flights; their states once per status interval; a progress line once per interval."""
        now = time.monotonic() if now is None else now
        flights = list(flights)
        events: list[Event] = []
        asking = []  # the flights sacct is asked about: no result yet, or one that waits for Slurm's word
        for f in flights:
            if f.result_seen is None and result_pickle(f.side).exists():
                if not f.decided:  # a reattached job that finished before (or while) the controller came back
                    f.decided = True
                    self.say(f"reattaching {f.label} to Slurm job {f.job_id} (finished, result present)")
                f.result_seen = now
                try:
                    f.facts = job_result(f.side)
                except InfraFailure as exc:
                    events.append(Event(f, INFRA, exc))
                    continue
                if not f.facts.get("exit_code"):
                    events.append(Event(f, RESULT))
                    continue
            asking.append(f)
        if asking:
            looks = self.watcher.look([f.job_id for f in asking], now)
            self.last.update(looks)
            if self.watcher.queried_at > self.read_at:  # sacct answered anew (at most once per status interval)
                self.read_at = self.watcher.queried_at
                events += [e for f in asking if (e := self._look(f, looks[f.job_id], now))]
        if flights and now >= self.next_progress:
            if self.next_progress:  # not at the first poll: the submissions just said where every run is
                self.say(progress_line(self._in_flight(flights)))
            self.next_progress = now + self.limits.progress_interval_s
        return events

    def _look(self, f: Flight, view: Lookup, now: float) -> Event | None:
        """What one sacct look says of one flight: an event, or None (keep waiting)."""
        if f.result_seen is not None:
            return self._settle(f, view, now)
        if not f.decided:
            if view.queried_at < f.watch.started:
                return None  # no sacct look since the controller found the job: decide at the next one
            there = still_there(view, self.ask_slurmctld, f.job_id)
            if there is None:
                return None
            f.decided = True
            if not there:
                return Event(f, VANISHED)
            state = view.record.state if view.record else "unknown: sacct failed"
            self.say(f"reattaching {f.label} to Slurm job {f.job_id} (state {state})")
        try:
            f.watch.observe(view, now)
        except InfraFailure as exc:
            return Event(f, INFRA, exc)
        if f.watch.note:
            self.say(f"{f.label}: {f.watch.note}")
            f.watch.note = None
        return None

    def _settle(self, f: Flight, view: Lookup, now: float) -> Event | None:
        """A result whose training did not exit 0: Slurm's state of the job, looked at after the result appeared, says
        whether it is one. A job Slurm ended (CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL) was stopped: its training's
        exit code is Slurm's signal, an infrastructure failure that is retried; otherwise it is the run's result."""
        if view.queried_at < f.result_seen or not view.ok:
            return None
        state = view.record.state if view.record else None
        if state in SLURM_ENDS:
            code = f.facts.get("exit_code") if f.facts else None
            return Event(f, INFRA, InfraFailure(state, f"job {f.job_id} ended {state} while its training ran (the "
                                                       f"training's exit code {code} is Slurm stopping it, not a "
                                                       "result)"))  # fmt: skip
        if (state in ALIVE_STATES or state is None) and now - f.result_seen < self.limits.result_grace_s:
            return None  # the job is still ending (or sacct has not caught up): ask at the next look
        f.watch.state = state or f.watch.state
        return Event(f, RESULT)

    def forget(self, flights: Iterable[Flight]) -> None:
        for f in flights:
            self.last.pop(f.job_id, None)

    def _in_flight(self, flights: Iterable[Flight]) -> list[InFlight]:
        out = []
        for f in sorted(flights, key=lambda f: f.label):
            view = self.last.get(f.job_id)
            out.append(InFlight(f.job_id, f.label, f.side.log, view.record if view else None))
        return out

    def interrupt_message(self, flights: Iterable[Flight]) -> str:
        """What a stopped controller says about the jobs it leaves running (one message for all of them)."""
        return interrupt_message(self._in_flight(flights))
