"""The log grammar: every line graphsweep writes into a training log, and the Megatron lines it copies.

One module for the code that writes logs (the builtin workload, the Megatron entry, the ABBA driver) and the code
that reads them (graphsweep.parse), so a marker cannot be spelled two ways. Standard library only: the entry
module imports it inside the user's container, where graphsweep's dependencies are not installed.

Megatron's own formats are those of docs/megatron-facts.md ("§x.y" below), each with its source.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any, Collection, Mapping, Sequence

MARK = "[graphsweep]"

# --------------------------------------------------------------------------------------------------
# graphsweep's markers (written by graphsweep/entry/builtin_gpt.py and graphsweep/entry/megatron_entry.py)
PROVENANCE = f"{MARK} provenance: "  # + one JSON object: the CUDA stack as the training process sees it
DEVICE = f"{MARK} device: "  # builtin: device name, torch and CUDA versions
ARM_BLOCKED = f"{MARK} blocked: "  # builtin: the arm cannot run here (exit 3; the outcome is vocab.BLOCKED)
NO_CUDA = f"{ARM_BLOCKED}CUDA graphs need a CUDA device (torch.cuda.is_available() is False)"
# the run rule skipped a graph arm on its eager runs' diagnostic (run/gate.py): the log of that run says only this,
# the decision is run.json's `gate` record (the parser reads that, not this line)
GATE_SKIPPED = f"{MARK} not run: the launch gate skipped this graph arm; its decision is the gate record of run.json"
# builtin: the capture call's own wall time, measured around it (torch.cuda.graph / make_graphed_callables). Logs
# of the Megatron entry before 2026-12-02 (those with ENTRY_GRAPH_API) printed the capture *iteration's* excess
# under these words instead (see CAPTURE_ITERATION_EXCESS): the parser reads the old text by who wrote the log.
CAPTURE_SECONDS = f"{MARK} capture seconds: "
# Megatron entry: wall time of the iteration in which graphs first appear (callback end to callback end) minus the
# median of its eager iterations 2..that-1: what the capture iteration cost beyond a normal one. More than MCore's
# TE_CAPTURE_TIME, which times make_graphed_callables only (MCore 0.19 cuda_graphs.py _start_capturing to
# _finish_capturing), not the gc.collect/empty_cache and barriers around it nor the allocator regrowing afterwards;
# MCore's full-iteration capture prints no time at all.
CAPTURE_ITERATION_EXCESS = f"{MARK} capture iteration excess seconds: "
GRAPHS_DETECTED = f"{MARK} cuda graphs detected: "  # entry: "<n> at iteration <i>", n graphs visible from Python
REPLAY = f"{MARK} cuda graph replay: iteration "  # + the first (builtin) or every (entry) replayed iteration
REPLAYS = f"{MARK} cuda graph replays: "  # builtin: + the number of replays at the end
NO_GRAPH_SEEN = f"{MARK} no cuda graph detected after "  # entry: a graph arm that never showed a graph
PEAKS_RESET = f"{MARK} memory peaks reset after iteration "  # + i: mem-max-* of later lines are the steady window's
# Both entries, eager arms: the GPU's busy time per iteration over a short profiled window (graphsweep/entry/gpu_busy.py)
GPU_BUSY = f"{MARK} gpu busy: "
# Both entries, eager arms, the same window: host ms per iteration by region (graphsweep/entry/host_time.py)
HOST_TIME = f"{MARK} host time: "
ENTRY_GRAPH_API = f"{MARK} graph api: "  # the Megatron entry's first line (rank 0)
ENTRY_OVERRIDES = f"{MARK} overrides: "
ENTRY_DONE = f"{MARK} done: wall seconds "


def line(text: str) -> str:
    """A graphsweep marker line."""
    return f"{MARK} {text}"


def provenance_line(facts: Mapping[str, Any]) -> str:
    """`[graphsweep] provenance: {...}`: the training process's facts as one JSON object (graphsweep/provenance.py)."""
    return PROVENANCE + json.dumps(facts, sort_keys=True, default=str)


def provenance_facts(raw: bytes) -> dict[str, Any] | None:
    """The JSON object of a provenance line (whatever another rank glued after it ignored), or None."""
    at = raw.find(PROVENANCE_B)
    if at < 0:
        return None
    try:
        facts, _ = json.JSONDecoder().raw_decode(raw[at + len(PROVENANCE_B):].decode("utf-8", "replace"))
    except ValueError:
        return None
    return facts if isinstance(facts, dict) else None


def capture_seconds(seconds: float) -> str:
    return f"{CAPTURE_SECONDS}{seconds:.3f}"


def capture_iteration_excess(seconds: float) -> str:
    return f"{CAPTURE_ITERATION_EXCESS}{seconds:.3f}"


def graphs_detected(count: int, iteration: int) -> str:
    return f"{GRAPHS_DETECTED}{count} at iteration {iteration}"


def replay(iteration: int) -> str:
    return f"{REPLAY}{iteration}"


def replays(count: int) -> str:
    return f"{REPLAYS}{count}"


def no_graph(iterations: int) -> str:
    return f"{NO_GRAPH_SEEN}{iterations} iterations"


def peaks_reset(iteration: int) -> str:
    return f"{PEAKS_RESET}{iteration}"


def gpu_busy(rank: int, first: int, last: int, busy_ms: float, activities: int) -> str:
    """`[graphsweep] gpu busy: rank 0 iterations 2-3: 41.382 ms per iteration (1863 GPU activities, 2 iterations)`"""
    n = last - first + 1
    return (f"{GPU_BUSY}rank {rank} iterations {first}-{last}: {busy_ms:.3f} ms per iteration "
            f"({activities} GPU activities, {n} iterations)")


def gpu_busy_unmeasured(rank: int, why: str) -> str:
    return f"{GPU_BUSY}rank {rank} not measured: {why}"


def host_time(rank: int, first: int, last: int, step_ms: float,
              regions: Mapping[str, tuple[float, float, float]]) -> str:
    """`[graphsweep] host time: rank 0 iterations 2-4: 755.750 ms per iteration: attn 52.566 (wait 0.120, 1520 events),
    ..., outside 128.762 (wait 3.000, 2210 events)`: per region, host ms, of which waiting on the GPU, and profiler
    events per iteration. Logs of 2026-12-02 06:40 (graphsweep ad664cb) print `name ms` alone."""
    parts = ", ".join(f"{name} {ms:.3f} (wait {wait:.3f}, {events:.0f} events)"
                      for name, (ms, wait, events) in regions.items())
    return f"{HOST_TIME}rank {rank} iterations {first}-{last}: {step_ms:.3f} ms per iteration: {parts}"


def host_time_unmeasured(rank: int, why: str) -> str:
    return f"{HOST_TIME}rank {rank} not measured: {why}"


# The ABBA driver's markers around each segment of a pair job's combined log (graphsweep/entry/abba.py); the
# controller splits the log at them (graphsweep/parse/pairs.py)
ABBA_MARK = "[graphsweep abba]"


def segment_start(label: str, arm: str, command: str) -> str:
    return f"{ABBA_MARK} segment {label} ({arm}) start: {command}"


def segment_end(label: str, arm: str, exit_code: int, wall_s: float) -> str:
    return f"{ABBA_MARK} segment {label} ({arm}) end: exit {exit_code}, wall {wall_s:.3f} s"


def pair_done(order: str, exits: str) -> str:
    return f"{ABBA_MARK} pair done: order {order}; exits {exits}"


def abba_launch_error(error: str) -> str:
    return f"{ABBA_MARK} launch error: {error}"


RE_SEGMENT_START = re.compile(r"\[graphsweep abba\] segment (?P<label>[AB]\d) \((?P<arm>\w+)\) start")
RE_SEGMENT_END = re.compile(
    r"\[graphsweep abba\] segment (?P<label>[AB]\d) \((?P<arm>\w+)\) end: exit (?P<exit>-?\d{1,18}), wall (?P<wall>[\d.]+) s")

# --------------------------------------------------------------------------------------------------
# Megatron's lines that graphsweep writes itself (so one parser reads the builtin workload and Megatron Bridge)
# Bridge train_utils.py MEMORY_KEYS (docs/megatron-facts.md §5.3), in Bridge's order: torch.cuda.memory_stats() key -> printed name.
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
    """`[Rank r] (after i iterations) memory (GB) | ...` from torch.cuda.memory_stats() (Bridge >= 0.2, docs/megatron-facts.md §5.3)."""
    parts = []
    for stat, name in MEMORY_KEYS:
        value = stats.get(stat, 0)
        parts.append(f"{name}: {gigabytes(value) if name.endswith('gigabytes') else int(value)}")
    return f"[Rank {rank}] (after {iteration} iterations) memory (GB) | " + " | ".join(parts)


def now() -> str:
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def iteration_line(iteration: int, total: int, *, micro_batch: int, elapsed_ms: float, tflops: float, lr: float,
                   loss: float, grad_norm: float) -> str:
    """Megatron Bridge train_utils.py::training_log (docs/megatron-facts.md §5.1). `lm loss` is printed only when >= 0.0, so a NaN loss
    drops the key, as in Bridge."""
    s = f" [{now()}] iteration {iteration:8d}/{total:8d} | consumed samples: {iteration * micro_batch:12d} |"
    s += f" elapsed time per iteration (ms): {elapsed_ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |"
    s += f" learning rate: {lr:.6E} | global batch size: {micro_batch:5d} |"
    s += f" lm loss: {loss:.6E} |" if loss >= 0.0 else ""
    s += f" loss scale: {1.0:.1f} | grad norm: {grad_norm:.3f} |"
    return s + f" number of skipped iterations: {0:3d} | number of nan iterations: {0:3d} |"


# Megatron texts the builtin workload prints at the same moments Megatron does (docs/megatron-facts.md §5.5, §5.6)
TRAINING_START = "Starting training loop at iteration 0"  # Bridge train.py
INIT_SECONDS = "time to initialize megatron (seconds): "  # Bridge setup marker
# Bridge training/initialize.py L208 (rng_config.seed), MCore training/initialize.py L113 (args.seed): runs of one
# seed train the same model, so their losses must agree (judge/parity.py)
SEED = "> setting random seeds to {seed} ..."
GRAPHABLE_LAYERS = "Rank 0: {layers} graphable layers."  # MCore cuda_graphs.py TECudaGraphHelper
TE_CAPTURE_START = "Start CUDA Graphs capture..."  # MCore cuda_graphs.py TECudaGraphHelper
TE_CAPTURE_TIME = "Time spent in CUDA Graphs capture on rank 0: {seconds}s"  # MCore cuda_graphs.py
FULL_CAPTURE_START = "Capture CUDA graph for training!!!"  # MCore full_cuda_graph.py
FULL_CAPTURE_DONE = "CUDA graph capture done for training!!!"  # MCore full_cuda_graph.py
# MCore 0.19.2 optimizer/optimizer_cuda_graph.py L32 / L46 (logger.info, optimizer.optimizer_cuda_graph): the
# optimizer step captured at iteration cuda_graph_warmup_steps + 1 (Bridge 0.6.2 train.py L321-326)
OPT_CAPTURE_START = "Capture CUDA graph for optimizer!!!"
OPT_CAPTURE_DONE = "Optimizer CUDA graph capture done!!!"
DELETING_GRAPHS = "Deleting CUDA graphs"  # Bridge train.py, at every normal end
AFTER_TRAINING = "[after training is done] datetime: {now} "  # MCore barrier_and_log

# --------------------------------------------------------------------------------------------------
# Reading logs (bytes: logs are read as bytes, line by line; a pattern is searched anywhere in a line, never anchored,
# since srun labels, `[rankN]: ` prefixes and ranks glued into one physical line are all real). Sources: docs/megatron-facts.md §5.1-5.6.
_F = rb"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf|NaN|Inf))"
# Bridge train_utils.py::training_log / MLM training.py (docs/megatron-facts.md §5.1): "iteration {:8d}/{:8d} |"
ITER_NEEDLE = b"elapsed time per iteration"
ITER_HEAD = re.compile(rb"iteration\s+(\d{1,18})/\s*(\d{1,18})\s*\|")
ELAPSED = re.compile(rb"elapsed time per iteration \(ms\):\s*" + _F)
# When an iteration line was printed, on the training process's local clock: Bridge 0.6.2
# training/utils/train_utils.py L1173 `f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S')}]"` (whole seconds; the
# builtin's `now()` above too), MCore 0.19.2 training/training.py L2844 the same with `.%f` (graphsweep/store/timeparts.py)
ITER_STAMP = re.compile(rb"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\] iteration\s+(\d{1,18})/")


def decimals(number: bytes) -> int | None:
    """Decimals a number was printed with (b"6.3" -> 1): its print step is 10**-decimals. None for nan/inf/1e-3."""
    if not number[-1:].isdigit() or b"e" in number.lower():
        return None
    _, dot, tail = number.partition(b".")
    return len(tail) if dot else 0


THROUGHPUT = re.compile(rb"throughput per GPU \(TFLOP/s/GPU\):\s*" + _F)
LM_LOSS = re.compile(rb"\blm loss:\s*" + _F)  # printed only when >= 0, so NaN removes it (docs/megatron-facts.md §5.1)
GRAD_NORM = re.compile(rb"grad norm:\s*" + _F)
# Bridge train_utils.py L1220 / MCore 0.19.2 training.py L2894 `' number of skipped iterations: {:3d} |'`: the
# iterations of the interval whose optimizer step was skipped (an fp16 loss-scale overflow); their loss is not in the
# interval's mean, so a line whose every iteration was skipped holds no loss: MCore adds a loss key to its sums only
# for an advanced iteration (training.py L2610-2612) and prints a key only once it is in them (L2876-2882), so such
# a line has no `lm loss` before the first advanced iteration and `lm loss: 0.000000E+00` (an empty mean) after it
SKIPPED = re.compile(rb"number of skipped iterations:\s*(\d{1,18})")


def print_interval(iterations: Sequence[int]) -> int:
    """The interval a log printed at: the most common gap between the iterations (a tie: the later gap, since
    MCore adds a line after the first iteration, training.py L2816 `or is_first_iteration`); 1 for one line."""
    its = sorted(set(iterations))
    count: dict[int, int] = {}
    last: dict[int, int] = {}
    for k, (a, b) in enumerate(zip(its, its[1:])):
        count[b - a], last[b - a] = count.get(b - a, 0) + 1, k
    return max(count, key=lambda g: (count[g], last[g])) if count else 1


def whole_lines_skipped(rows: Sequence[tuple[int, float]], start: int = 0) -> set[int]:
    """The iterations whose line says every iteration it covers was skipped (SKIPPED): no loss in its mean. `rows`:
    (iteration, `number of skipped iterations`, NaN where not printed) of the iteration lines in order; a line covers
    the iterations since the line before (the first: since `start`)."""
    out, before = set(), start
    for it, skipped in rows:
        if skipped == skipped and skipped >= max(1, it - before):
            out.add(it)
        before = it
    return out


def loss_broken_from(rows: Sequence[tuple[int, float]], skipped: Collection[int] = ()) -> int | None:
    """The first iteration from which a log's lm loss is NaN/Inf, from its iteration lines in order as (iteration,
    loss; NaN where the line has no `lm loss` key); None when it stayed finite.

    Bridge and MCore print the key only when the interval's mean is >= 0.0 (docs/megatron-facts.md §5.1), so a NaN
    loss drops it; but a log may print its loss every N iterations only. A missing key is a NaN only where the
    log's own pattern expects one: on an iteration at the log's print interval (the most common gap between the
    iterations it printed a loss for) in phase with its last printed loss, or on any line of a log that prints
    every iteration. Lines before the first printed loss are not judged, nor lines whose every iteration was skipped
    (`skipped`: an fp16 loss-scale skip leaves no loss to print, SKIPPED). An explicit inf/-inf counts at once."""
    finite = [i for i, x in rows if x == x and x not in (float("inf"), float("-inf"))]
    inf = [i for i, x in rows if x in (float("inf"), float("-inf"))]
    if not finite:
        return min(inf) if inf else None
    every = print_interval(finite)
    printed = set(finite)
    missing = [i for i, x in rows if x != x and i > finite[0] and i not in printed and i not in skipped
               and (i - finite[-1]) % every == 0]
    bad = [*missing[:1], *inf]
    return min(bad) if bad else None


# Bridge print_rank_0 (docs/megatron-facts.md §5.2): "Step Time : {sec:.2f}s GPU utilization: {tflops:.1f}MODEL_TFLOP/s/GPU"
STEP_NEEDLE = b"Step Time :"
STEP = re.compile(rb"Step Time :\s*([\d.]+)s GPU utilization:\s*([\d.]+)(?:MODEL_)?TFLOP/s/GPU")
# Memory report (docs/megatron-facts.md §5.3): Bridge GB (1e9 bytes) and MCore/MLM MB (MiB: MCore divides by 1024*1024)
MEM_NEEDLE = b") memory ("
MEM_HEAD = re.compile(rb"\(after (\d{1,18}) iterations\) memory \((GB|MB)\)")
# The fields read, in the order of a parsed memory record (graphsweep/parse/filescan.py FileScan.memory):
# current allocated, running peak allocated, running peak reserved, current reserved. Peaks run from process start
# until torch.cuda.reset_peak_memory_stats() (the PEAKS_RESET marker says when graphsweep called it).
MEM_FIELDS = ("alloc", "max_alloc", "max_reserved", "reserved")
MEM_GB = {  # Bridge MEMORY_KEYS names (docs/megatron-facts.md §5.3)
    "alloc": re.compile(rb"mem-allocated-gigabytes:\s*" + _F),
    "max_alloc": re.compile(rb"mem-max-allocated-gigabytes:\s*" + _F),
    "max_reserved": re.compile(rb"mem-max-reserved-gigabytes:\s*" + _F),
    "reserved": re.compile(rb"mem-reserved-gigabytes:\s*" + _F),  # reserved_bytes.all.current
}
MEM_MB = {  # MLM megatron/training/utils.py report_memory, torch.cuda.memory_*() / 1024**2 (docs/megatron-facts.md §5.3)
    "alloc": re.compile(rb"\| allocated:\s*" + _F),
    "max_alloc": re.compile(rb"\| max allocated:\s*" + _F),
    "max_reserved": re.compile(rb"\| max reserved:\s*" + _F),
    "reserved": re.compile(rb"\| reserved:\s*" + _F),  # torch.cuda.memory_reserved()
}
MIB_TO_GB = 1024 * 1024 / 1e9
# CUDA-graph lifecycle (docs/megatron-facts.md §5.5) and the builtin workload (graphsweep/entry/builtin_gpt.py)
GRAPHABLE = re.compile(rb"Rank (\d{1,18}): (\d{1,18}) graphable layers\.")  # TECudaGraphHelper INFO
TE_CAPTURE_START_B = TE_CAPTURE_START.encode()  # TECudaGraphHelper, rank 0
TE_CAPTURE_TIME_RE = re.compile(rb"Time spent in CUDA Graphs capture on rank (\d{1,18}):\s*" + _F + rb"s")
NO_GRAPHABLE = b"No graphable layers found. Skipping CUDA graph capture."  # WARNING (may be filtered)
FULL_CAPTURE_START_B = FULL_CAPTURE_START.encode()  # megatron.core.full_cuda_graph, every rank
FULL_CAPTURE_DONE_B = FULL_CAPTURE_DONE.encode()
OPT_CAPTURE_START_B, OPT_CAPTURE_DONE_B = OPT_CAPTURE_START.encode(), OPT_CAPTURE_DONE.encode()
FULL_CAPTURE_S = re.compile(rb"CUDA graph capture done for training!!!\s*\(([\d.]+)s\)")  # benchmarks/data/h200-jobs/probe.py
LOCAL_CREATING = re.compile(rb"Creating (\d{1,18}) CUDA graphs")  # CudaGraphManager (local impl)
LOCAL_BUILT = re.compile(rb"> built (\d{1,18}) cuda graph\(s\) in ([\d.]+) sec")
# Start / end of the training loop (docs/megatron-facts.md §5.5, §5.6)
TRAIN_START = re.compile(rb"Starting training loop at iteration (\d{1,18})")  # Bridge train.py
TRAIN_START_MLM = b"[before the start of training step]"  # MCore barrier_and_log (MLM)
SEED_NEEDLE = b"> setting random seeds to "
SEED_LINE = re.compile(rb"> setting random seeds to (\d{1,18}) \.\.\.")
# Bridge 0.6.2 training/config.py L1730-1732 (the configuration summary at start-up): "\n[rng]:" then the section's
# fields sorted, "  seed: 1234" among them: the seed of a log whose "> setting random seeds" line is missing
RNG_SECTION = b"[rng]:"
RNG_SEED = re.compile(rb"(?:^|\]:)\s+seed: (\d{1,18})\s*$")  # after an optional `[default0]:` rank prefix
RNG_SECTION_LINES = 12  # the seed is one of the section's few fields
# The whole configuration summary (graphsweep/parse/work.py reads it: what a run trained): Bridge 0.6.2
# training/config.py L1670-1732 ConfigContainer.log_non_default_values, printed once by rank 0 (setup.py L743) before
# training: "=" * 70, the title, "=" * 70; per Megatron Core config (optimizer, ddp, model) "[name] Non-default values
# (vs Mcore Class):" and each field whose value differs from Megatron Core's default as "  field: repr  (Mcore
# default: repr)" (L1716-1718: a field left out holds that default); "-" * 70, "Other Configuration Values:", "-" * 70;
# per other config (train, validation, scheduler, dataset, checkpoint, logger, tokenizer, rng) "[name]:" and each
# field that is not None and not callable as "  field: repr" (L1727-1730, _get_key_config_values L1805: a field left
# out is None); then "=" * 70.
CONFIG_SUMMARY = b"Configuration Summary (Non-Default Values vs Megatron Core)"
CONFIG_OTHER = b"Other Configuration Values:"
CONFIG_MCORE_SECTION = re.compile(rb"\[(\w+)\] Non-default values \(vs Mcore \w+\):")
CONFIG_SECTION = re.compile(rb"\[(\w+)\]:\s*$")
CONFIG_FIELD = re.compile(rb"^  ([A-Za-z_]\w*): (.*?)(?:  \(Mcore default: (.*)\))?\s*$")
CONFIG_RULE = b"=" * 70
# Megatron-LM megatron/training/arguments.py _print_args("arguments", args), rank 0 at start-up: every argument as
# "  name ...... str(value)" (dots to column 48), sorted, between these two lines
MLM_ARGS_START = b"------------------------ arguments ------------------------"
MLM_ARGS_END = b"-------------------- end of arguments ---------------------"
MLM_ARG = re.compile(rb"^  ([A-Za-z_]\w*) \.+ (.*?)\s*$")
# Bridge train_utils.py L1204 / MLM training.py training_log: `global batch size: {:5d} |` on every iteration line
GLOBAL_BATCH = re.compile(rb"global batch size:\s*(\d+)")
END_MARKERS = (AFTER_TRAINING.split(" datetime")[0].encode(), b"exiting program at iteration")  # normal end (docs/megatron-facts.md §5.6, §6.2)
END_DATA = (b"StopIteration", b"AssertionError: no samples left to consume:")  # data exhausted: Bridge completes
EXIT_MINUTES = re.compile(rb"exiting program after (\d{1,18}) minutes")  # --exit-duration-in-mins: graceful walltime
SIGTERM_EXIT = b"exiting program after receiving SIGTERM."
STRAGGLER_EXIT = b"Exiting program due to straggler detection."
SETUP_DONE = (b"done with setup ...", b"time to initialize megatron")
# Generic Python exception line, for crashes no signature explains
EXC_LINE = re.compile(rb"(?:^|[\s:\]])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt)):\s?(.*)")
KEYERROR = re.compile(rb"KeyError: '([^']*)'")
SRUN_EXIT = re.compile(rb"srun: error: (\S+): tasks? ([\d,-]+): Exited with exit code (\d{1,18})")
# How a process that died says so (graphsweep/parse/crash.py reads them; sources torch 2.11, CPython 3.12, Bridge 0.6.2)
# Bridge training/pretrain.py L202-207 logger.exception, before the traceback: the exception that ended pretrain()
BRIDGE_FAILED = re.compile(rb"Pretrain failed on rank=\S+ with \w+: ")
# torch distributed/elastic/multiprocessing/api.py L987 ("failed (exitcode: %s) local_rank: %s (pid: %s) of binary:
# %s") and L836 (the same, "of fn: %s"): the launcher saw a worker exit non-zero (negative: killed by that signal)
LAUNCHER_FAILED = re.compile(rb"failed \(exitcode: (-?\d{1,18})\) local_rank: \d+ \(pid: \d+\) of (?:binary|fn): ")
# torch elastic/multiprocessing/errors/__init__.py L142-143 (ChildFailedError block: a worker killed by a signal);
# CPython Lib/subprocess.py CalledProcessError.__str__ "died with <Signals.SIGSEGV: 11>." (a wrapper's view)
WORKER_SIGNAL = re.compile(rb"Signal (\d{1,18}) \((SIG[A-Z0-9]+)\) received by PID \d+|died with <Signals\.(SIG[A-Z0-9]+): \d+>")
# The launcher itself was signalled: torch elastic/agent/server/api.py L739 (logger.warning "Received %s death
# signal, shutting down workers") and elastic/multiprocessing/api.py L86 SignalException; %s is `15` on Python
# >= 3.11 (IntEnum str), `Signals.SIGTERM` before
LAUNCHER_SIGNAL = re.compile(rb"Received (?:Signals\.)?(\w+) death signal, shutting down workers|"
                             rb"SignalException: Process \d+ got signal: (?:Signals\.)?(\w+)")
# Exceptions that only report a child's failure (torchrun's ChildFailedError, a wrapper's CalledProcessError, the
# agent's SignalException): never the cause of a crash
LAUNCHER_EXCEPTIONS = (b"ChildFailedError", b"CalledProcessError", b"SignalException")
# A process that died without a Python exception: CPython Python/pylifecycle.c fatal_error ("Fatal Python error: "),
# also faulthandler on SIGSEGV/SIGABRT/SIGBUS/SIGILL/SIGFPE; libstdc++ vterminate.cc (std::terminate)
FATAL = (b"Fatal Python error: ", b"terminate called after throwing an instance of ",
         b"terminate called without an active exception", b"terminate called recursively")
# c10's LOG(FATAL) line (c10/util/Logging.cpp MessageLogger, no glog: `[F<mmdd> <hh:mm:ss.ns> <pid?> <file>:<line>]`,
# older `[F <file>:<line>]`), e.g. ProcessGroupNCCL's heartbeat monitor before it aborts the process
C10_FATAL = re.compile(rb"\[F(?:\d{4} [\d:.]+(?: \d+)?)? ?[\w.]+\.(?:cpp|cc|h|hpp):\d+\]")
# A CUDA error as torch 2.11 raises it (c10/cuda/CUDAException.cpp c10_cuda_check_implementation, CUDAMiscFunctions.cpp
# get_cuda_error_help / get_cuda_async_error_suffix): `CUDA error: <cudaGetErrorString>`, then on the next line
# ``Search for `<cudaGetErrorName>' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for
# more information.``, then the boilerplate lines below. The enum names the cause; the boilerplate never does.
CUDA_ERROR = b"CUDA error: "
# NCCL's warning lines (src/debug.cc ncclDebugLog: `host:pid:tid [dev] file.cc:line NCCL WARN ...`, with NCCL_DEBUG=WARN
# or INFO): a failure NCCL may recover from (nvls.cc nvlsRegisterBuffer: a `Cuda failure 1 'invalid argument'` on
# cuMulticastBindAddr, then `INFO ... failed to NVLS register sendbuff ...` and the unregistered path)
NCCL_WARN = "NCCL WARN "
CUDA_ERROR_HELP = b"Search for `"
CUDA_ERROR_NAME = re.compile(rb"\b(cudaError[A-Z][A-Za-z0-9]*)\b")  # on the help line, or any line naming an enum
# Lines that accompany an error and never name its cause: torch's CUDA help suffix (get_cuda_async_error_suffix,
# c10_retrieve_device_side_assertion_info) and a traceback's first line
BOILERPLATE = (
    b"CUDA kernel errors might be asynchronously reported at some other API call",
    b"For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    b"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    b"For more detailed error information, run with CUDA_LOG_FILE=stderr",
    b"Device-side assertions were explicitly omitted for this error check",
    b"Traceback (most recent call last):",
)


def is_boilerplate(text: str | bytes) -> bool:
    """A line that accompanies an error without naming its cause (BOILERPLATE)."""
    raw = text.encode("utf-8", "replace") if isinstance(text, str) else text
    return any(b in raw for b in BOILERPLATE)
# Python tracebacks: the frames before an error say where it came from (the cause behind a generic CUDA error)
TRACEBACK_START = b"Traceback (most recent call last):"
FRAME_NEEDLE = b'File "'
TRACEBACK_FRAME = re.compile(rb'File "([^"]+)", line (\d{1,18}), in (\S+)')
OOM_REQUEST = re.compile(r"Tried to allocate ([\d.]+ ?[KMGT]?i?B)")  # PyTorch's CUDA OOM, on a proving line's text

# graphsweep's own markers
PROVENANCE_B = PROVENANCE.encode()
DEVICE_B = DEVICE.encode()
RE_CAPTURE_SECONDS = re.compile(re.escape(CAPTURE_SECONDS.encode()) + rb"\s*" + _F)
RE_CAPTURE_ITERATION_EXCESS = re.compile(re.escape(CAPTURE_ITERATION_EXCESS.encode()) + rb"\s*" + _F)
ENTRY_GRAPH_API_B = ENTRY_GRAPH_API.encode()
RE_GRAPHS_DETECTED = re.compile(re.escape(GRAPHS_DETECTED.encode()) + rb"(\d{1,18}) at iteration (\d{1,18})")
RE_NO_GRAPH_SEEN = re.compile(re.escape(NO_GRAPH_SEEN.encode()) + rb"(\d{1,18}) iterations")
RE_REPLAY = re.compile(re.escape(REPLAY.encode()) + rb"(\d{1,18})")
RE_REPLAYS = re.compile(re.escape(REPLAYS.encode()) + rb"(\d{1,18})")
RE_PEAKS_RESET = re.compile(re.escape(PEAKS_RESET.encode()) + rb"(\d{1,18})")
GPU_BUSY_B = GPU_BUSY.encode()
RE_GPU_BUSY = re.compile(re.escape(GPU_BUSY_B) + rb"rank (\d{1,18}) iterations (\d{1,18})-(\d{1,18}): ([\d.]+) ms per iteration")
RE_GPU_BUSY_UNMEASURED = re.compile(re.escape(GPU_BUSY_B) + rb"rank (\d{1,18}) not measured: (.*)")
HOST_TIME_B = HOST_TIME.encode()
RE_HOST_TIME = re.compile(re.escape(HOST_TIME_B)
                          + rb"rank (\d{1,18}) iterations (\d{1,18})-(\d{1,18}): ([\d.]+) ms per iteration: (.+)")
# a region's name starts a word (the look-behind): from inside a word the match fails at once, so a 100,000-character
# word costs one scan, not one per character (`(\w+) ` alone was quadratic: 73-89 s for one such line, issue 38)
RE_HOST_REGION = re.compile(rb"(?<![\w.])([A-Za-z_]\w*) ([\d.]+)(?: \(wait ([\d.]+), ([\d.]+) events\))?")
RE_HOST_TIME_UNMEASURED = re.compile(re.escape(HOST_TIME_B) + rb"rank (\d{1,18}) not measured: (.*)")
