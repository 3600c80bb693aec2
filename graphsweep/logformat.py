"""The log grammar: every line graphsweep writes into a training log, and the Megatron lines it copies.

One module for the code that writes logs (the builtin workload, the Megatron entry, the ABBA driver) and the code
that reads them (graphsweep.parse), so a marker cannot be spelled two ways. Standard library only: the entry
module imports it inside the user's container, where graphsweep's dependencies are not installed.

Megatron's own formats are quoted from ../shared/docs/megatron-reference.md ("ref §x.y"), each with its source.
"""

from __future__ import annotations

import datetime
import re
from typing import Mapping

MARK = "[graphsweep]"

# --------------------------------------------------------------------------------------------------
# graphsweep's markers (written by graphsweep/workload.py and graphsweep/entry/megatron_entry.py)

PROVENANCE = f"{MARK} provenance: "  # + one JSON object: the CUDA stack as the training process sees it
DEVICE = f"{MARK} device: "  # builtin: device name, torch and CUDA versions
BLOCKED = f"{MARK} blocked: "  # builtin: the arm cannot run here (exit 3)
NO_CUDA = f"{BLOCKED}CUDA graphs need a CUDA device (torch.cuda.is_available() is False)"
# The capture call's own wall time, measured around it (builtin). Logs of the Megatron entry before 2026-12-02
# printed the capture *iteration's* excess over an eager iteration under these words: see ENTRY_GRAPH_API.
CAPTURE_SECONDS = f"{MARK} capture seconds: "
GRAPHS_DETECTED = f"{MARK} cuda graphs detected: "  # entry: "<n> at iteration <i>", n graphs visible from Python
REPLAY = f"{MARK} cuda graph replay: iteration "  # + the first (builtin) or every (entry) replayed iteration
REPLAYS = f"{MARK} cuda graph replays: "  # builtin: + the number of replays at the end
NO_GRAPH = f"{MARK} no cuda graph detected after "  # entry: a graph arm that never showed a graph
PEAKS_RESET = f"{MARK} memory peaks reset after iteration "  # + i: mem-max-* of later lines are the steady window's
ENTRY_GRAPH_API = f"{MARK} graph api: "  # the Megatron entry's first line (rank 0)
ENTRY_OVERRIDES = f"{MARK} overrides: "
ENTRY_DONE = f"{MARK} done: wall seconds "


def line(text: str) -> str:
    """A graphsweep marker line."""
    return f"{MARK} {text}"


def capture_seconds(seconds: float) -> str:
    return f"{CAPTURE_SECONDS}{seconds:.3f}"


def graphs_detected(count: int, iteration: int) -> str:
    return f"{GRAPHS_DETECTED}{count} at iteration {iteration}"


def replay(iteration: int) -> str:
    return f"{REPLAY}{iteration}"


def replays(count: int) -> str:
    return f"{REPLAYS}{count}"


def no_graph(iterations: int) -> str:
    return f"{NO_GRAPH}{iterations} iterations"


def peaks_reset(iteration: int) -> str:
    return f"{PEAKS_RESET}{iteration}"


# --------------------------------------------------------------------------------------------------
# Megatron's lines that graphsweep writes itself (so one parser reads the builtin workload and Megatron Bridge)

# Bridge train_utils.py MEMORY_KEYS (ref §5.3), in Bridge's order: torch.cuda.memory_stats() key -> printed name.
# Bridge prints "bytes" as "gigabytes" (1e9-byte GB, 5 significant digits); "retires" is Bridge's typo.
MEMORY_KEYS = (
    ("allocated_bytes.all.current", "mem-allocated-gigabytes"),
    ("active_bytes.all.current", "mem-active-gigabytes"),
    ("inactive_split_bytes.all.current", "mem-inactive-gigabytes"),
    ("reserved_bytes.all.current", "mem-reserved-gigabytes"),
    ("allocated_bytes.all.peak", "mem-max-allocated-gigabytes"),
    ("active_bytes.all.peak", "mem-max-active-gigabytes"),
    ("inactive_split_bytes.all.peak", "mem-max-inactive-gigabytes"),
    ("reserved_bytes.all.peak", "mem-max-reserved-gigabytes"),
    ("num_alloc_retries", "mem-alloc-retires"),
    ("allocation.all.current", "mem-allocated-count"),
)


def gigabytes(n: float) -> str:
    """Bridge's memory value: 1e9-byte GB, 5 significant digits."""
    return repr(float(f"{n / 1e9:.5g}"))


def memory_line(rank: int, iteration: int, stats: Mapping[str, float]) -> str:
    """`[Rank r] (after i iterations) memory (GB) | ...` from torch.cuda.memory_stats() (Bridge >= 0.2, ref §5.3)."""
    parts = []
    for stat, name in MEMORY_KEYS:
        value = stats.get(stat, 0)
        parts.append(f"{name}: {gigabytes(value) if name.endswith('gigabytes') else int(value)}")
    return f"[Rank {rank}] (after {iteration} iterations) memory (GB) | " + " | ".join(parts)


def now() -> str:
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def iteration_line(iteration: int, total: int, *, micro_batch: int, elapsed_ms: float, tflops: float, lr: float,
                   loss: float, grad_norm: float) -> str:
    """Megatron Bridge train_utils.py::training_log (ref §5.1). `lm loss` is printed only when >= 0.0, so a NaN loss
    drops the key, as in Bridge."""
    s = f" [{now()}] iteration {iteration:8d}/{total:8d} | consumed samples: {iteration * micro_batch:12d} |"
    s += f" elapsed time per iteration (ms): {elapsed_ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |"
    s += f" learning rate: {lr:.6E} | global batch size: {micro_batch:5d} |"
    s += f" lm loss: {loss:.6E} |" if loss >= 0.0 else ""
    s += f" loss scale: {1.0:.1f} | grad norm: {grad_norm:.3f} |"
    return s + f" number of skipped iterations: {0:3d} | number of nan iterations: {0:3d} |"


# Megatron texts the builtin workload prints at the same moments Megatron does (ref §5.5, §5.6)
TRAINING_START = "Starting training loop at iteration 0"  # Bridge train.py
INIT_SECONDS = "time to initialize megatron (seconds): "  # Bridge setup marker
GRAPHABLE_LAYERS = "Rank 0: {layers} graphable layers."  # MCore cuda_graphs.py TECudaGraphHelper
TE_CAPTURE_START = "Start CUDA Graphs capture..."  # MCore cuda_graphs.py TECudaGraphHelper
TE_CAPTURE_TIME = "Time spent in CUDA Graphs capture on rank 0: {seconds}s"  # MCore cuda_graphs.py
FULL_CAPTURE_START = "Capture CUDA graph for training!!!"  # MCore full_cuda_graph.py
FULL_CAPTURE_DONE = "CUDA graph capture done for training!!!"  # MCore full_cuda_graph.py
DELETING_GRAPHS = "Deleting CUDA graphs"  # Bridge train.py, at every normal end
AFTER_TRAINING = "[after training is done] datetime: {now} "  # MCore barrier_and_log


# --------------------------------------------------------------------------------------------------
# Reading graphsweep's markers (bytes: logs are read as bytes, line by line; never anchored, ranks glue lines)

_F = rb"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf|NaN|Inf))"
RE_CAPTURE_SECONDS = re.compile(re.escape(CAPTURE_SECONDS.encode()) + rb"\s*" + _F)
RE_GRAPHS_DETECTED = re.compile(re.escape(GRAPHS_DETECTED.encode()) + rb"(\d+) at iteration (\d+)")
RE_REPLAY = re.compile(re.escape(REPLAY.encode()) + rb"(\d+)")
RE_REPLAYS = re.compile(re.escape(REPLAYS.encode()) + rb"(\d+)")
RE_PEAKS_RESET = re.compile(re.escape(PEAKS_RESET.encode()) + rb"(\d+)")
