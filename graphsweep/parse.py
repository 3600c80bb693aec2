"""Parse Megatron Bridge / Megatron-LM training logs: per-iteration rows and a classified run summary.

Formats (../shared/docs/megatron-reference.md §5, "ref" below) and the real logs in
../shared/fixtures drive every pattern here. Files are read as bytes, line by line, so non-UTF-8
bytes, srun labels (`mx_v1_perf/0 `), `[rankN]: ` / `[default0]:` prefixes and lines of several
ranks glued together do not matter: every pattern is searched anywhere in a line, never anchored.

Speed: a line is looked at only when a cheap literal prefilter says it may matter (iteration line,
memory line, `Step Time`, or one of outcome.ERROR_ANCHORS). With pyarrow (a dependency) the
prefilter runs vectorised over 16 MiB blocks (RE2 alternation), so Python touches only the lines
that matter; memory stays flat in file size apart from the rows themselves (8 bytes per value).
The pure-Python line loop is the fallback (huge lines, odd files) and the reference behaviour.

Several files per run (per-rank files, `log-allranks`, restarts `_0`, `_1`) are merged by iteration
number; for a repeated iteration the later file wins (a restart redoes the iterations after its
checkpoint). Pass files in chronological order.
"""

from __future__ import annotations

import functools
import io
import math
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd

from graphsweep import logformat as lf
from graphsweep import outcome as oc
from graphsweep.outcome import Hit, RunSummary, summary_to_dict  # noqa: F401  (public API)

ITERATION_COLUMNS = [
    "run_id",
    "iteration",
    "elapsed_ms",
    "tflops",
    "loss",
    "grad_norm",
    "mem_allocated_gb",
    "mem_max_allocated_gb",
    "mem_max_reserved_gb",
    "source_file",
    "line",  # line number of the iteration line in source_file (1-based)
]

_BLOCK = 1 << 24  # bytes per vectorised block
_MAX_TEXT = 400  # characters of a proving line kept in the summary

# ---------------------------------------------------------------------------------------------
# Line patterns (bytes). Sources: ref §5.1-5.6.
# ---------------------------------------------------------------------------------------------
# Bridge train_utils.py::training_log / MLM training.py (ref §5.1): "iteration {:8d}/{:8d} |"
ITER_NEEDLE = b"elapsed time per iteration"
_ITER_HEAD = re.compile(rb"iteration\s+(\d+)/\s*(\d+)\s*\|")
_F = rb"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf|NaN|Inf))"
_ELAPSED = re.compile(rb"elapsed time per iteration \(ms\):\s*" + _F)
_THROUGHPUT = re.compile(rb"throughput per GPU \(TFLOP/s/GPU\):\s*" + _F)
_LM_LOSS = re.compile(rb"\blm loss:\s*" + _F)  # printed only when >= 0, so NaN removes it (ref §5.1)
_GRAD_NORM = re.compile(rb"grad norm:\s*" + _F)
_ANY_LOSS_KEY = re.compile(rb"\| [\w ]*loss: ")
# Bridge print_rank_0 (ref §5.2): "Step Time : {sec:.2f}s GPU utilization: {tflops:.1f}MODEL_TFLOP/s/GPU"
STEP_NEEDLE = b"Step Time :"
_STEP = re.compile(rb"Step Time :\s*([\d.]+)s GPU utilization:\s*([\d.]+)(?:MODEL_)?TFLOP/s/GPU")
# Memory report (ref §5.3): Bridge GB (1e9 bytes) and MCore/MLM MB (MiB: MCore divides by 1024*1024)
MEM_NEEDLE = b") memory ("
_MEM_HEAD = re.compile(rb"\(after (\d+) iterations\) memory \((GB|MB)\)")
_MEM_GB = {
    "alloc": re.compile(rb"mem-allocated-gigabytes:\s*" + _F),
    "max_alloc": re.compile(rb"mem-max-allocated-gigabytes:\s*" + _F),
    "max_reserved": re.compile(rb"mem-max-reserved-gigabytes:\s*" + _F),
}
_MEM_MB = {
    "alloc": re.compile(rb"\| allocated:\s*" + _F),
    "max_alloc": re.compile(rb"\| max allocated:\s*" + _F),
    "max_reserved": re.compile(rb"\| max reserved:\s*" + _F),
}
_MIB_TO_GB = 1024 * 1024 / 1e9
# CUDA-graph lifecycle (ref §5.5) and the builtin workload (graphsweep/workload.py)
_GRAPHABLE = re.compile(rb"Rank (\d+): (\d+) graphable layers\.")  # TECudaGraphHelper INFO
_TE_CAPTURE_START = b"Start CUDA Graphs capture..."  # TECudaGraphHelper, rank 0
_TE_CAPTURE_TIME = re.compile(rb"Time spent in CUDA Graphs capture on rank (\d+):\s*" + _F + rb"s")
_NO_GRAPHABLE = b"No graphable layers found. Skipping CUDA graph capture."  # WARNING (may be filtered)
_FULL_CAPTURE_START = b"Capture CUDA graph for training!!!"  # megatron.core.full_cuda_graph, every rank
_FULL_CAPTURE_DONE = b"CUDA graph capture done for training!!!"
_FULL_CAPTURE_S = re.compile(rb"CUDA graph capture done for training!!!\s*\(([\d.]+)s\)")  # h200-probe/probe.py
_LOCAL_CREATING = re.compile(rb"Creating (\d+) CUDA graphs")  # CudaGraphManager (local impl)
_LOCAL_BUILT = re.compile(rb"> built (\d+) cuda graph\(s\) in ([\d.]+) sec")
_GS_CAPTURE_S = re.compile(rb"\[graphsweep\] capture seconds:\s*" + _F)
_GS_REPLAY = re.compile(rb"\[graphsweep\] cuda graph replay: iteration (\d+)")
_GS_REPLAYS = re.compile(rb"\[graphsweep\] cuda graph replays: (\d+)")
_GS_DEVICE = b"[graphsweep] device: "
# Start / end of the training loop (ref §5.5, §5.6)
_TRAIN_START = re.compile(rb"Starting training loop at iteration (\d+)")  # Bridge train.py
_TRAIN_START_MLM = b"[before the start of training step]"  # MCore barrier_and_log (MLM)
_END_MARKERS = (b"[after training is done]", b"exiting program at iteration")  # normal end (ref §5.6, §6.2)
_END_DATA = (b"StopIteration", b"AssertionError: no samples left to consume:")  # data exhausted: Bridge completes
_EXIT_MINUTES = re.compile(rb"exiting program after (\d+) minutes")  # --exit-duration-in-mins: graceful walltime
_SIGTERM_EXIT = b"exiting program after receiving SIGTERM."
_STRAGGLER_EXIT = b"Exiting program due to straggler detection."
_SETUP_DONE = (b"done with setup ...", b"time to initialize megatron")
# Generic Python exception line, for crashes no signature explains
_EXC_LINE = re.compile(rb"(?:^|[\s:\]])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt)):\s?(.*)")
_KEYERROR = re.compile(rb"KeyError: '([^']*)'")
_SRUN_EXIT = re.compile(rb"srun: error: (\S+): tasks? ([\d,-]+): Exited with exit code (\d+)")
_OOM_REQUEST = re.compile(rb"Tried to allocate ([\d.]+ ?[KMGT]?i?B)")

_MARKER_NEEDLES: tuple[bytes, ...] = (
    MEM_NEEDLE, STEP_NEEDLE, b"Starting training loop", _TRAIN_START_MLM, b"after training is done",
    b"graphable layers", b"CUDA Graphs capture", b"CUDA graph capture done", b"Capture CUDA graph", b"cuda graph(s) in",
    b"CUDA graphs", b"[graphsweep]", b"done with setup", b"time to initialize megatron", b"no samples left",
)
_PREFILTER_NEEDLES: tuple[bytes, ...] = (ITER_NEEDLE,) + _MARKER_NEEDLES + oc.ERROR_ANCHORS


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------
@dataclass
class ParsedRun:
    iterations: pd.DataFrame
    summary: RunSummary


@dataclass
class FileScan:
    """Everything one file says. Built line by line; holds no line text except proving lines."""

    path: str
    n_lines: int = 0
    n_bytes: int = 0
    problem: str | None = None  # unreadable / binary / empty
    ends_mid_line: bool = False
    last_line: str = ""
    # iteration rows (compact arrays)
    it: array = field(default_factory=lambda: array("q"))
    it_line: array = field(default_factory=lambda: array("q"))
    elapsed: array = field(default_factory=lambda: array("d"))
    tflops: array = field(default_factory=lambda: array("d"))
    loss: array = field(default_factory=lambda: array("d"))
    grad_norm: array = field(default_factory=lambda: array("d"))
    train_iters: int | None = None
    iter_lines_unparsed: int = 0
    lm_loss_seen: bool = False
    step_tflops: array = field(default_factory=lambda: array("d"))  # Step Time lines in file order
    step_count_at: int = 0
    # memory: iteration -> [alloc, max_alloc, max_reserved] (max over ranks)
    memory: dict[int, list[float]] = field(default_factory=dict)
    # lifecycle
    training_started: bool = False
    start_iteration: int = 0
    setup_done: bool = False
    capture_state: str = "none"
    capture_iteration: int | None = None
    capture_marker: str | None = None
    capture_s: float | None = None
    graphable_layers: int | None = None
    no_graphable: tuple[int, str] | None = None
    replay_iteration: int | None = None
    replays: int | None = None
    end_marker: tuple[int, str] | None = None
    end_data: tuple[int, str] | None = None
    exit_minutes: tuple[int, str] | None = None
    sigterm: tuple[int, str] | None = None
    straggler: tuple[int, str] | None = None
    slurm_infra: tuple[str, int, str] | None = None
    device: str | None = None
    # evidence
    hits: list[Hit] = field(default_factory=list)
    hit_ids: set[str] = field(default_factory=set)
    nan_iteration: tuple[int, int, str] | None = None  # (iteration, line, text) of the first NaN/Inf in an iteration line
    loss_missing: tuple[int, int, str] | None = None  # first iteration line without lm loss
    last_exception: tuple[int, str] | None = None
    keyerror: tuple[int, str] | None = None
    graph_config_traceback: bool = False
    srun_exit: tuple[int, str] | None = None

    # -- state helpers --------------------------------------------------------------------
    def iteration_now(self) -> int | None:
        """Last iteration known finished when the current line is printed (this file only)."""
        if self.it:
            return self.it[-1]
        if self.step_tflops:  # rank 0 prints Step Time every iteration but no iteration line
            return self.start_iteration + len(self.step_tflops)
        if self.memory:
            return max(self.memory)
        return None


def _text(raw: bytes) -> str:
    s = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    return s if len(s) <= _MAX_TEXT else s[:_MAX_TEXT] + "…"


def _num(m: re.Match | None) -> float:
    if m is None:
        return math.nan
    try:
        return float(m.group(1))
    except ValueError:
        return math.nan


# ---------------------------------------------------------------------------------------------
# One line
# ---------------------------------------------------------------------------------------------
def _handle_line(fs: FileScan, raw: bytes, lineno: int) -> None:
    """Everything a (prefiltered) line can say. Not exclusive: glued lines carry several records."""
    if ITER_NEEDLE in raw:
        _iteration_segments(fs, raw, lineno)
    if STEP_NEEDLE in raw:
        m = _STEP.search(raw)
        if m:
            fs.step_tflops.append(float(m.group(2)))
    if MEM_NEEDLE in raw:
        _memory(fs, raw)
    if b"raph" in raw or b"[graphsweep]" in raw:
        _capture(fs, raw, lineno)
    if b"raining" in raw or b"etup" in raw or b"initialize megatron" in raw or b"xiting program" in raw \
            or b"StopIteration" in raw or b"no samples left" in raw:
        _lifecycle(fs, raw, lineno)
    for anchor in oc.ERROR_ANCHORS:
        if anchor in raw:
            _signatures(fs, raw, lineno)
            break


def _iteration_segments(fs: FileScan, raw: bytes, lineno: int) -> None:
    heads = list(_ITER_HEAD.finditer(raw))
    if not heads:
        fs.iter_lines_unparsed += 1
        return
    for k, h in enumerate(heads):
        seg = raw[h.end(): heads[k + 1].start() if k + 1 < len(heads) else len(raw)]
        el = _ELAPSED.search(seg)
        if el is None:  # truncated mid-line, or a different print glued in: no timing, no row
            fs.iter_lines_unparsed += 1
            continue
        i = int(h.group(1))
        fs.train_iters = int(h.group(2))
        loss_m = _LM_LOSS.search(seg)
        gn = _num(_GRAD_NORM.search(seg))
        loss = _num(loss_m)
        fs.it.append(i)
        fs.it_line.append(lineno)
        fs.elapsed.append(_num(el))
        fs.tflops.append(_num(_THROUGHPUT.search(seg)))
        fs.loss.append(loss)
        fs.grad_norm.append(gn)
        if loss_m is not None:
            fs.lm_loss_seen = True
        elif fs.loss_missing is None and b"loss scale" in seg:  # complete line without the lm loss key
            fs.loss_missing = (i, lineno, _text(raw))
        if fs.nan_iteration is None and (math.isnan(gn) and _GRAD_NORM.search(seg) or math.isinf(gn)
                                         or math.isinf(loss) or (loss_m is not None and math.isnan(loss))):
            fs.nan_iteration = (i, lineno, _text(raw))


def _memory(fs: FileScan, raw: bytes) -> None:
    m = _MEM_HEAD.search(raw)
    if not m:
        return
    it = int(m.group(1))
    gb = m.group(2) == b"GB"
    pats = _MEM_GB if gb else _MEM_MB
    vals = [_num(pats[k].search(raw, m.end())) for k in ("alloc", "max_alloc", "max_reserved")]
    if not gb:
        vals = [v * _MIB_TO_GB for v in vals]
    old = fs.memory.get(it)
    fs.memory[it] = vals if old is None else [
        o if math.isnan(v) else (v if math.isnan(o) else max(o, v)) for o, v in zip(old, vals)
    ]


def _capture(fs: FileScan, raw: bytes, lineno: int) -> None:
    now = fs.iteration_now()
    nxt = (now if now is not None else fs.start_iteration) + 1

    def start(marker: str) -> None:  # capture began; only a "done" marker counts as capture evidence
        if fs.capture_state == "none":
            fs.capture_state = "capturing"
            fs.capture_iteration = nxt

    def done(marker: str, seconds: float | None) -> None:
        if fs.capture_state != "captured":
            if fs.capture_state == "none":
                fs.capture_iteration = nxt
            fs.capture_state = "captured"
            fs.capture_marker = marker
        elif fs.capture_marker is None:
            fs.capture_marker = marker
        if seconds is not None and not math.isnan(seconds):
            fs.capture_s = seconds if fs.capture_s is None else max(fs.capture_s, seconds)

    if m := _GRAPHABLE.search(raw):
        n = int(m.group(2))
        fs.graphable_layers = n if fs.graphable_layers is None else max(fs.graphable_layers, n)
    if _TE_CAPTURE_START in raw:
        start("Start CUDA Graphs capture...")
    if m := _TE_CAPTURE_TIME.search(raw):
        done(_text(raw), float(m.group(2)))
    if _NO_GRAPHABLE in raw and fs.no_graphable is None:
        fs.no_graphable = (lineno, _text(raw))
    if _FULL_CAPTURE_START in raw:
        start("Capture CUDA graph for training!!!")
    if _FULL_CAPTURE_DONE in raw:
        m = _FULL_CAPTURE_S.search(raw)
        done("CUDA graph capture done for training!!!", float(m.group(1)) if m else None)
    if _LOCAL_CREATING.search(raw):
        start(_text(raw))
    if m := _LOCAL_BUILT.search(raw):
        done(_text(raw), float(m.group(2)))
    if b"[graphsweep]" in raw:
        if lf.RE_GRAPHS_DETECTED.search(raw):  # the Megatron entry saw the captured graphs from Python
            done(lf.GRAPHS_DETECTED.strip(), None)
        if m := _GS_CAPTURE_S.search(raw):
            done("[graphsweep] capture seconds", float(m.group(1)))
        if m := _GS_REPLAY.search(raw):
            fs.replay_iteration = int(m.group(1)) if fs.replay_iteration is None else fs.replay_iteration
        if m := _GS_REPLAYS.search(raw):
            fs.replays = int(m.group(1))
        if _GS_DEVICE in raw:
            fs.device = _text(raw).split("[graphsweep] device: ", 1)[-1]


def _lifecycle(fs: FileScan, raw: bytes, lineno: int) -> None:
    if m := _TRAIN_START.search(raw):
        fs.training_started = True
        fs.start_iteration = int(m.group(1))
    elif _TRAIN_START_MLM in raw:
        fs.training_started = True
    if any(n in raw for n in _SETUP_DONE):
        fs.setup_done = True
    if fs.end_marker is None and any(n in raw for n in _END_MARKERS):
        fs.end_marker = (lineno, _text(raw))
    if fs.end_data is None and any(n in raw for n in _END_DATA):
        fs.end_data = (lineno, _text(raw))
    if fs.exit_minutes is None and _EXIT_MINUTES.search(raw):
        fs.exit_minutes = (lineno, _text(raw))
    if fs.sigterm is None and _SIGTERM_EXIT in raw:
        fs.sigterm = (lineno, _text(raw))
    if fs.straggler is None and _STRAGGLER_EXIT in raw:
        fs.straggler = (lineno, _text(raw))


def _bucket() -> dict[bytes, tuple[oc.Signature, ...]]:
    """Signatures per prefilter anchor; needles with no anchor of their own sit on exception lines ("rror")."""
    out: dict[bytes, list[oc.Signature]] = {a: [] for a in oc.ERROR_ANCHORS}
    for sig in oc.SIGNATURES:
        own = [a for a in oc.ERROR_ANCHORS if a in sig.needle or (sig.requires and a in sig.requires)]
        for a in own or [b"rror"]:
            out[a].append(sig)
        if own and b"rror" not in own:  # the same text can also arrive as an exception message
            out[b"rror"].append(sig)
    return {a: tuple(v) for a, v in out.items()}


_BUCKETS = _bucket()
_ORDER = {sig.id: k for k, sig in enumerate(oc.SIGNATURES)}


@functools.lru_cache(maxsize=512)
def _candidates_for(anchors: frozenset[bytes]) -> tuple[oc.Signature, ...]:
    seen: dict[str, oc.Signature] = {}
    for a in anchors:
        for sig in _BUCKETS[a]:
            seen[sig.id] = sig
    return tuple(sorted(seen.values(), key=lambda g: _ORDER[g.id]))  # catalogue order, as the plain loop


def _candidates(raw: bytes) -> tuple[oc.Signature, ...]:
    # a long log repeats the same few kinds of line (warnings): their candidate lists are computed once
    return _candidates_for(frozenset(a for a in _BUCKETS if a in raw))


def _match(raw: bytes) -> tuple[oc.Signature, ...]:
    return tuple(sig for sig in _candidates(raw) if sig.needle in raw and (sig.requires is None or sig.requires in raw))


_match_cached = functools.lru_cache(maxsize=4096)(_match)


def _matching(raw: bytes) -> tuple[oc.Signature, ...]:
    """The signatures whose text is on this line. Short lines are cached by content: a long log repeats the same
    warning lines thousands of times (the cache holds at most 4096 x 2 KB)."""
    return _match_cached(raw) if len(raw) <= 2048 else _match(raw)


def _signatures(fs: FileScan, raw: bytes, lineno: int) -> None:
    text: str | None = None
    for sig in _matching(raw):
        if sig.id in fs.hit_ids:
            continue
        # the generic argparse needle must not take a more specific line
        if sig.id == "argparse_error" and b"is_cuda_graph_impl_valid" in raw:
            continue
        if sig.id == "gs_blocked" and "gs_no_cuda" in fs.hit_ids:
            continue
        text = text or _text(raw)
        fs.hit_ids.add(sig.id)
        fs.hits.append(Hit(sig, fs.path, lineno, text, fs.iteration_now(), fs.capture_state, fs.capture_iteration,
                           fs.training_started or bool(fs.it), fs.end_marker is not None))
    for needle, infra in oc.SLURM_INFRA:
        if fs.slurm_infra is None and needle in raw:
            fs.slurm_infra = (infra, lineno, _text(raw))
    if b"rror" in raw or b"Exception" in raw or b"Interrupt" in raw:
        if b"cuda_graph_config" in raw or b"CudaGraphModule" in raw:
            fs.graph_config_traceback = True
        if m := _KEYERROR.search(raw):
            if fs.graph_config_traceback and fs.keyerror is None:
                fs.keyerror = (lineno, _text(raw))
        if m := _SRUN_EXIT.search(raw):
            fs.srun_exit = (lineno, _text(raw))
        if (m := _EXC_LINE.search(raw)) and b"Warning" not in m.group(1):
            fs.last_exception = (lineno, _text(raw))
    elif b"cuda_graph_config" in raw:
        fs.graph_config_traceback = True


# ---------------------------------------------------------------------------------------------
# One file
# ---------------------------------------------------------------------------------------------
def _binary_reason(head: bytes) -> str | None:
    if not head:
        return None
    nul = head.count(b"\x00")
    if nul > max(8, len(head) // 1000):
        return f"binary file ({nul} NUL bytes in the first {len(head)} bytes)"
    ctrl = sum(head.count(bytes([c])) for c in range(1, 32) if c not in (9, 10, 13, 27))
    if ctrl > len(head) // 10:
        return f"binary file ({ctrl} control bytes in the first {len(head)} bytes)"
    return None


def _needles_re() -> str:
    return "|".join(re.escape(n.decode()) for n in _PREFILTER_NEEDLES)


def scan_file(path: Path | str, *, fast: bool = True) -> FileScan:
    """Read one log file. Never raises for file content; unreadable files set `problem`."""
    path = Path(path)
    fs = FileScan(str(path))
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError as exc:
        fs.problem = f"cannot read {path}: {exc.strerror or exc}"
        return fs
    if not head:
        fs.problem = f"empty log {path}"
        return fs
    if reason := _binary_reason(head):
        fs.problem = f"{reason}: {path}"
        return fs
    if fast:
        try:
            _scan_arrow(fs, path)
            return fs
        except Exception:  # noqa: BLE001 - any Arrow limit (huge line, odd bytes): redo with the line loop
            fs = FileScan(str(path))
    _scan_python(fs, path)
    return fs


def _scan_python(fs: FileScan, path: Path) -> None:
    needles = _PREFILTER_NEEDLES
    lineno = 0
    last = b""
    nbytes = 0
    with open(path, "rb") as f:
        for raw in f:
            lineno += 1
            nbytes += len(raw)
            last = raw
            for n in needles:
                if n in raw:
                    _handle_line(fs, raw, lineno)
                    break
    fs.n_lines = lineno
    fs.n_bytes = nbytes
    _finish(fs, last)


def _finish(fs: FileScan, last: bytes) -> None:
    fs.ends_mid_line = bool(last) and not last.endswith(b"\n")
    fs.last_line = _text(last)


def _blocks(path: Path) -> Iterator[bytes]:
    """The file in blocks of whole lines (the last block may end mid-line)."""
    carry = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(_BLOCK)
            if not block:
                if carry:
                    yield carry
                return
            data = carry + block if carry else block
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                carry = data
                if len(carry) > 8 * _BLOCK:
                    raise ValueError("line longer than 128 MiB")
                continue
            if cut == len(data):
                carry = b""
                yield data
            else:
                carry = data[cut:]
                yield data[:cut]


# RE2 forms of the iteration-line patterns (Arrow compute); numbers only, so casts never fail.
_RE2_NUM = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf|NaN|Inf))"
_RE2_ITER = r"iteration\s+(?P<it>\d+)/\s*(?P<total>\d+)\s*\|"
_RE2_FIELDS = {
    "elapsed": r"elapsed time per iteration \(ms\):\s*(?P<v>" + _RE2_NUM[1:],
    "tflops": r"throughput per GPU \(TFLOP/s/GPU\):\s*(?P<v>" + _RE2_NUM[1:],
    "loss": r"lm loss:\s*(?P<v>" + _RE2_NUM[1:],
    "grad_norm": r"grad norm:\s*(?P<v>" + _RE2_NUM[1:],
}


def _to_float(pc: Any, pa: Any, col: Any) -> tuple[Any, Any]:
    """(float64 values with NaN where absent, bool present) as numpy arrays."""
    import numpy as np

    present = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    out = pc.cast(pc.cast(col, pa.string()), pa.float64()).fill_null(math.nan)
    return np.asarray(out.to_numpy(zero_copy_only=False), dtype=np.float64), present


def _other_pattern() -> str:
    """RE2 alternation of the prefilter needles other than iteration/Step Time; a needle that contains another
    needle is redundant and dropped (a shorter alternation is a faster DFA)."""
    needles = [n for n in _PREFILTER_NEEDLES if n not in (ITER_NEEDLE, STEP_NEEDLE)]
    kept = [n for n in needles if not any(m != n and m in n for m in needles)]
    return "|".join(re.escape(n.decode()) for n in dict.fromkeys(kept))


_ITER_LITERAL = re.escape(ITER_NEEDLE.decode())
_STEP_LITERAL = re.escape(STEP_NEEDLE.decode())


def _scan_arrow(fs: FileScan, path: Path) -> None:
    """Vectorised: an Arrow binary array over each block (offsets at newlines); plain iteration and
    Step Time lines are extracted with RE2, every other prefiltered line goes to `_handle_line` in
    file order, after the iteration rows that precede it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    other_pattern = _other_pattern()
    lineno = 0
    nbytes = 0
    last = b""
    for chunk in _blocks(path):
        buf = np.frombuffer(chunk, dtype=np.uint8)
        ends = np.flatnonzero(buf == 10) + 1  # each line keeps its newline
        if len(ends) == 0 or ends[-1] != len(chunk):
            ends = np.append(ends, len(chunk))
        offsets = np.empty(len(ends) + 1, dtype=np.int32)
        offsets[0] = 0
        offsets[1:] = ends
        n = len(ends)
        arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chunk)])
        other = pc.match_substring_regex(arr, other_pattern)
        not_other = pc.invert(other)
        # literals as RE2 patterns: faster than match_substring (16.8 MB block: 5.1 vs 10.9 ms, 3.7 vs 20.2 ms)
        iter_idx = pc.indices_nonzero(pc.and_(pc.match_substring_regex(arr, _ITER_LITERAL), not_other)).to_numpy()
        step_idx = pc.indices_nonzero(pc.and_(pc.match_substring_regex(arr, _STEP_LITERAL), not_other)).to_numpy()
        other_idx = pc.indices_nonzero(other).to_numpy()
        rows = _vector_rows(fs, pc, pa, arr, iter_idx, chunk, offsets, lineno)
        steps = np.array([], dtype=np.float64)
        if len(step_idx):
            sarr = arr.take(pa.array(step_idx))
            col = pc.struct_field(pc.extract_regex(sarr, r"GPU utilization:\s*(?P<v>[\d.]+)"), [0])
            steps = np.asarray(pc.cast(pc.cast(col, pa.string()), pa.float64()).fill_null(math.nan)
                               .to_numpy(zero_copy_only=False), dtype=np.float64)
        # interleave: rows/steps before each other line are appended first, so the handler sees the run's state
        ri = si = 0
        row_idx = rows["idx"]
        row_pos = np.searchsorted(row_idx, other_idx).tolist()
        step_pos = np.searchsorted(step_idx, other_idx).tolist()
        for i, rj, sj in zip(other_idx.tolist(), row_pos, step_pos):
            if rj > ri:
                _append_rows(fs, rows, ri, rj)
                ri = rj
            if sj > si:
                fs.step_tflops.extend(steps[si:sj].tolist())
                si = sj
            _handle_line(fs, chunk[offsets[i]:offsets[i + 1]], lineno + i + 1)
        if len(row_idx) > ri:
            _append_rows(fs, rows, ri, len(row_idx))
        if len(step_idx) > si:
            fs.step_tflops.extend(steps[si:].tolist())
        last = chunk[offsets[n - 1]:]
        lineno += n
        nbytes += len(chunk)
    fs.n_lines = lineno
    fs.n_bytes = nbytes
    _finish(fs, last)


def _vector_rows(fs: FileScan, pc: Any, pa: Any, arr: Any, idx: Any, chunk: bytes, offsets: Any,
                 lineno: int) -> dict[str, Any]:
    """Iteration rows of plain iteration lines (nothing else glued on), as numpy arrays."""
    import numpy as np

    empty = {"idx": np.array([], dtype=np.int64)}
    if len(idx) == 0:
        return empty
    sub = arr.take(pa.array(idx))
    head = pc.extract_regex(sub, _RE2_ITER)
    it, _ = _to_float(pc, pa, pc.struct_field(head, [0]))
    total, _ = _to_float(pc, pa, pc.struct_field(head, [1]))
    f: dict[str, Any] = {}
    present: dict[str, Any] = {}
    for k, pattern in _RE2_FIELDS.items():
        f[k], present[k] = _to_float(pc, pa, pc.struct_field(pc.extract_regex(sub, pattern), [0]))
    good = ~np.isnan(f["elapsed"]) & ~np.isnan(it)
    if not good.all():  # truncated mid-line or another print glued in: no timing, no row
        fs.iter_lines_unparsed += int((~good).sum())
        keep = np.flatnonzero(good)
        sub = sub.take(pa.array(keep))
        idx, it, total = idx[good], it[good], total[good]
        f = {k: v[good] for k, v in f.items()}
        present = {k: v[good] for k, v in present.items()}
        if len(idx) == 0:
            return empty
    fs.train_iters = int(total[-1])
    lm = present["loss"]
    if lm.any():
        fs.lm_loss_seen = True
    gn = f["grad_norm"]
    nan_rows = (present["grad_norm"] & (np.isnan(gn) | np.isinf(gn))) | np.isinf(f["loss"]) | (lm & np.isnan(f["loss"]))
    lines = idx.astype(np.int64) + lineno + 1

    def text(k: int) -> str:
        j = int(idx[k])
        return _text(chunk[offsets[j]:offsets[j + 1]])

    if fs.nan_iteration is None and nan_rows.any():
        k = int(np.flatnonzero(nan_rows)[0])
        fs.nan_iteration = (int(it[k]), int(lines[k]), text(k))
    if fs.loss_missing is None and not lm.all():
        missing = ~lm & np.asarray(pc.match_substring(sub, " loss scale").to_numpy(zero_copy_only=False), dtype=bool)
        if missing.any():
            k = int(np.flatnonzero(missing)[0])
            fs.loss_missing = (int(it[k]), int(lines[k]), text(k))
    return {"idx": idx.astype(np.int64), "it": it.astype(np.int64), "line": lines, "elapsed": f["elapsed"],
            "tflops": f["tflops"], "loss": f["loss"], "grad_norm": gn}


def _append_rows(fs: FileScan, rows: dict[str, Any], a: int, b: int) -> None:
    fs.it.frombytes(rows["it"][a:b].tobytes())
    fs.it_line.frombytes(rows["line"][a:b].tobytes())
    fs.elapsed.frombytes(rows["elapsed"][a:b].tobytes())
    fs.tflops.frombytes(rows["tflops"][a:b].tobytes())
    fs.loss.frombytes(rows["loss"][a:b].tobytes())
    fs.grad_norm.frombytes(rows["grad_norm"][a:b].tobytes())


# ---------------------------------------------------------------------------------------------
# A run: several files merged
# ---------------------------------------------------------------------------------------------
def _frame(scans: Sequence[FileScan], run_id: str) -> pd.DataFrame:
    import numpy as np

    parts = []
    pending_steps: list[array] = []  # Step Time values of files without iteration lines (rank 0 files)
    for order, fs in enumerate(scans):
        n = len(fs.it)
        if n == 0:
            if fs.step_tflops:
                pending_steps.append(fs.step_tflops)
            continue
        tflops = np.frombuffer(fs.tflops, dtype=np.float64).copy() if n else np.array([])
        if len(fs.step_tflops) and np.isnan(tflops).any():
            # the k-th Step Time line of a file belongs to its k-th iteration line (same process prints both)
            st = np.frombuffer(fs.step_tflops, dtype=np.float64)[:n]
            fill = np.isnan(tflops[: len(st)])
            tflops[: len(st)][fill] = st[fill]
        parts.append(pd.DataFrame({
            "iteration": np.frombuffer(fs.it, dtype=np.int64),
            "elapsed_ms": np.frombuffer(fs.elapsed, dtype=np.float64),
            "tflops": tflops,
            "loss": np.frombuffer(fs.loss, dtype=np.float64),
            "grad_norm": np.frombuffer(fs.grad_norm, dtype=np.float64),
            "source_file": fs.path,
            "line": np.frombuffer(fs.it_line, dtype=np.int64),
            "_order": order,
        }))
    if parts:
        df = pd.concat(parts, ignore_index=True)
        # a restart redoes iterations after its checkpoint: the later file (and later line) wins
        df = df.sort_values(["iteration", "_order", "line"], kind="stable").drop_duplicates("iteration", keep="last")
        df = df.reset_index(drop=True)
    else:
        df = pd.DataFrame({c: pd.Series(dtype=t) for c, t in (("iteration", "int64"), ("elapsed_ms", "float64"),
                           ("tflops", "float64"), ("loss", "float64"), ("grad_norm", "float64"),
                           ("source_file", "object"), ("line", "int64"))})
    if pending_steps and len(df) and df["tflops"].isna().any():
        st = np.frombuffer(pending_steps[0], dtype=np.float64)[: len(df)]
        col = df["tflops"].to_numpy(copy=True)
        fill = np.isnan(col[: len(st)])
        col[: len(st)][fill] = st[fill]
        df["tflops"] = col
    memory = _merge_memory(scans)
    mem = np.full((len(df), 3), np.nan)
    if memory and len(df):
        # iterations are unique and sorted here: a binary search, not a dict of every row (1.35 M rows: ~100 MB)
        its = df["iteration"].to_numpy()
        keys = np.fromiter(memory.keys(), dtype=np.int64, count=len(memory))
        vals = np.asarray(list(memory.values()), dtype=np.float64)
        k = np.minimum(np.searchsorted(its, keys), len(its) - 1)
        hit = its[k] == keys
        mem[k[hit]] = vals[hit]
    df["mem_allocated_gb"] = mem[:, 0]
    df["mem_max_allocated_gb"] = mem[:, 1]
    df["mem_max_reserved_gb"] = mem[:, 2]
    df["run_id"] = run_id
    df["iteration"] = df["iteration"].astype("int64")
    df["line"] = df["line"].astype("int64")
    df["source_file"] = df["source_file"].astype("string")
    df["run_id"] = df["run_id"].astype("string")
    return df[ITERATION_COLUMNS]


def _merge_memory(scans: Sequence[FileScan]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for fs in scans:
        for it, vals in fs.memory.items():
            old = out.get(it)
            out[it] = list(vals) if old is None else [
                o if v != v else (v if o != o else max(o, v)) for o, v in zip(old, vals)]
    return out


def _mark(fs: FileScan, t: tuple[int, str] | None) -> oc.Mark | None:
    return oc.Mark(fs.path, t[0], t[1]) if t else None


def _evidence(scans: Sequence[FileScan], df: pd.DataFrame) -> oc.Evidence:
    restarted = _superseded(scans)
    ev = oc.Evidence(
        files=[fs.path for fs in scans],
        problems=[fs.problem for fs in scans if fs.problem],
        hits=[h for k, fs in enumerate(scans) if k not in restarted for h in fs.hits],
        iterations=df["iteration"].tolist(),
        elapsed_ms=df["elapsed_ms"].tolist(),
        memory=_merge_memory(scans),
    )
    for k, by in restarted.items():
        fs = scans[k]
        what = f"{fs.hits[0].sig.id} at {fs.path}:{fs.hits[0].line}" if fs.hits else "no error line"
        ev.superseded.append(f"{fs.path} was restarted by {by} ({what}): its failure is not the run's outcome")
    for k, fs in enumerate(scans):
        if fs.problem:
            continue
        if k in restarted:  # an earlier attempt: its rows count (merged), its end state does not
            ev.recognised_lines = ev.recognised_lines or bool(fs.it)
            continue
        if fs.it or fs.memory or fs.hits or fs.training_started or fs.setup_done or fs.capture_state != "none" \
                or fs.end_marker or fs.step_tflops or fs.last_exception:
            ev.recognised_lines = True
        ev.train_iters = ev.train_iters if fs.train_iters is None else max(ev.train_iters or 0, fs.train_iters)
        ev.training_started |= fs.training_started
        ev.start_iteration = max(ev.start_iteration, fs.start_iteration) if fs.training_started else ev.start_iteration
        if fs.capture_marker and ev.capture_marker is None:
            ev.capture_marker, ev.capture_iteration = fs.capture_marker, fs.capture_iteration
        if fs.capture_s is not None:
            ev.capture_s = fs.capture_s if ev.capture_s is None else max(ev.capture_s, fs.capture_s)
        if fs.graphable_layers is not None:
            ev.graphable_layers = max(ev.graphable_layers or 0, fs.graphable_layers)
        ev.no_graphable = ev.no_graphable or _mark(fs, fs.no_graphable)
        if fs.replay_iteration is not None:
            ev.replay_iteration = fs.replay_iteration
        if fs.replays is not None:
            ev.replays = max(ev.replays or 0, fs.replays)
        ev.end_marker = ev.end_marker or _mark(fs, fs.end_marker)
        ev.end_data = ev.end_data or _mark(fs, fs.end_data)
        ev.exit_minutes = ev.exit_minutes or _mark(fs, fs.exit_minutes)
        ev.sigterm = ev.sigterm or _mark(fs, fs.sigterm)
        ev.straggler = ev.straggler or _mark(fs, fs.straggler)
        if fs.slurm_infra and ev.slurm_infra is None:
            ev.slurm_infra = (fs.slurm_infra[0], oc.Mark(fs.path, fs.slurm_infra[1], fs.slurm_infra[2]))
        if fs.nan_iteration and ev.nan_iteration is None:
            ev.nan_iteration = (fs.nan_iteration[0], oc.Mark(fs.path, fs.nan_iteration[1], fs.nan_iteration[2]))
        if fs.loss_missing and ev.loss_missing is None:
            ev.loss_missing = (fs.loss_missing[0], oc.Mark(fs.path, fs.loss_missing[1], fs.loss_missing[2]))
        ev.lm_loss_seen |= fs.lm_loss_seen
        ev.last_exception = _mark(fs, fs.last_exception) or ev.last_exception
        ev.keyerror = ev.keyerror or _mark(fs, fs.keyerror)
        ev.srun_exit = _mark(fs, fs.srun_exit) or ev.srun_exit
        ev.device = ev.device or fs.device
        ev.iter_lines_unparsed += fs.iter_lines_unparsed
    # the last file in order decides whether the log was cut
    live = [fs for fs in scans if not fs.problem]
    if live:
        tail = live[-1]
        ev.ends_mid_line = tail.ends_mid_line
        ev.last_line = oc.Mark(tail.path, tail.n_lines, tail.last_line)
    return ev


def _superseded(scans: Sequence[FileScan]) -> dict[int, str]:
    """Files that a later file restarted: Bridge prints `Starting training loop at iteration N` with N > 0
    on resume, or the later file's first iteration lies inside the earlier file's range (but is not 1:
    per-rank and all-ranks copies of one attempt start at 1 and run concurrently)."""
    out: dict[int, str] = {}
    for k, fs in enumerate(scans):
        for later in scans[k + 1:]:
            resumed = later.training_started and later.start_iteration > 0
            overlap = bool(later.it) and bool(fs.it) and 1 < later.it[0] <= max(fs.it)
            if (resumed and (fs.it or fs.hits)) or overlap:
                out[k] = later.path
                break
    return out


def _previous(run_info: Mapping | None) -> list[dict]:
    """Earlier attempts (run.json previous_attempts) with the proving line of their signature, when readable."""
    out = []
    for p in (run_info or {}).get("previous_attempts") or []:
        d = dict(p)
        sig, log = d.get("signature"), d.get("log")
        if sig and log and Path(log).is_file():
            fs = scan_file(log)
            h = next((h for h in fs.hits if h.sig.needle.decode() == sig), None)
            if h is not None:
                d.update(file=h.file, line=h.line, text=h.text)
        out.append(d)
    return out


def parse_run(paths: Sequence[Path | str], *, arm: str = "eager", warmup: int | None = None,
              run_info: Mapping | None = None, run_id: str = "", min_steady: int = 5) -> ParsedRun:
    """Parse every log file of one run (chronological order) and classify it. Never raises for content."""
    if arm not in ("eager", "graph"):
        raise ValueError(f"arm must be 'eager' or 'graph', got {arm!r}")
    scans = [scan_file(p) for p in paths]
    df = _frame(scans, run_id)
    ev = _evidence(scans, df)
    summary = oc.classify(ev, arm=arm, warmup=warmup, run_info=run_info, min_steady=min_steady,
                          previous=_previous(run_info))
    return ParsedRun(df, summary)


def scan_text(text: str | bytes, name: str = "<text>") -> FileScan:
    """Scan log text held in memory (the line loop)."""
    data = text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else text
    fs = FileScan(name)
    if reason := _binary_reason(data[:65536]):
        fs.problem = reason
        return fs
    lineno = 0
    last = b""
    for raw in io.BytesIO(data):
        lineno += 1
        last = raw
        for n in _PREFILTER_NEEDLES:
            if n in raw:
                _handle_line(fs, raw, lineno)
                break
    fs.n_lines, fs.n_bytes = lineno, len(data)
    _finish(fs, last)
    return fs


def find_transient(text_or_path: str | bytes | Path) -> str | None:
    """The reference §6.2 transient substring in a failed run's log, or None.

    None when something deterministic explains the failure (config rejected, CUDA OOM, capture
    error: retrying cannot help) or the job hit its walltime. For the submitter's one retry."""
    if isinstance(text_or_path, Path) or (isinstance(text_or_path, str) and "\n" not in text_or_path
                                          and len(text_or_path) < 4096 and Path(text_or_path).is_file()):
        fs = scan_file(text_or_path)
    else:
        fs = scan_text(text_or_path)
    h = oc._transient(fs.hits)
    return h.sig.needle.decode() if h else None
