"""What happened in one run: the classification order over the evidence of its files.

Every signature is a literal substring (searched anywhere in a physical line, so srun labels such as
`mx_v1_perf/0 `, `[rank4]: `, `[default0]:` and glued ranks do not matter), with the error class it
proves and where Megatron/PyTorch/Slurm print it (file, line, version: docs/megatron-facts.md, "§x.y" below). The parser finds lines cheaply with
ANCHORS (every needle contains an anchor, or sits on a line that does: tests check this), then
tries the needles on those lines only.

Classification order (docs/megatron-facts.md §6.3, extended; the first rule that matches decides):

    #   evidence                                              outcome     error_class
    1   run.json state PREEMPTED / NODE_FAIL / CANCELLED,       preempted / node_fail / cancelled / lost
        Slurm `DUE TO PREEMPTION|NODE FAILURE`, job lost      (infrastructure: retried, never a result)
    2   run.json state OUT_OF_MEMORY, slurmstepd oom-kill     crashed     host_oom   (host RAM, not CUDA)
    3   no readable log: missing, empty, binary               unparseable (or lost when run.json has no end)
    4   `[graphsweep] blocked:` (builtin workload)            blocked     no_cuda | env_blocked
    5   argparse/Hydra override rejection                     blocked     launch_error | blocked_config
    6   §3.2-3.4 assertion texts, graph-config KeyError       blocked     blocked_config
    7   environment: no attention backend, TE missing         blocked     env_blocked
    8   known API/version breakage (§6.1)                     blocked     api_mismatch
    8b  graph arm past its capture iteration (warmup + 1)     invalid     no_capture, whatever it printed
        without any capture line (start or done)                          after (crash, walltime, teardown)
    9   CUDA OOM (allocator, raw, cuBLAS, NCCL calloc)        oom         oom (+ phase, requested size)
    10  capture errors (§5.8, §3.4 replay checks)             blocked     blocked_capture
    11  illegal memory access                                 crashed     illegal_memory_access
    12  NCCL / distributed errors                             crashed     nccl_error
    13  segfault                                              crashed     segfault
    14  other §6.2 transient signatures (ECC, socket, glibc)  crashed     transient:<kind>
    15  `DUE TO TIME LIMIT` or state TIMEOUT                  timeout     hang_timeout (usable when the
                                                                          steady window was complete)
    16  NaN/Inf: `found NaN in`, `grad norm: nan`, lm loss    crashed     nan
        key missing, `Unexpected result nan`
    17  a death without a signature (graphsweep/parse/crash.py): crashed    python_error | fatal_error |
        Bridge `Pretrain failed ...`, the first exception                 signal:<SIG> | exit_<code>;
        after the last iteration, `Fatal Python error`, torchrun          cancelled when only the launcher
        `failed (exitcode: N)` / `Signal N (SIG..)`, non-zero exit        was told to stop (SIGTERM/SIGINT)
    18  end marker or exit 0 with iterations                  completed   (graph arm without capture +
                                                              / invalid    replay evidence: invalid)
    19  nothing conclusive (no end, no error, no run.json)    unparseable truncated / incomplete log

A failure after the end-of-training marker is the run's failure at phase `teardown` (the walltime, an exception,
a fatal line, torchrun's exit report, a signal), and its steady window stays usable when complete: a teardown hang
is not a slowdown. Only when run.json says exit 0 / COMPLETED, or without run.json when no process said it died,
is a signature after the marker teardown noise (e.g. c10d `Connection reset by peer` as ranks exit).
Transient signatures (§6.2) earn one retry (the submitter asks `find_transient`); when the retry
fails the same way the run is `crashed` with both attempts' evidence in the reason.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

import numpy as np

from graphsweep.parse import crash
from graphsweep.parse.memory import steady_figures
from graphsweep.parse.records import Evidence, Hit, Mark, RunSummary
from graphsweep.parse.signatures import INFRA_STATES, TIME_LIMIT, Signature, transient_of
from graphsweep.parse.window import steady_window
from graphsweep.vocab import (
    BLOCKED, CANCELLED, CAPTURE, COMPLETED, CRASHED, EAGER, GRAPH, INFRA_OUTCOMES, INVALID, LOST, OOM, SETUP, STEADY,
    TEARDOWN, TIMEOUT, UNPARSEABLE, WARMUP,
)  # fmt: skip


def _transient_hit(hits: Sequence[Hit]) -> Hit | None:
    """The hit of the most specific transient signature, unless something deterministic explains the failure."""
    sig = transient_of(h.sig for h in hits)
    return next((h for h in hits if h.sig is sig), None) if sig else None


def _state(info: Mapping) -> str | None:
    st = info.get("state")
    return str(st).split()[0].upper() if st else None


def _where(h: Hit | Mark) -> str:
    return f"{h.file}:{h.line}"


def _set_sig(s: RunSummary, h: Hit | Mark, sig: Signature | None = None) -> None:
    s.signature, s.signature_line, s.signature_file = h.text, h.line, h.file
    if sig is not None:
        s.signature_id, s.signature_source = sig.id, sig.source


def phase_of(h: Hit, arm: str, warmup: int | None, ev: Evidence) -> tuple[str, int | None]:
    """(phase, failing iteration) of a failure line. The iteration line `i/N` is printed after
    iteration i finished, so the failing one is the last printed + 1; capture is iteration
    warmup+1 (docs/megatron-facts.md §3.1, §3.6), or the capture markers say so. After the end-of-training marker: teardown."""
    if h.after_end:
        return TEARDOWN, None
    before = h.iteration_before
    if before is None and not h.training_started:
        if ev.iterations:  # e.g. a rank-0 stderr file next to the last rank's stdout: use the run's progress
            before = ev.iterations[-1]
        else:
            return SETUP, None
    failing = (before if before is not None else ev.start_iteration) + 1
    if h.capture_state == "capturing":
        return CAPTURE, failing
    if arm == GRAPH or h.capture_state != "none":
        cap = warmup + 1 if warmup is not None else (h.capture_iteration or ev.capture_iteration)
        if cap is None:
            return (STEADY if h.capture_state == "captured" else WARMUP), failing
        return (WARMUP if failing < cap else CAPTURE if failing == cap else STEADY), failing
    first = warmup + 2 if warmup is not None else 2
    return (WARMUP if failing < first else STEADY), failing


def _window(s: RunSummary, ev: Evidence, arm: str, warmup: int | None, min_steady: int) -> None:
    s.n_iterations = len(ev.iterations)
    s.last_iteration = ev.iterations[-1] if ev.iterations else None
    s.train_iters = ev.train_iters
    if warmup is not None:
        first_allowed = warmup + 2  # skip iterations 1..warmup and the capture iteration warmup+1, both arms
    elif ev.capture_iteration is not None:
        first_allowed = ev.capture_iteration + 1
        s.notes.append(f"warmup unknown: steady window starts after the capture iteration {ev.capture_iteration}")
    else:
        first_allowed = 2
    its = [i for i, e in zip(ev.iterations, ev.elapsed_ms) if e == e]
    ms = [e for e in ev.elapsed_ms if e == e]
    w = steady_window(its, ms, first_allowed, min_steady)
    s.steady_first, s.steady_last, s.steady_n, s.steady_reason = w.first, w.last, w.n, w.reason
    if w.first is not None and w.last is not None:
        x = np.array([e for i, e in zip(its, ms) if w.first <= i <= w.last], dtype=float)
        if len(x):
            s.step_ms_median = float(np.median(x))
            s.step_ms_mean = float(np.mean(x))
            s.step_ms_p10 = float(np.percentile(x, 10))
            s.step_ms_p90 = float(np.percentile(x, 90))
    s.seed = ev.seed
    if ev.elapsed_decimals is not None:  # the judge's resolution floor: a median is known only to +-step/2
        s.elapsed_resolution_ms = 10.0 ** -ev.elapsed_decimals
    # memory. mem-max-* are running peaks since process start unless the training process reset them (the
    # PEAKS_RESET marker), so peak_mem_gb holds pre-capture peaks too; the steady_* figures see the graph's cost
    cap = warmup + 1 if warmup is not None else ev.capture_iteration
    s.capture_iteration = cap if arm == GRAPH else None
    steady_figures(s, ev)
    mx = {i: v[1] for i, v in ev.memory.items() if v[1] == v[1]}
    if mx:
        before = [v for i, v in mx.items() if cap is not None and i < cap]
        s.peak_mem_before_capture_gb = max(before) if before else None
        if arm == GRAPH:
            after = [v for i, v in mx.items() if cap is not None and i >= cap]
            s.peak_mem_gb = max(after) if after else None
            if not after:
                s.notes.append("no memory line at or after the capture iteration (Megatron reports memory after "
                               "iterations 1-2 only): peak memory after capture unknown")
        else:
            s.peak_mem_gb = max(mx.values())
    s.capture_s = ev.capture_s
    s.capture_iteration_excess_s = ev.capture_iteration_excess_s
    s.graphable_layers = ev.graphable_layers
    s.capture_seen = ev.capture_marker is not None
    if ev.replays is not None or ev.replay_iteration is not None:  # builtin workload says it explicitly
        s.replay_seen = bool(ev.replay_iteration is not None or (ev.replays or 0) > 0)
    elif s.capture_seen and ev.capture_iteration is not None:
        # Megatron prints no replay line: an iteration after the capture iteration ran on the graph
        s.replay_seen = any(i > ev.capture_iteration for i in ev.iterations)


def _pick(hits: Sequence[Hit], ranks: Iterable[int]) -> Hit | None:
    rs = set(ranks)
    cand = [h for h in hits if h.sig.rank in rs]
    # a cause before a symptom within a rank, and a text proven by its traceback frame (a constraint's cause)
    # before the same text without one; stable: first in file order otherwise
    return min(cand, key=lambda h: (h.sig.rank, h.sig.symptom, h.sig.frame is None)) if cand else None


_NO_CAPTURE = ("graph arm {what} without any CUDA-graph capture line (TE `Time spent in CUDA Graphs capture`, "
               "full-iteration `CUDA graph capture done for training!!!`, optimizer `Optimizer CUDA graph capture "
               "done!!!`, local `> built N cuda graph(s)`): not a graph measurement")


def _after_end(ev: Evidence, m: Hit | Mark | None) -> bool:
    """The line came after the end-of-training marker of its file."""
    if isinstance(m, Hit):
        return m.after_end
    end = ev.end_marker
    return m is not None and end is not None and m.file == end.file and m.line > end.line


def classify(ev: Evidence, *, arm: str, warmup: int | None, run_info: Mapping | None, min_steady: int,
             previous: list[dict] | None = None) -> RunSummary:
    """Apply the order in the module docstring, then the teardown rule: a failure after the end-of-training marker
    is the run's failure at teardown, but the steady window it measured before stays usable when complete."""
    s = _classify(ev, arm=arm, warmup=warmup, run_info=run_info, min_steady=min_steady, previous=previous)
    if s.phase == TEARDOWN and s.outcome not in (COMPLETED, INVALID, UNPARSEABLE, *INFRA_OUTCOMES):
        s.failed_iteration = None
        s.measurement_usable = s.steady_n >= min_steady and (arm != GRAPH or (s.capture_seen and s.replay_seen))
        s.reason += (" [after the end-of-training marker: a teardown failure, not a slowdown; the steady window "
                     + ("measured before it stays usable]" if s.measurement_usable else "is incomplete]"))
    return s


def _classify(ev: Evidence, *, arm: str, warmup: int | None, run_info: Mapping | None, min_steady: int,
             previous: list[dict] | None = None) -> RunSummary:
    """Apply the order in the module docstring. `previous`: earlier attempts with their evidence."""
    info = dict(run_info or {})
    s = RunSummary(outcome=UNPARSEABLE, arm=arm, warmup=warmup, files=list(ev.files), device=ev.device)
    state = _state(info)
    exit_code = info.get("exit_code")
    s.exit_code = int(exit_code) if isinstance(exit_code, (int, float)) else None
    s.slurm_state = state
    s.attempt = info.get("attempt")
    s.previous_attempts = list(previous or [])
    if ev.end_marker:
        s.end_marker = ev.end_marker.text
    s.notes.extend(ev.superseded)
    if ev.iter_lines_unparsed:
        s.notes.append(f"{ev.iter_lines_unparsed} iteration line(s) without a readable elapsed time (truncated or glued)")
    _window(s, ev, arm, warmup, min_steady)
    d = ev.death
    # without run.json, a process that said it died after the end marker (an exception, a fatal line, the launcher's
    # exit report, a signal) did not exit cleanly; run.json's exit 0 / COMPLETED is believed
    died_after_end = any(_after_end(ev, m) for m in (d.cause, d.fatal, d.launcher, d.signal))
    exited_ok = s.exit_code in (0, None) and state in (None, "COMPLETED") and not (
        s.exit_code is None and state is None and died_after_end)
    ended = ev.end_marker is not None or ev.end_data is not None
    # teardown noise after a clean end (never the walltime: the job did not end by itself)
    noise = [h for h in ev.hits if h.after_end and exited_ok and h.sig.id != TIME_LIMIT]
    hits = [h for h in ev.hits if h not in noise]
    if noise:
        s.notes.append(f"ignored after the end of training: {noise[0].sig.id} at {_where(noise[0])}")

    def fail(outcome: str, error_class: str | None, h: Hit | Mark | None, reason: str, sig: Signature | None = None,
             phase: bool = True) -> RunSummary:
        s.outcome, s.error_class, s.reason = outcome, error_class, reason
        if h is not None:
            _set_sig(s, h, sig if sig is not None else getattr(h, "sig", None))
            if phase and isinstance(h, Hit):
                s.phase, s.failed_iteration = phase_of(h, arm, warmup, ev)
        s.infrastructure = outcome in INFRA_OUTCOMES
        return s

    # 1 infrastructure
    if state in INFRA_STATES:
        out = INFRA_STATES[state]
        mark = ev.slurm_infra[1] if ev.slurm_infra else None
        return fail(out, None, mark, f"Slurm state {info.get('state')}: infrastructure failure, retried (not a result)")
    if ev.slurm_infra:
        out, mark = ev.slurm_infra
        return fail(out, None, mark, f"job ended by Slurm ({mark.text.strip()}): infrastructure failure, retried")
    # 2 host OOM (cgroup), not CUDA OOM
    host = next((h for h in hits if h.sig.error_class == "host_oom"), None)
    if state == "OUT_OF_MEMORY" or host:
        why = "Slurm state OUT_OF_MEMORY" if state == "OUT_OF_MEMORY" else "slurmstepd oom-kill"
        s_ = fail(CRASHED, "host_oom", host, f"host (CPU) memory exhausted ({why}): not a CUDA OOM; "
                  "raise --mem or lower data-loader workers")
        if host is None:
            s_.phase, s_.failed_iteration = (SETUP, None) if not ev.iterations else (STEADY, ev.iterations[-1] + 1)
        return s_
    # 3 nothing readable
    if not ev.recognised_lines and (ev.problems or not ev.files):
        why = "; ".join(ev.problems) if ev.problems else "no log files"
        if info and s.exit_code is None and state is None:
            return fail(LOST, None, None, f"job left no end state and no readable log ({why}): lost, retried")
        return fail(UNPARSEABLE, None, None, f"{why}")
    # 4-8 blocked (config, launch, environment, API), keyerror in the graph-config normaliser
    h = _pick(hits, (4, 5, 6, 7, 8))
    if h is None and ev.keyerror is not None:
        return fail(BLOCKED, "blocked_config", ev.keyerror,
                    f"config rejected: unknown CUDA-graph module name ({ev.keyerror.text.strip()}; "
                    "MCore cuda_graph_config.py CudaGraphModule[name] lookup, docs/megatron-facts.md §3.3)")
    if h is not None:
        what = {"no_cuda": "no CUDA device", "launch_error": "launch rejected", "blocked_config": "config rejected",
                "env_blocked": "environment cannot run it", "api_mismatch": "known API/version breakage"}
        return fail(BLOCKED, h.sig.error_class, h, f"{what.get(h.sig.error_class, BLOCKED)}: "
                    f"{_after(h.text, h.sig.needle.decode())} ({h.sig.source})")
    # a graph arm that ran past its capture iteration without any capture line is no graph measurement, whatever
    # else it printed (a crash, a walltime, an error at teardown); one that completed is rule 18's
    cap = warmup + 1 if warmup is not None else None
    if arm == GRAPH and cap is not None and not ev.capture_started and s.last_iteration is not None \
            and s.last_iteration > cap and not (ended and not hits and exited_ok):
        other = _pick(hits, range(9, 17))
        fail(INVALID, "no_capture", ev.no_graphable, _NO_CAPTURE.format(
            what=f"ran past its capture iteration {cap} (to iteration {s.last_iteration})"), phase=False)
        if ev.no_graphable is not None:
            s.reason = f"graph arm ran past its capture iteration but captured nothing: {ev.no_graphable.text.strip()}"
        s.reason += f"; it then printed {other.sig.id} at {_where(other)}" if other else ""
        return s
    # 9 CUDA OOM
    h = _pick(hits, (9,))
    if h is not None:
        fail(OOM, OOM, h, "")
        s.oom_request = _oom_request([x.text for x in hits if x.sig.rank == 9])
        at = f"{s.phase}" + (f" (iteration {s.failed_iteration})" if s.failed_iteration else "")
        s.reason = f"CUDA OOM at {at}" + (f" allocating {s.oom_request}" if s.oom_request else "") + \
            f" ({h.sig.source})"
        return s
    # 10 capture errors
    h = _pick(hits, (10,))
    if h is not None:
        fail(BLOCKED, "blocked_capture", h, "")
        s.reason = f"CUDA graph capture failed at {s.phase}" + \
            (f" (iteration {s.failed_iteration})" if s.failed_iteration else "") + \
            f": {_after(h.text, h.sig.needle.decode())}" + \
            (f", raised in {h.frame}" if h.frame else "") + f" ({h.sig.source})"  # the call that did it
        return s
    # 11-14 crashes
    h = _pick(hits, (11, 12, 13, 14))
    if h is not None:
        t = _transient_hit(hits)
        s.transient = t.sig.needle.decode() if t else None
        fail(CRASHED, h.sig.error_class, h, "")
        at = f"{s.phase}" + (f" (iteration {s.failed_iteration})" if s.failed_iteration else "")
        s.reason = f"crashed at {at}: {h.sig.error_class} ({h.text.strip()[:160]})"
        _retry_note(s)
        return s
    # 15 walltime
    tl = next((h for h in hits if h.sig.id == TIME_LIMIT), None)
    if tl or state == "TIMEOUT" or ev.exit_minutes:
        mark: Hit | Mark | None = tl or ev.exit_minutes
        fail(TIMEOUT, "hang_timeout", mark, "")
        graph_ok = arm != GRAPH or (s.capture_seen and s.replay_seen)
        s.measurement_usable = s.steady_n >= min_steady and graph_ok
        done = s.last_iteration is not None and s.train_iters is not None and s.last_iteration >= s.train_iters
        if s.measurement_usable:
            s.reason = (f"walltime hit after the measurement window ({s.steady_n} steady iterations "
                        f"{s.steady_first}-{s.steady_last}): steady statistics are usable")
            if done or ev.end_marker is not None:
                s.reason += "; the run hung after its last iteration (known end-of-run hangs: destroy_process_group " \
                            "at teardown, Bridge #3595 / PR #3459; a final evaluation re-capturing full-iteration " \
                            "graphs, Bridge PR #5291; MLM #2130 / Bridge #1185)"
            s.phase = TEARDOWN if done or ev.end_marker is not None else STEADY
        else:
            s.reason = (f"walltime hit before the measurement window was complete ({s.steady_n} steady iterations, "
                        f"{min_steady} needed; last iteration {s.last_iteration}): retried with more time")
            if arm == GRAPH and s.steady_n >= min_steady and not graph_ok:
                s.reason += "; no capture/replay evidence either"
            s.phase = SETUP if not ev.iterations else s.phase
        return s
    # 16 NaN / Inf
    h = _pick(hits, (16,))
    nan_mark: Hit | Mark | None = h
    if nan_mark is None and ev.nan_iteration:
        nan_mark = ev.nan_iteration[1]
    if nan_mark is None and ev.loss_missing and ev.lm_loss_seen:
        nan_mark = ev.loss_missing[1]
    if nan_mark is not None:
        fail(CRASHED, "nan", nan_mark, "")
        if isinstance(nan_mark, Hit):
            t = _transient_hit(hits)
            s.transient = t.sig.needle.decode() if t else None
        else:
            it = (ev.nan_iteration or ev.loss_missing)[0]  # type: ignore[index]
            s.failed_iteration = it
            s.phase = STEADY if s.steady_first is not None and it >= s.steady_first else \
                (CAPTURE if arm == GRAPH and s.capture_iteration == it else WARMUP)
        s.reason = f"NaN/Inf in training at {s.phase}" + \
            (f" (iteration {s.failed_iteration})" if s.failed_iteration else "") + f": {nan_mark.text.strip()[:160]}"
        _retry_note(s)
        return s
    # 17 failure without a known signature
    # (a process that said it died is never completed nor unparseable: graphsweep/parse/crash.py)
    failed = (s.exit_code not in (0, None)) or state == "FAILED" or (not ended and (
        ev.last_exception is not None or d.died() or ev.srun_exit is not None)) or (ended and not exited_ok) \
        or ev.straggler is not None or ev.sigterm is not None or d.launcher_signal is not None
    if failed:
        if ev.sigterm and state is None and s.exit_code in (None, 143, -15):
            return fail(CANCELLED, None, ev.sigterm, "received SIGTERM (cancelled or preempted): retried")
        if d.launcher_signal and state is None and not crash.real_death(d):
            return fail(CANCELLED, None, d.launcher_signal, f"the launcher received {d.launcher_signal_name} "
                        "(scancel, preemption or Ctrl-C) and shut its workers down: retried")
        mark, cls = crash.culprit(ev)
        code = d.launcher_exit if d.launcher_exit and d.launcher_exit > 0 else s.exit_code
        cls = cls or (f"exit_{code}" if code not in (None, 0) else "unknown")
        fail(CRASHED, cls, mark, "")
        if ev.iterations:
            s.failed_iteration = ev.iterations[-1] + 1
        s.phase = TEARDOWN if _after_end(ev, mark) or (ended and not d.died()) else \
            SETUP if not ev.iterations and not ev.training_started else \
            _phase_from_iteration(s.failed_iteration or 1, arm, warmup, ev)
        s.failed_iteration = None if s.phase == TEARDOWN else s.failed_iteration
        s.reason = f"crashed at {s.phase}" + (f" (iteration {s.failed_iteration})" if s.failed_iteration else "") + \
            (f", exit code {s.exit_code}" if s.exit_code not in (None, 0) else "") + \
            crash.signal_note(d, s.exit_code) + (f": {mark.text.strip()[:200]}" if mark else ": no error line")
        return s
    # 18 completed / invalid
    if ended or ((s.exit_code == 0 or state == "COMPLETED") and ev.iterations):
        s.outcome = COMPLETED
        end = ev.end_marker or ev.end_data
        if end is not None:
            _set_sig(s, end)
        if not ev.iterations:
            s.outcome, s.reason = UNPARSEABLE, "the run ended normally but printed no iteration lines " \
                "(logger.log_interval? wrong file?)"
            return s
        if arm == GRAPH and not (s.capture_seen and s.replay_seen):
            s.outcome, s.error_class = INVALID, ("no_capture" if not s.capture_seen else "no_replay")
            if ev.no_graphable is not None:
                _set_sig(s, ev.no_graphable)
                s.reason = f"graph arm completed but captured nothing: {ev.no_graphable.text.strip()}"
            elif not s.capture_seen:
                s.reason = _NO_CAPTURE.format(what="ran to its end")
            else:
                s.reason = f"graph arm captured (iteration {ev.capture_iteration}) but no iteration ran after the " \
                           "capture: no evidence of replay"
            return s
        if arm == EAGER and s.capture_seen:
            s.outcome, s.error_class = INVALID, "graph_in_eager"
            s.reason = f"eager arm shows CUDA-graph capture ({ev.capture_marker}): not an eager baseline"
            return s
        s.measurement_usable = s.steady_n >= min_steady
        s.reason = f"completed {s.n_iterations} iterations; steady {s.steady_reason}"
        if arm == GRAPH:
            s.reason += f"; captured at iteration {ev.capture_iteration}" + \
                (f" in {s.capture_s:.2f} s" if s.capture_s is not None else "")
        if ev.end_data is not None and ev.end_marker is None:
            s.reason += " (data exhausted)"
        _retry_note(s)
        return s
    # 19 nothing conclusive
    if info and s.exit_code is None and state is None:
        return fail(LOST, None, ev.last_line, "job left no end state, no end marker and no error: lost, retried",
                    phase=False)
    last = ev.last_line
    if ev.ends_mid_line and last is not None:
        s.reason = f"log ends mid-line at {_where(last)} after iteration {s.last_iteration} of {s.train_iters}, " \
                   "with no end-of-training marker and no error: truncated log"
        _set_sig(s, last)
    elif not ev.recognised_lines:
        s.reason = "no Megatron log lines found (no iteration, setup, capture or error line)"
    else:
        s.reason = f"no end-of-training marker and no error after iteration {s.last_iteration}" + \
                   (f" of {s.train_iters}" if s.train_iters else "") + \
                   ": incomplete log (still running, or killed without a trace); give run.json for the job state"
        if last is not None:
            _set_sig(s, last)
    return s


def _phase_from_iteration(failing: int, arm: str, warmup: int | None, ev: Evidence) -> str:
    cap = warmup + 1 if warmup is not None else ev.capture_iteration
    if arm == GRAPH and cap is not None:
        return WARMUP if failing < cap else CAPTURE if failing == cap else STEADY
    first = warmup + 2 if warmup is not None else 2
    return WARMUP if failing < first else STEADY


def _after(text: str, needle: str) -> str:
    """The proving line from the needle on (drops srun/rank prefixes and the exception name)."""
    i = text.find(needle)
    return text[i:].strip() if i >= 0 else text.strip()


def _oom_request(texts: Sequence[str]) -> str | None:
    for t in texts:
        m = re.search(r"Tried to allocate ([\d.]+ ?[KMGT]?i?B)", t)
        if m:
            return m.group(1)
    return None


def _retry_note(s: RunSummary) -> None:
    prev = [p for p in s.previous_attempts if p.get("signature")]
    if not prev:
        if s.transient and s.outcome != COMPLETED:
            s.reason += f" [transient signature '{s.transient}': one automatic retry applies]"
        return
    p = prev[-1]
    where = f" at {p['file']}:{p['line']}" if p.get("line") else f" ({p.get('log')})"
    if s.outcome == COMPLETED:
        s.reason += f" [retried once after transient '{p['signature']}'{where}]"
    elif s.transient and s.transient == p["signature"]:
        s.reason += f" [failed the same way twice: attempt 1 '{p['signature']}'{where}; attempt 2 " \
                    f"{s.signature_file}:{s.signature_line}]"
    else:
        s.reason += f" [previous attempt failed with transient '{p['signature']}'{where}]"
