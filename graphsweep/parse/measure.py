"""What a run measured, onto its summary: the steady window and its step-time statistics, the memory figures, and
the evidence of capture and replay (graphsweep/parse/classify.py decides the outcome; this says what was measured)."""

from __future__ import annotations

import numpy as np

from graphsweep.parse.busy import launch_figures
from graphsweep.parse.memory import steady_figures
from graphsweep.parse.records import Evidence, RunSummary
from graphsweep.parse.window import line_spans, steady_window
from graphsweep.vocab import GRAPH


def measure(s: RunSummary, ev: Evidence, arm: str, warmup: int | None, min_steady: int) -> None:
    """Fill the summary's measurement: steady window and step-time statistics, memory figures, capture evidence."""
    s.n_iterations = len(ev.iterations)
    s.last_iteration = int(ev.iterations[-1]) if len(ev.iterations) else None
    s.train_iters = ev.train_iters
    if warmup is not None:  # skip iterations 1..warmup and the capture iteration warmup+1 (of the attempt), both arms
        first_allowed = ev.start_iteration + warmup + 2
    elif ev.capture_iteration is not None:
        first_allowed = ev.capture_iteration + 1
        s.notes.append(f"warmup unknown: steady window starts after the capture iteration {ev.capture_iteration}")
    else:
        first_allowed = ev.start_iteration + 2
    timed = ~np.isnan(ev.elapsed_ms)
    its, ms = ev.iterations[timed], ev.elapsed_ms[timed]
    spans = line_spans(its, ev.start_iteration)  # log_interval N: each line the mean of N iterations
    w = steady_window(its, ms, first_allowed, min_steady, spans=spans)
    s.steady_first, s.steady_last, s.steady_n, s.steady_reason = w.first, w.last, w.n, w.reason
    if w.first is not None and w.last is not None:
        inside = (its >= w.first) & (its <= w.last)
        x, span = ms[inside], spans[inside]
        if len(x):  # each line the mean of its span: the lines' median and spread, the iterations' mean
            s.step_ms_median = float(np.median(x))
            s.step_ms_mean = float(np.average(x, weights=span))
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
    launch_figures(s, ev)
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
    s.graphs_captured = ev.graphs_captured if arm == GRAPH else None
    s.capture_seen = ev.capture_marker is not None
    if ev.replays is not None or ev.replay_iteration is not None:  # builtin workload says it explicitly
        s.replay_seen = bool(ev.replay_iteration is not None or (ev.replays or 0) > 0)
    elif s.capture_seen and ev.capture_iteration is not None:
        # Megatron prints no replay line: an iteration after the capture iteration ran on the graph
        s.replay_seen = bool((ev.iterations > ev.capture_iteration).any())
