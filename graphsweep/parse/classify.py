"""What happened in one run: the classification rules (graphsweep/parse/rules.py RULES) applied to its evidence, then
the teardown rule and the retry policy.

The teardown rule: a failure after the end-of-training marker (or after the run's last iteration) is the run's
failure at phase `teardown` (the walltime, an exception, a fatal line, torchrun's exit report, a signal), and its
steady window stays usable when complete: a teardown hang is not a slowdown. Only when run.json says exit 0 /
COMPLETED, or without run.json when no process said it died, is a signature after the marker teardown noise (e.g.
c10d `Connection reset by peer` as ranks exit). The retry policy (graphsweep/parse/retry.py, docs/failures.md): a
crashed run whose every cause is transient for its arm records `transient`, the run rule retries it once (it asks
this classifier: read.find_transient), and a retry that fails the same way is `crashed` with both attempts' evidence
in the reason.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from graphsweep import logformat as lf
from graphsweep.parse import signatures as sg
from graphsweep.parse.context import Ctx, after_end, graph_running, phase_of, state_of, unexplained, where
from graphsweep.parse.measure import measure
from graphsweep.parse.records import Evidence, RunSummary
from graphsweep.parse.retry import retries, retry_note, transient_of
from graphsweep.parse.rules import RULES
from graphsweep.records import GateDecision
from graphsweep.vocab import COMPLETED, CRASHED, GRAPH, INFRA_OUTCOMES, INVALID, TEARDOWN, UNPARSEABLE, CAPTURE


def classify(ev: Evidence, *, arm: str, warmup: int | None, run_info: Mapping | None, min_steady: int,
             previous: list[dict] | None = None, gate: GateDecision | None = None) -> RunSummary:
    """Apply RULES, then the teardown rule and the retry policy (module docstring). `previous`: earlier attempts with
    their evidence; `gate`: the launch gate's decision, when run.json records one."""
    c = replace(_context(ev, arm, warmup, run_info, min_steady, previous), gate=gate)
    s = next(out for rule in RULES if (out := rule.decide(c)) is not None)
    if s.outcome in INFRA_OUTCOMES and not c.job:  # a bare log (no run.json) reads as the log shows
        _no_job_to_retry(s)
    if s.phase == TEARDOWN and s.outcome not in (COMPLETED, INVALID, UNPARSEABLE, *INFRA_OUTCOMES):
        s.failed_iteration = None
        s.measurement_usable = s.steady_n >= min_steady and (arm != GRAPH or (s.capture_seen and s.replay_seen))
        s.reason += (" [after the end of training: a teardown failure, not a slowdown; the steady window "
                     + ("measured before it stays usable]" if s.measurement_usable else "is incomplete]"))
    if s.outcome == CRASHED:
        _retry_policy(c)
    if s.outcome not in INFRA_OUTCOMES:
        retry_note(s)
    return s


def _context(ev: Evidence, arm: str, warmup: int | None, run_info: Mapping | None, min_steady: int,
             previous: list[dict] | None) -> Ctx:
    info = dict(run_info or {})
    s = RunSummary(outcome=UNPARSEABLE, arm=arm, warmup=warmup, files=list(ev.files), device=ev.device)
    state = state_of(info)
    exit_code = info.get("exit_code")
    s.exit_code = int(exit_code) if isinstance(exit_code, (int, float)) else None
    s.slurm_state = state
    s.attempt = info.get("attempt")
    s.previous_attempts = list(previous or [])
    if ev.end_marker:
        s.end_marker = ev.end_marker.text
    s.notes.extend(ev.superseded)
    if ev.iter_lines_unparsed:
        s.notes.append(f"{ev.iter_lines_unparsed} iteration line(s) without a readable elapsed time (cut, glued, "
                       "<= 0 ms)")
    measure(s, ev, arm, warmup, min_steady)
    d = ev.death
    # without run.json, a process that said it died after the end marker (an exception, a fatal line, the launcher's
    # exit report, a signal) did not exit cleanly; run.json's exit 0 / COMPLETED is believed
    died_after_end = any(after_end(ev, m) for m in (d.cause, d.fatal, d.launcher, d.signal))
    exited_ok = s.exit_code in (0, None) and state in (None, "COMPLETED") and not (
        s.exit_code is None and state is None and died_after_end)
    # teardown noise after a clean end (never the walltime or the OOM killer: the job did not end by itself)
    noise = [h for h in ev.hits if h.after_end and exited_ok and h.sig.rule not in (sg.R_WALLTIME, sg.R_HOST_OOM)]
    if noise:
        s.notes.append(f"ignored after the end of training: {noise[0].sig.id} at {where(noise[0])}")
    # a warning the run trained past to its last iteration did not end it (NCCL's NVLS registration fallback)
    trained_all = s.last_iteration is not None and s.train_iters is not None and s.last_iteration >= s.train_iters
    survived = [h for h in ev.hits if trained_all and not h.after_end and lf.NCCL_WARN in h.text and h not in noise]
    if survived:
        s.notes.append(f"ignored: {survived[0].sig.id} at {where(survived[0])} is an NCCL warning and the run trained "
                       f"on to its last iteration ({s.last_iteration}): it did not end the run")
    # run.json says no job ran it (`job_id: null`: an ingested run, `graphsweep compare`'s logs): nothing reruns it
    job = not ("job_id" in info and info["job_id"] is None)
    return Ctx(ev, arm, warmup, info, state, s, min_steady, [h for h in ev.hits if h not in noise + survived],
               ev.end_marker is not None or ev.end_data is not None, exited_ok, job)


def _no_job_to_retry(s: RunSummary) -> None:
    """An infrastructure end (preemption, cancel, a lost job) of a log no job will rerun (an ingested log, `graphsweep
    compare`): not a result, and nothing retries it; the cell says why instead of failing the report."""
    s.reason = f"not a result: the log ends in {s.outcome} ({s.reason}), and no job of graphsweep's can rerun it"
    s.outcome, s.infrastructure, s.measurement_usable = UNPARSEABLE, False, False


def _retry_policy(c: Ctx) -> None:
    """The retry policy's verdict on a crashed run (signatures.transient_of): its failure lines before the end marker,
    each with whether a graph was running (a capture, or a graph arm's replay), and whether Bridge named an exception
    no signature explains."""
    phases = [(h, phase_of(h, c.arm, c.warmup, c.ev)[0]) for h in c.hits]
    seen = [(h.sig, graph_running(c, phase)) for h, phase in phases if phase != TEARDOWN]
    t = transient_of(seen, c.arm, unexplained=unexplained(c))
    c.s.transient = t.needle.decode() if t else None
    p = c.proof
    if t is None and p is not None and p.sig.retry and (phase := phase_of(p, c.arm, c.warmup, c.ev)[0]) != TEARDOWN:
        if not retries(p.sig, c.arm, graph_running(c, phase)):
            why = f"retried in an eager arm only; in a {c.arm} arm the graph is the suspect"
            if p.sig.retry == sg.RETRY_NO_GRAPH:
                why = "it came during a capture: the capture's own hang" if phase == CAPTURE else \
                    "it came while the graph arm replayed its graphs: a hang of the captured collectives repeats"
            c.s.reason += f" [not retried: {why} (docs/failures.md)]"
