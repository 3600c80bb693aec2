"""What a graph run captured: how many CUDA graphs its log says it holds, and what a graph arm that holds none is.

A graph arm can train fully eager and still print every capture line: MCore's TE helper logs `Rank 0: 0 graphable
layers.`, `Start CUDA Graphs capture...` and `Time spent in CUDA Graphs capture on rank 0: ...s` when no layer of the
scope is graphable (Core 0.19.2 transformer/cuda_graphs.py L2203-2209 and L2712-2757: with no callables it logs the
`No graphable layers found` WARNING, which Bridge's default log filter drops, and "still call[s] _finish_capturing";
Bridge 0.6.2 training/train.py L429-441 calls create_cudagraphs once, at step warmup, and trains on). Such a run is
not a graph result: its outcome is `uncaptured`, never a speedup.

The count, from the most direct line to the least (the run's files merged, the largest figure of each kind):
- the Megatron entry's `[graphsweep] cuda graphs detected: N at iteration I` (graphsweep/entry/megatron_entry.py
  count_graphs: the layers holding TE graphs, or 1 for the full-iteration graph, as Python sees them), and its
  `[graphsweep] no cuda graph detected after N iterations` (0, unless Megatron's lines count local runners, which
  the entry does not see);
- else Megatron's own lines: the TE helper's `N graphable layers` once its capture finished (0 with `No graphable
  layers found`), the local impl's `> built N cuda graph(s)`, 1 for `CUDA graph capture done for training!!!` (the
  builtin workload prints the same lines for its scoped and full-iteration graphs);
- plus 1 for the optimizer step's graph (`Optimizer CUDA graph capture done!!!`), which the entry does not count.
None when nothing says (no capture line, or only a start): the `no-capture` rule's case, not this one's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from graphsweep.parse.records import Evidence, Mark, RunSummary
from graphsweep.parse.filescan import FileScan
from graphsweep.vocab import CAPTURE, INVALID, UNCAPTURED

NOTHING_CLASS = "captured_nothing"  # the error class of an uncaptured run
NO_CAPTURE = ("graph arm {what} without any CUDA-graph capture line (TE `Time spent in CUDA Graphs capture`, "
              "full-iteration `CUDA graph capture done for training!!!`, optimizer `Optimizer CUDA graph capture "
              "done!!!`, local `> built N cuda graph(s)`): not a graph measurement")


@dataclass
class Count:
    graphs: int | None  # CUDA graphs (graphed layers for TE scopes) the run holds; None: its log does not say
    proof: Mark | None  # the line the count comes from


def _best(found: list[tuple[int, Mark]]) -> tuple[int, Mark] | None:
    return max(found, key=lambda x: x[0]) if found else None


def count(scans: Sequence[FileScan]) -> Count:
    """What the run's files (without problems, not superseded by a restart) say it captured."""
    entry = _best([(fs.graphs_detected[0], Mark(fs.path, fs.graphs_detected[1], fs.graphs_detected[2]))
                   for fs in scans if fs.graphs_detected])
    none = next((Mark(fs.path, *fs.no_graph_seen) for fs in scans if fs.no_graph_seen), None)
    skipped = next((Mark(fs.path, *fs.no_graphable) for fs in scans if fs.no_graphable), None)
    # the TE helper's capture lines come from rank 0 only, its `graphable layers` from every pipeline stage
    te_done = any(fs.te_captured for fs in scans)
    te = _best([(fs.graphable_layers or 0, Mark(fs.path, *fs.graphable_line)) for fs in scans
                if te_done and fs.graphable_line is not None])
    local = _best([(fs.local_built[0], Mark(fs.path, fs.local_built[1], fs.local_built[2]))
                   for fs in scans if fs.local_built])
    full, opt = any(fs.full_captured for fs in scans), any(fs.opt_captured for fs in scans)
    graphs: int | None = None  # Megatron's own lines first
    proof: Mark | None = None
    if skipped is not None:
        graphs, proof = 0, skipped
    elif te is not None:
        graphs, proof = te
    if local is not None:
        graphs, proof = (graphs or 0) + local[0], proof or local[1]
    if full:
        graphs = (graphs or 0) + 1
    if entry is not None:  # what Python holds, when the entry says
        graphs, proof = entry
    elif none is not None and not graphs:  # the entry sees TE layers and the full-iteration graph, not local runners
        graphs, proof = 0, none
    if opt:
        graphs = (graphs or 0) + 1
    return Count(graphs, proof)


def nothing(s: RunSummary, ev: Evidence) -> RunSummary:
    """A graph arm whose log says it holds no CUDA graph: it trained eager, whatever else it printed."""
    s.outcome, s.error_class, s.phase, s.failed_iteration = UNCAPTURED, NOTHING_CLASS, CAPTURE, None
    s.measurement_usable, s.infrastructure = False, False
    mark = ev.graphs_captured_proof
    if mark is not None:
        s.signature, s.signature_line, s.signature_file = mark.text, mark.line, mark.file
    s.reason = (f"graph arm captured no CUDA graph ({mark.text.strip() if mark else 'its log says 0'}): it trained "
                f"eager, so its {s.steady_n} steady iterations are no graph measurement")
    return s


def no_evidence(s: RunSummary, ev: Evidence) -> RunSummary:
    """A graph arm that ran to its end without capture and replay lines: no evidence a graph ran (invalid)."""
    s.outcome, s.error_class = INVALID, ("no_capture" if not s.capture_seen else "no_replay")
    if not s.capture_seen:
        s.reason = NO_CAPTURE.format(what="ran to its end")
    else:
        s.reason = f"graph arm captured (iteration {ev.capture_iteration}) but no iteration ran after the " \
                   "capture: no evidence of replay"
    return s
