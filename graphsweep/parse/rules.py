"""The classification: RULES, an ordered list of named rules over a run's evidence, read top-down.

The first rule that matches decides the run's outcome, error class, phase and proving line (graphsweep/parse/
classify.py applies them, then the teardown rule and the retry policy). Each rule has a name, what it matches and
what it gives; `rules_table()` prints the list (docs/failures.md shows it, and a test keeps the two equal). A
signature (graphsweep/parse/signatures.py: a literal text with its source) names the rule that uses it; within a
rule a cause outranks a symptom, a text proven by its traceback frame outranks the same text without one, and
otherwise the first line in file order wins.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from graphsweep import logformat as lf
from graphsweep.parse import captured, crash, signatures as sg
from graphsweep.parse.context import (
    Ctx, Rule, after, after_end, cause, phase_from_iteration, set_sig, unexplained, where, with_enum,
)  # fmt: skip
from graphsweep.parse.records import Hit, Mark, RunSummary
from graphsweep.parse.signatures import INFRA_STATES, TIME_LIMIT
from graphsweep.vocab import (
    BLOCKED, CANCELLED, CAPTURE, COMPLETED, CRASHED, EAGER, GRAPH, INVALID, LOST, OOM, SETUP, STEADY, TEARDOWN,
    TIMEOUT, UNPARSEABLE, WARMUP,
)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# The rules, in the order RULES applies them
def _infrastructure(c: Ctx) -> RunSummary | None:
    if c.state in INFRA_STATES:
        mark = c.ev.slurm_infra[1] if c.ev.slurm_infra else None
        return c.fail(INFRA_STATES[c.state], None, mark,
                      f"Slurm state {c.info.get('state')}: infrastructure failure, retried (not a result)")
    if c.ev.slurm_infra:
        out, mark = c.ev.slurm_infra
        return c.fail(out, None, mark, f"job ended by Slurm ({mark.text.strip()}): infrastructure failure, retried")
    return None


def _host_oom(c: Ctx) -> RunSummary | None:
    host = c.pick(sg.R_HOST_OOM)
    if c.state != "OUT_OF_MEMORY" and host is None:
        return None
    why = "Slurm state OUT_OF_MEMORY" if c.state == "OUT_OF_MEMORY" else "slurmstepd oom-kill"
    s = c.fail(CRASHED, "host_oom", host, f"host (CPU) memory exhausted ({why}): not a CUDA OOM; "
               "raise --mem or lower data-loader workers")
    if host is None:
        s.phase, s.failed_iteration = (SETUP, None) if not len(c.ev.iterations) else (STEADY, int(c.ev.iterations[-1]) + 1)
    return s


def _no_log(c: Ctx) -> RunSummary | None:
    ev = c.ev
    if ev.recognised_lines or not (ev.problems or not ev.files):
        return None
    why = "; ".join(ev.problems) if ev.problems else "no log files"
    if c.info and c.job and c.s.exit_code is None and c.state is None:
        return c.fail(LOST, None, None, f"job left no end state and no readable log ({why}): lost, retried")
    return c.fail(UNPARSEABLE, None, None, f"{why}")


_BLOCKED_WHAT = {"no_cuda": "no CUDA device", "launch_error": "launch rejected", "blocked_config": "config rejected",
                 "env_blocked": "environment cannot run it", "api_mismatch": "known API/version breakage"}


def _launch_gate(c: Ctx) -> RunSummary | None:
    """run.json's gate record (records.GateDecision, written by graphsweep/run/gate.py): no job ran."""
    g = c.gate
    if g is None or not g.skip:
        return None
    return c.fail(BLOCKED, sg.LAUNCH_GATE_CLASS, None, f"not run (the launch gate): the GPU is busy {g.busy_share:.0%} "
                  f"of an eager step ({g.eager_runs} eager run(s)): no graph of this step can be faster than "
                  f"{g.ceiling:.3f}x, inside the margin 1 + {g.margin:g}")


def _blocked_by(rule: str) -> Callable[[Ctx], RunSummary | None]:
    def decide(c: Ctx) -> RunSummary | None:
        h = c.pick(rule)
        if h is None:
            return None
        return c.fail(BLOCKED, h.sig.error_class, h, f"{_BLOCKED_WHAT.get(h.sig.error_class, BLOCKED)}: "
                      f"{after(h.text, h.sig.needle.decode())} ({h.sig.source})")
    return decide


def _graph_module_name(c: Ctx) -> RunSummary | None:
    k = c.ev.keyerror
    if k is None:
        return None
    return c.fail(BLOCKED, "blocked_config", k, f"config rejected: unknown CUDA-graph module name ({k.text.strip()}; "
                  "MCore cuda_graph_config.py CudaGraphModule[name] lookup, docs/megatron-facts.md §3.3)")


# the rules whose texts a graph arm without capture may print after its capture iteration (named in its reason)
_RUNTIME_RULES = (sg.R_NODE, sg.R_OOM, sg.R_CAPTURE, sg.R_REPLAY, sg.R_IMA, sg.R_NCCL, sg.R_SEGV, sg.R_CUDA,
                  sg.R_NETWORK, sg.R_HOST, sg.R_WALLTIME, sg.R_NAN)


def _no_capture(c: Ctx) -> RunSummary | None:
    """A graph arm that ran past its capture iteration without any capture line is no graph measurement, whatever else
    it printed (a crash, a walltime, an error at teardown); one that completed is the `completed` rule's."""
    s, ev = c.s, c.ev
    cap = c.warmup + 1 if c.warmup is not None else None
    if not (c.arm == GRAPH and cap is not None and not ev.capture_started and s.last_iteration is not None
            and s.last_iteration > cap and not (c.ended and not c.hits and c.exited_ok)):
        return None
    other = c.pick(*_RUNTIME_RULES)
    c.fail(INVALID, "no_capture", ev.no_graphable, captured.NO_CAPTURE.format(
        what=f"ran past its capture iteration {cap} (to iteration {s.last_iteration})"), phase=False)
    if ev.no_graphable is not None:
        s.reason = f"graph arm ran past its capture iteration but captured nothing: {ev.no_graphable.text.strip()}"
    s.reason += f"; it then printed {other.sig.id} at {where(other)}" if other else ""
    return s


def _captured_nothing(c: Ctx) -> RunSummary | None:
    """A graph arm whose log says it holds no CUDA graph trained eager: no graph result, whatever it printed after."""
    if c.arm != GRAPH or c.ev.graphs_captured != 0:
        return None
    s = captured.nothing(c.s, c.ev)
    other = c.pick(*_RUNTIME_RULES)
    s.reason += f"; it then printed {other.sig.id} at {where(other)}" if other else ""
    return s


def _cuda_oom(c: Ctx) -> RunSummary | None:
    h = c.pick(sg.R_OOM)
    if h is None:
        return None
    s = c.fail(OOM, OOM, h, "")
    s.oom_request = next((m[1] for x in c.hits if x.sig.rule == sg.R_OOM and (m := lf.OOM_REQUEST.search(x.text))), None)
    s.reason = f"CUDA OOM at {c.at()}" + (f" allocating {s.oom_request}" if s.oom_request else "") + \
        f" ({h.sig.source})"
    return s


def _graph_capture(c: Ctx) -> RunSummary | None:
    h = c.pick(sg.R_CAPTURE)
    if h is None:
        return None
    s = c.fail(BLOCKED, "blocked_capture", h, "")
    s.reason = f"CUDA graph capture failed at {c.at()}: {cause(h)}" + \
        (f", raised in {h.frame}" if h.frame else "") + f" ({h.sig.source})"  # the call that did it
    return s


def _graph_replay(c: Ctx) -> RunSummary | None:
    h = c.pick(sg.R_REPLAY)
    if h is None:
        return None
    s = c.fail(CRASHED, "graph_replay", h, "")
    cap = f", after its capture at iteration {c.ev.capture_iteration}" if c.ev.capture_iteration else ""
    s.reason = f"CUDA graph failed at replay, {c.at()}{cap}: {cause(h)}" + \
        (f", raised in {h.frame}" if h.frame else "") + f" ({h.sig.source})"
    return s


def _crash_by(rule: str) -> Callable[[Ctx], RunSummary | None]:
    def decide(c: Ctx) -> RunSummary | None:
        h = c.pick(rule)
        if h is None:
            return None
        s = c.fail(CRASHED, h.sig.error_class, h, "")
        s.reason = f"crashed at {c.at()}: {h.sig.error_class} ({with_enum(h.text.strip()[:160], h)})"
        return s
    return decide


def _nccl(c: Ctx) -> RunSummary | None:
    """An NCCL fault; a collective timeout is a consequence, not the cause, when Bridge says pretrain() ended on an
    exception no signature explains (a peer rank died first and the others waited for it)."""
    if not unexplained(c):
        return _crash_by(sg.R_NCCL)(c)
    sub = replace(c, hits=[h for h in c.hits if h.sig.rule == sg.R_NCCL and h.sig.retry != sg.RETRY_NO_GRAPH])
    s = _crash_by(sg.R_NCCL)(sub) if sub.hits else None
    c.proof = sub.proof
    return s


def _walltime(c: Ctx) -> RunSummary | None:
    s, ev = c.s, c.ev
    tl = next((h for h in c.hits if h.sig.id == TIME_LIMIT), None)
    if not (tl or c.state == "TIMEOUT" or ev.exit_minutes):
        return None
    c.fail(TIMEOUT, "hang_timeout", tl or ev.exit_minutes, "")
    graph_ok = c.arm != GRAPH or (s.capture_seen and s.replay_seen)
    s.measurement_usable = s.steady_n >= c.min_steady and graph_ok
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
                    f"{c.min_steady} needed; last iteration {s.last_iteration}): retried with more time")
        if c.arm == GRAPH and s.steady_n >= c.min_steady and not graph_ok:
            s.reason += "; no capture/replay evidence either"
        s.phase = SETUP if not len(ev.iterations) else s.phase
    return s


def _nan_inf(c: Ctx) -> RunSummary | None:
    s, ev = c.s, c.ev
    mark: Hit | Mark | None = c.pick(sg.R_NAN)
    if mark is None and ev.nan_iteration:
        mark = ev.nan_iteration[1]
    if mark is None and ev.loss_missing and ev.lm_loss_seen:
        mark = ev.loss_missing[1]
    if mark is None:
        return None
    c.fail(CRASHED, "nan", mark, "")
    if not isinstance(mark, Hit):
        it = (ev.nan_iteration or ev.loss_missing)[0]  # type: ignore[index]
        s.failed_iteration = it
        s.phase = STEADY if s.steady_first is not None and it >= s.steady_first else \
            (CAPTURE if c.arm == GRAPH and s.capture_iteration == it else WARMUP)
    s.reason = f"NaN/Inf in training at {c.at()}: {mark.text.strip()[:160]}"
    return s


def _death(c: Ctx) -> RunSummary | None:
    """A process that said it died is never completed nor unparseable (graphsweep/parse/crash.py)."""
    s, ev, d = c.s, c.ev, c.ev.death
    failed = (s.exit_code not in (0, None)) or c.state == "FAILED" or (not c.ended and (
        ev.last_exception is not None or d.died() or ev.srun_exit is not None)) or (c.ended and not c.exited_ok) \
        or ev.straggler is not None or ev.sigterm is not None or d.launcher_signal is not None
    if not failed:
        return None
    if ev.sigterm and c.state is None and s.exit_code in (None, 143, -15):
        return c.fail(CANCELLED, None, ev.sigterm, "received SIGTERM (cancelled or preempted): retried")
    if d.launcher_signal and c.state is None and not crash.real_death(d):
        return c.fail(CANCELLED, None, d.launcher_signal, f"the launcher received {d.launcher_signal_name} "
                      "(scancel, preemption or Ctrl-C) and shut its workers down: retried")
    mark, cls = crash.culprit(ev)
    code = d.launcher_exit if d.launcher_exit and d.launcher_exit > 0 else s.exit_code
    cls = cls or (f"exit_{code}" if code not in (None, 0) else "unknown")
    c.fail(CRASHED, cls, mark, "")
    if len(ev.iterations):
        s.failed_iteration = int(ev.iterations[-1]) + 1
    # after the end marker, or after the run's last iteration (a custom loop's cleanup, MCore's graph deletion)
    done = s.last_iteration is not None and s.train_iters is not None and s.last_iteration >= s.train_iters
    s.phase = TEARDOWN if after_end(ev, mark) or (c.ended and not d.died()) or done else \
        SETUP if not len(ev.iterations) and not ev.training_started else \
        phase_from_iteration(s.failed_iteration or 1, c.arm, c.warmup, ev)
    s.failed_iteration = None if s.phase == TEARDOWN else s.failed_iteration
    s.reason = f"crashed at {c.at()}" + (f", exit code {s.exit_code}" if s.exit_code not in (None, 0) else "") + \
        crash.signal_note(d, s.exit_code) + (f": {mark.text.strip()[:200]}" if mark else ": no error line")
    return s


def _completed(c: Ctx) -> RunSummary | None:
    s, ev = c.s, c.ev
    if not (c.ended or ((s.exit_code == 0 or c.state == "COMPLETED") and len(ev.iterations))):
        return None
    s.outcome = COMPLETED
    end = ev.end_marker or ev.end_data
    if end is not None:
        set_sig(s, end)
    if not len(ev.iterations):
        s.outcome, s.reason = UNPARSEABLE, "the run ended normally but " + (f"none of its {ev.iter_lines_unparsed} " \
            "iteration lines has a readable elapsed time (a damaged log)" if ev.iter_lines_unparsed else \
            "printed no iteration lines (logger.log_interval? wrong file?)")
        return s
    if c.arm == GRAPH and not (s.capture_seen and s.replay_seen):
        return captured.no_evidence(s, ev)
    if c.arm == EAGER and s.capture_seen:
        s.outcome, s.error_class = INVALID, "graph_in_eager"
        s.reason = f"eager arm shows CUDA-graph capture ({ev.capture_marker}): not an eager baseline"
        return s
    s.measurement_usable = s.steady_n >= c.min_steady
    s.reason = f"completed {s.n_iterations} iterations; steady {s.steady_reason}"
    if c.arm == GRAPH:
        s.reason += f"; captured at iteration {ev.capture_iteration}" + \
            (f" in {s.capture_s:.2f} s" if s.capture_s is not None else "")
    if ev.end_data is not None and ev.end_marker is None:
        s.reason += " (data exhausted)"
    return s


def _inconclusive(c: Ctx) -> RunSummary:
    s, ev = c.s, c.ev
    if c.info and c.job and s.exit_code is None and c.state is None:
        return c.fail(LOST, None, ev.last_line, "job left no end state, no end marker and no error: lost, retried",
                      phase=False)
    last = ev.last_line
    if ev.ends_mid_line and last is not None:
        s.reason = f"log ends mid-line at {where(last)} after iteration {s.last_iteration} of {s.train_iters}, " \
                   "with no end-of-training marker and no error: truncated log"
        set_sig(s, last)
    elif not ev.recognised_lines:
        s.reason = "no Megatron log lines found (no iteration, setup, capture or error line)"
    else:
        s.reason = f"no end-of-training marker and no error after iteration {s.last_iteration}" + \
                   (f" of {s.train_iters}" if s.train_iters else "") + \
                   ": incomplete log (still running, or killed without a trace); give run.json for the job state"
        if last is not None:
            set_sig(s, last)
    return s


RULES: tuple[Rule, ...] = (
    Rule("launch-gate", "run.json's `gate` record says the gate skipped the graph arm (no job ran)",
         "blocked, launch_gate", _launch_gate),
    Rule("infrastructure", "run.json state PREEMPTED / NODE_FAIL / BOOT_FAIL / CANCELLED / REVOKED / LOST / UNKNOWN; "
         "slurmstepd `DUE TO PREEMPTION` / `DUE TO NODE FAILURE` / `DUE TO JOB REQUEUE` (of the attempt that ended the "
         "log: an attempt a requeued one follows in the same file is superseded)",
         "preempted / node_fail / cancelled / lost (retried by the workflow, never a result; a log no job can rerun, "
         "`job_id: null`: unparseable, not a result)", _infrastructure),
    Rule(sg.R_HOST_OOM, "run.json state OUT_OF_MEMORY; slurmstepd `oom-kill` / `oom_kill`",
         "crashed, host_oom (host RAM, not CUDA)", _host_oom),
    Rule("no-log", "no readable log: missing, empty, binary", "unparseable (lost when run.json has no end state)",
         _no_log),
    Rule(sg.R_BUILTIN, "`[graphsweep] blocked:` (builtin workload)", "blocked, no_cuda / env_blocked",
         _blocked_by(sg.R_BUILTIN)),
    Rule(sg.R_LAUNCH, "argparse / Hydra override rejections; Megatron texts checked at launch",
         "blocked, launch_error / blocked_config", _blocked_by(sg.R_LAUNCH)),
    Rule(sg.R_CONFIG, "Megatron's and Bridge's config assertions (the constraint catalogue's texts)",
         "blocked, blocked_config", _blocked_by(sg.R_CONFIG)),
    Rule(sg.R_ENV, "no attention backend, TE missing", "blocked, env_blocked", _blocked_by(sg.R_ENV)),
    Rule(sg.R_API, "known API/version breakage (AttributeError / TypeError texts)", "blocked, api_mismatch",
         _blocked_by(sg.R_API)),
    Rule("graph-module-name", "`KeyError: '<name>'` in a traceback through MCore's cuda_graph_config",
         "blocked, blocked_config", _graph_module_name),
    Rule("captured-nothing", "a graph arm whose log says it holds no CUDA graph: `Rank 0: 0 graphable layers.` with "
         "its capture time, `No graphable layers found`, the entry's `no cuda graph detected after N iterations`",
         "uncaptured, captured_nothing, capture, whatever it printed after (it trained eager: never a speedup)",
         _captured_nothing),
    Rule("no-capture", "a graph arm past its capture iteration (warmup + 1) without any capture line",
         "invalid, no_capture, whatever it printed after", _no_capture),
    Rule(sg.R_NODE, "uncorrectable ECC / NVLink error, GPU fallen off the bus (Xid 79), devices busy or unavailable",
         "crashed, transient:ecc / transient:nvlink / transient:gpu (retried once, any arm)",
         _crash_by(sg.R_NODE)),
    Rule(sg.R_OOM, "CUDA OOM: the allocator's, a raw `CUDA error: out of memory`, cuBLAS, NCCL calloc",
         "oom, oom (+ phase, requested size)", _cuda_oom),
    Rule(sg.R_CAPTURE, "the capture failed: every cudaErrorStreamCapture* and cudaErrorCapturedEvent (by text, by "
         "torch's `Search for` enum, or on NCCL's `NCCL WARN Cuda failure '...'` line), PyTorch / MCore / TE capture "
         "texts", "blocked, blocked_capture, at its phase", _graph_capture),
    Rule(sg.R_REPLAY, "the captured graph failed at replay: cudaErrorGraphExecUpdateFailure, MCore's replay checks",
         "crashed, graph_replay, at its phase", _graph_replay),
    Rule(sg.R_IMA, "`illegal memory access` (CUDA, NCCL WARN)",
         "crashed, illegal_memory_access (retried once in an eager arm only)", _crash_by(sg.R_IMA)),
    Rule(sg.R_NCCL, "NCCL watchdog timeout or hang, DistBackendError, NCCL remote / CUDA errors",
         "crashed, nccl_error (a timeout while no graph runs and a remote error: retried once; a timeout after a "
         "peer's unexplained exception is that exception's `death`)", _nccl),
    Rule(sg.R_SEGV, "Segmentation fault, exitcode -11, SIGSEGV", "crashed, segfault", _crash_by(sg.R_SEGV)),
    Rule(sg.R_CUDA, "any other CUDA error, named by its text and torch's `Search for` enum",
         "crashed, cuda_error (launch failure / illegal instruction: retried once in an eager arm only)",
         _crash_by(sg.R_CUDA)),
    Rule(sg.R_NETWORK, "DistNetworkError, server socket, connection reset, port in use, Hugging Face unreachable",
         "crashed, transient:network (retried once, any arm)", _crash_by(sg.R_NETWORK)),
    Rule(sg.R_HOST, "glibc heap corruption, truncated input files", "crashed, memory_corruption / io_error",
         _crash_by(sg.R_HOST)),
    Rule(sg.R_WALLTIME, "slurmstepd `DUE TO TIME LIMIT`, state TIMEOUT, `exiting program after N minutes`",
         "timeout, hang_timeout (usable when the steady window was complete)", _walltime),
    Rule(sg.R_NAN, "`found NaN in`, `Unexpected result nan`, `grad norm: nan`, the lm loss key missing",
         "crashed, nan", _nan_inf),
    Rule("death", "a death without a signature: Bridge `Pretrain failed ...`, the first exception after the last "
         "iteration, `Fatal Python error`, torchrun `failed (exitcode: N)` / `Signal N (SIG..)`, a non-zero exit",
         "crashed, python_error / fatal_error / signal:<SIG> / exit_<code>; cancelled when only the launcher was "
         "told to stop", _death),
    Rule("ran-to-end", "an end marker, or exit 0 with iterations",
         "completed (a graph arm without capture + replay evidence, an eager arm with capture: invalid)", _completed),
    Rule("nothing-conclusive", "no end, no error (and no run.json state)", "unparseable (truncated / incomplete)",
         _inconclusive),
)


def rules_table() -> str:
    """RULES as the Markdown table docs/failures.md shows."""
    rows = ["| # | rule | matches | gives |", "|---|---|---|---|"]
    rows += [f"| {k} | `{r.name}` | {r.matches} | {r.gives} |" for k, r in enumerate(RULES, start=1)]
    return "\n".join(rows)
