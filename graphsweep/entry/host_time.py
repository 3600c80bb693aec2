"""Where an eager step's host time goes, by the part of the model a graph scope would capture.

A scoped CUDA graph removes the host work of what it captures and nothing else: on a host-bound step the GPU
ceiling (graphsweep/entry/gpu_busy.py) says how much *any* graph could win, this says how much of the host time
each scope covers and what stays eager. The eager arm annotates the methods that a scope's graph replaces
(``torch.profiler.record_function``, for the same profiled window as the GPU-busy probe: iterations 2..warmup),
profiles CPU activity beside CUDA's, and charges every stretch of host time to the innermost region open on its
thread. The backward pass runs on autograd's own thread: each ``autograd::engine::evaluate_function`` event is
charged to the region of the forward op that made its node (the profiler's sequence number and forward thread
link the two), so a region holds its forward *and* backward host time. One line per rank:

    [graphsweep] host time: rank 0 iterations 2-3: 240.112 ms per iteration: attn 40.201, moe_router 12.000, ...

Every figure is milliseconds of host wall time per iteration, the profiler's own per-op cost included (it weighs
every region alike, by its op count); ``outside`` is the rest of the step (embedding, output layer and loss,
gradient reduction, data, the training loop). The regions, and the scopes that cover them, are ``REGIONS`` and
``COVERS`` below: Megatron Core 0.19.2's transformer_layer.py and moe/moe_layer.py name the methods (the TE graph
of ``attn`` replays ``TransformerLayer._forward_attention``; ``moe_router`` the pre-MLP layernorm and
``MoELayer.route`` with the shared experts; ``moe_preprocess`` ``MoELayer.preprocess``, i.e. the dispatcher's
``dispatch_preprocess``; ``moe`` the whole MoE sublayer, legal only for drop-and-pad MoE).

Standard library at module level: the controller imports REGIONS and COVERS; torch is imported inside.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass
from collections.abc import Callable, Iterable
from typing import Any

# The regions, in the order a transformer layer runs them, and their columns: graphsweep/vocab.py (the names the
# parser, the judge and the report share)
from graphsweep.vocab import (  # noqa: F401 - REGIONS and the column names are read from here too
    ATTN, DISPATCH, EXPERTS, MLP, MOE_OTHER, OPTIMIZER, OUTSIDE, PREPROCESS, REGIONS, ROUTER, events_column,
    ms_column, share_column, wait_column,
)  # fmt: skip

# Which regions a graph of each scope (Megatron's cuda_graph_modules names) takes off the host. full_iteration
# takes all of them; the dispatch, the experts and the MoE tail stay eager unless the whole MoE layer is captured.
COVERS: dict[str, tuple[str, ...]] = {
    "attn": (ATTN,),
    "mlp": (MLP,),
    "moe_router": (ROUTER,),
    "moe_preprocess": (PREPROCESS,),
    "moe": (ROUTER, PREPROCESS, DISPATCH, EXPERTS, MOE_OTHER),
    "full_iteration": REGIONS,
}

ANNOTATION = "graphsweep::"  # the record_function names of the regions
BACKWARD = "autograd::engine::evaluate_function: "  # torch/csrc/autograd/engine.cpp: each node's backward

# Megatron Core 0.19.2 (transformer/transformer_layer.py, transformer/moe/moe_layer.py): method -> region
_LAYER_METHODS = (("_forward_attention", ATTN),)
_MOE_LAYER_METHODS = (("route", ROUTER), ("shared_experts_compute", ROUTER), ("preprocess", PREPROCESS),
                      ("dispatch", DISPATCH), ("combine", DISPATCH), ("routed_experts_compute", EXPERTS),
                      ("postprocess", MOE_OTHER))


def covered_regions(scopes: Iterable[str]) -> tuple[str, ...]:
    """The regions a graph of these scopes takes off the host (unknown scope names cover nothing)."""
    got = {r for s in scopes for r in COVERS.get(s, ())}
    return tuple(r for r in REGIONS if r in got)


def _wrap(obj: Any, method: str, region: str, undo: list[Callable[[], None]]) -> None:
    """Open region `region` around obj.method for as long as the probe runs (an instance attribute shadows the
    class's method; deleting it restores the method)."""
    original = getattr(obj, method, None)
    if original is None or method in vars(obj):
        return
    import torch

    @functools.wraps(original)
    def annotated(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(ANNOTATION + region):
            return original(*args, **kwargs)

    setattr(obj, method, annotated)
    undo.append(lambda: delattr(obj, method))


def annotate_megatron(model: Iterable[Any], optimizer: Any) -> Callable[[], None]:
    """Annotate Megatron Core's transformer and MoE layers of every model chunk, and the optimizer's step;
    returns the function that removes the annotations."""
    undo: list[Callable[[], None]] = []
    for chunk in model or []:
        for module in chunk.modules():
            if hasattr(module, "_forward_attention") and hasattr(module, "_forward_mlp"):  # a TransformerLayer
                moe = bool(getattr(module, "is_moe_layer", False))
                for method, region in _LAYER_METHODS:
                    _wrap(module, method, region, undo)
                _wrap(module, "_forward_mlp", MOE_OTHER if moe else MLP, undo)
                if moe:
                    _wrap(module, "_forward_pre_mlp_layernorm", ROUTER, undo)
            if all(hasattr(module, m) for m, _ in _MOE_LAYER_METHODS if m != "shared_experts_compute"):  # MoELayer
                for method, region in _MOE_LAYER_METHODS:
                    _wrap(module, method, region, undo)
    if not undo:  # a zero for every region would read as "the scopes cover nothing"
        raise RuntimeError("no Megatron Core TransformerLayer or MoELayer method to annotate (another Core version?)")
    if optimizer is not None:
        _wrap(optimizer, "step", OPTIMIZER, undo)
    return lambda: [u() for u in reversed(undo)] and None


def annotate_modules(pairs: Iterable[tuple[Any, str]], optimizer: Any) -> Callable[[], None]:
    """Annotate each module's forward with its region (the builtin workload's attention and MLP sub-blocks)."""
    undo: list[Callable[[], None]] = []
    for module, region in pairs:
        _wrap(module, "forward", region, undo)
    if optimizer is not None:
        _wrap(optimizer, "step", OPTIMIZER, undo)
    return lambda: [u() for u in reversed(undo)] and None


def exclusive_ns(intervals: Iterable[tuple[int, int, str]]) -> dict[str, int]:
    """Time of each label where it is the innermost open interval ([start, end) ns on one thread; an interval
    that outlives its parent is cut at the parent's end)."""
    out: dict[str, int] = defaultdict(int)
    stack: list[tuple[int, str]] = []
    cursor = 0
    for start, end, label in sorted(intervals, key=lambda t: (t[0], -t[1])):
        while stack and stack[-1][0] <= start:
            stop, top = stack.pop()
            out[top] += stop - cursor
            cursor = stop
        if stack:
            out[stack[-1][1]] += start - cursor
            end = min(end, stack[-1][0])
        cursor = start
        stack.append((end, label))
    while stack:
        stop, top = stack.pop()
        out[top] += stop - cursor
        cursor = stop
    return dict(out)


def _innermost(points: list[tuple[int, int]], intervals: list[tuple[int, int, str]]) -> dict[int, str]:
    """For each (time, key) point, the label of the innermost interval open at that time, if any."""
    found: dict[int, str] = {}
    events = sorted([(s, 0, e, label) for s, e, label in intervals] + [(t, 1, key, "") for t, key in points],
                    key=lambda x: (x[0], x[1]))
    stack: list[tuple[int, str]] = []
    for time, kind, end_or_key, label in events:
        while stack and stack[-1][0] <= time:
            stack.pop()
        if kind == 0:
            stack.append((end_or_key, label))
        elif stack:
            found[end_or_key] = stack[-1][1]
    return found


@dataclass
class RegionTime:
    """One region's host time over the profiled window."""

    ns: int = 0  # host wall time in which this region is the innermost one open
    wait_ns: int = 0  # of which inside a blocking CUDA runtime call: the host waiting for the GPU, not launching
    events: int = 0  # profiler events that started in it: what the profiler's own per-event cost scales with


# CUDA runtime calls in which the host waits for the GPU (CUPTI's runtime API records, on the calling thread)
WAITS = frozenset({"cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize", "cudaMemcpy",
                   "cudaMemcpyAsync", "cudaStreamQuery"})
# Up to this long, the autograd thread's gap before a backward node is the engine readying that node: its region's
ENGINE_GAP_NS = 200_000


def _backward_spans(backward: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Top-level backward nodes of one thread, each widened to the engine gap before it (when short)."""
    out: list[tuple[int, int, str]] = []
    last_end: int | None = None
    for start, end, region in sorted(backward):
        if last_end is not None and start < last_end:
            out.append((start, end, region))  # nested (reentrant backward): exclusive_ns charges the innermost
            continue
        if last_end is not None and 0 <= start - last_end <= ENGINE_GAP_NS:
            start = last_end
        out.append((start, end, region))
        last_end = end
    return out


def region_times(events: Iterable[Any]) -> dict[str, RegionTime]:
    """Host time per region from a stopped profiler's CPU-side KinetoEvents (``prof.profiler.kineto_results.events()``):
    annotations label the forward; backward nodes take the label of the forward op that created them (and the
    autograd engine's short gap before each); every other CPU event (aten ops, CUDA runtime calls) is counted in the
    region open where it starts, ``outside`` when none is."""
    import torch

    cpu = [e for e in events if e.device_type() == torch.autograd.DeviceType.CPU]
    spans: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for e in cpu:
        if e.name().startswith(ANNOTATION):
            spans[e.start_thread_id()].append((e.start_ns(), e.end_ns(), e.name()[len(ANNOTATION):]))
    # forward ops that made an autograd node: (thread, sequence number) -> the region they ran in
    origin: dict[tuple[int, int], str] = {}
    for tid, regions in spans.items():
        ops = [(e.start_ns(), e.sequence_nr()) for e in cpu
               if e.start_thread_id() == tid and e.sequence_nr() >= 0 and not e.name().startswith(BACKWARD)]
        for seq, region in _innermost(ops, regions).items():
            origin[(tid, seq)] = region
    backward: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for e in cpu:
        if e.name().startswith(BACKWARD) and e.sequence_nr() >= 0:
            region = origin.get((e.fwd_thread_id(), e.sequence_nr()))
            if region is not None:
                backward[e.start_thread_id()].append((e.start_ns(), e.end_ns(), region))
    for tid, nodes in backward.items():
        spans[tid].extend(_backward_spans(nodes))
    out: dict[str, RegionTime] = defaultdict(RegionTime)
    for tid, intervals in spans.items():
        for region, ns in exclusive_ns(intervals).items():
            out[region].ns += ns
    by_thread: dict[int, list[Any]] = defaultdict(list)
    for e in cpu:
        if not e.name().startswith((ANNOTATION, BACKWARD)):
            by_thread[e.start_thread_id()].append(e)
    for tid, evs in by_thread.items():
        where = _innermost([(e.start_ns(), i) for i, e in enumerate(evs)], spans.get(tid, []))
        for i, e in enumerate(evs):
            rt = out[where.get(i, OUTSIDE)]
            rt.events += 1
            if e.name() in WAITS:
                rt.wait_ns += e.end_ns() - e.start_ns()
    return dict(out)


def per_iteration(times: dict[str, RegionTime], wall_ns: int, iterations: int) -> dict[str, tuple[float, float, float]]:
    """{region: (ms, wait ms, events) per iteration} for every region in REGIONS; ``outside``'s ms is the window's
    wall time not in any region (never below 0: threads that overlap could otherwise make it so)."""
    n = iterations
    got = {r: times.get(r, RegionTime()) for r in REGIONS}
    out = {r: (t.ns / 1e6 / n, t.wait_ns / 1e6 / n, t.events / n) for r, t in got.items() if r != OUTSIDE}
    rest = max(0.0, wall_ns / 1e6 / n - sum(ms for ms, _, _ in out.values()))
    out[OUTSIDE] = (rest, got[OUTSIDE].wait_ns / 1e6 / n, got[OUTSIDE].events / n)
    return out


def steady_shares(regions: dict[str, tuple[float, float, float | None]], window_ms: float,
                  steady_ms: float) -> dict[str, float]:
    """Each region's share of the steady (unprofiled) eager step. The profiled window runs slower than the steady
    step by the profiler's own cost, about the same for every event it records (5.0 us an event on the 128-expert
    MoE on an H200, benchmarks/data/h200-moe-host-time): with the events of each region known, that cost is taken
    off each region before the shares are formed; without them (logs of ad664cb) the shares are the window's own,
    which weigh event-heavy regions a little more."""
    events = [e for _, _, e in regions.values()]
    if all(e is not None for e in events) and sum(events) > 0 and window_ms > steady_ms > 0:
        per_event = (window_ms - steady_ms) / sum(events)
        ms = {r: max(0.0, m - e * per_event) for r, (m, _, e) in regions.items()}
        total = steady_ms
    else:
        ms = {r: m for r, (m, _, _) in regions.items()}
        total = window_ms
    return {r: m / total for r, m in ms.items()} if total > 0 else {}


def scope_estimate(step_ms: float, busy_ms: float | None, shares: dict[str, float], scopes: Iterable[str]) -> float:
    """The step a graph of these scopes would leave if it took exactly its regions' host time off a host-bound step
    and nothing else, never below the GPU's busy time: max(busy, step x (1 - covered share)). An estimate to read
    beside the measured graph, not a bound (on the 128-expert MoE the measured speedups were 6-14 % above it, inside
    their intervals: docs/results-h200.md section 6)."""
    covered = sum(shares.get(r, 0.0) for r in covered_regions(scopes))
    return max(busy_ms or 0.0, step_ms * (1.0 - covered))
