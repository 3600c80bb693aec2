"""Scan one log file: every line that matters, into compact per-file records (graphsweep/parse/run.py merges them).

Files are read as bytes, line by line, so non-UTF-8 bytes, srun labels (`mx_v1_perf/0 `), `[rankN]: ` /
`[default0]:` prefixes and lines of several ranks glued together do not matter: every pattern (the log grammar,
graphsweep/logformat.py) is searched anywhere in a line, never anchored.

Speed: a line is looked at only when a cheap literal prefilter says it may matter (iteration line, memory line,
`Step Time`, a traceback frame or one of the signature anchors). With pyarrow (a dependency) the prefilter runs
vectorised over 16 MiB blocks (RE2 alternation), so Python touches only the lines that matter. The pure-Python
line loop is the fallback (huge lines, odd files) and the reference behaviour.
"""

from __future__ import annotations

import io
import math
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphsweep import logformat as lf
from graphsweep.parse import crash, cuda_errors, signatures as sg
from graphsweep.parse.busy import host_time_lines
from graphsweep.parse.files import binary_reason, blocks
from graphsweep.parse.memory import group_float, merge as merge_readings, read_line as read_memory_line
from graphsweep.parse.records import Hit

_BLOCK = 1 << 24  # bytes per vectorised block

_MAX_TEXT = 400  # characters of a proving line kept in the summary

_MARKER_NEEDLES: tuple[bytes, ...] = (
    lf.MEM_NEEDLE, lf.STEP_NEEDLE, b"Starting training loop", lf.TRAIN_START_MLM, b"after training is done",
    b"graphable layers", b"CUDA Graphs capture", b"CUDA graph capture done", b"Capture CUDA graph", b"cuda graph(s) in",
    b"CUDA graphs", b"[graphsweep]", b"done with setup", b"time to initialize megatron", b"no samples left",
    lf.FRAME_NEEDLE, lf.SEED_NEEDLE, lf.RNG_SECTION, b"seed: ",
)

_PREFILTER_NEEDLES: tuple[bytes, ...] = (lf.ITER_NEEDLE,) + _MARKER_NEEDLES + sg.ERROR_ANCHORS


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
    elapsed_decimals: int | None = None  # fewest decimals an elapsed time was printed with: its print step
    tflops: array = field(default_factory=lambda: array("d"))
    loss: array = field(default_factory=lambda: array("d"))
    grad_norm: array = field(default_factory=lambda: array("d"))
    train_iters: int | None = None
    iter_lines_unparsed: int = 0
    lm_loss_seen: bool = False
    step_tflops: array = field(default_factory=lambda: array("d"))  # Step Time lines in file order
    # memory: iteration -> values of lf.MEM_FIELDS [alloc, max_alloc, max_reserved, reserved] (max over ranks)
    memory: dict[int, list[float]] = field(default_factory=dict)
    peaks_reset: int | None = None  # `[graphsweep] memory peaks reset after iteration i`: later mem-max-* start there
    gpu_busy_ms: float | None = None  # `[graphsweep] gpu busy:` ms per iteration, max over the ranks of this file
    gpu_busy_note: str | None = None  # why the busy time was not measured, as the entry said
    # `[graphsweep] host time:` per rank: (ms per iteration, {region: (ms, wait, events)}), its first line (busy.py)
    host_time: dict[int, tuple[float, dict[str, tuple]]] = field(default_factory=dict)
    host_time_note: str | None = None  # why the host time was not measured, as the entry said
    # lifecycle
    training_started: bool = False
    start_iteration: int = 0
    setup_done: bool = False
    seed: int | None = None  # from Megatron's "> setting random seeds to N ..."
    config_seed: int | None = None  # from Bridge's configuration summary ([rng] seed), when the line above is missing
    rng_section_line: int = -(10**9)
    capture_state: str = "none"
    capture_iteration: int | None = None
    capture_marker: str | None = None
    capture_s: float | None = None  # the capture's own time as Megatron prints it (TE, full iteration, local)
    capture_seconds_marker: float | None = None  # `[graphsweep] capture seconds`: its meaning depends on the writer
    capture_excess_s: float | None = None  # `[graphsweep] capture iteration excess seconds` (Megatron entry)
    megatron_entry: bool = False  # `[graphsweep] graph api:`: graphsweep's Megatron entry wrote this log
    graphable_layers: int | None = None
    no_graphable: tuple[int, str] | None = None
    # what was captured (graphsweep/parse/captured.py counts it): the line that says how many, per kind
    graphable_line: tuple[int, str] | None = None  # MCore's `Rank r: N graphable layers.` with the largest N
    te_captured: bool = False  # `Time spent in CUDA Graphs capture`: the TE helper finished its capture
    full_captured: bool = False  # `CUDA graph capture done for training!!!`
    opt_captured: bool = False  # `Optimizer CUDA graph capture done!!!`
    local_built: tuple[int, int, str] | None = None  # local impl `> built N cuda graph(s)`: (N, line, text)
    graphs_detected: tuple[int, int, str] | None = None  # the entry's `cuda graphs detected: N`: (N, line, text)
    no_graph_seen: tuple[int, str] | None = None  # the entry's `no cuda graph detected after N iterations`
    replay_iteration: int | None = None
    replays: int | None = None
    end_marker: tuple[int, str] | None = None
    end_data: tuple[int, str] | None = None
    exit_minutes: tuple[int, str] | None = None
    sigterm: tuple[int, str] | None = None
    straggler: tuple[int, str] | None = None
    slurm_infra: tuple[str, int, str] | None = None
    device: str | None = None
    provenance: list[dict[str, Any]] = field(default_factory=list)  # `[graphsweep] provenance:` facts, file order
    # evidence
    hits: list[Hit] = field(default_factory=list)
    hit_ids: set[str] = field(default_factory=set)
    nan_iteration: tuple[int, int, str] | None = None  # (iteration, line, text) of the first NaN/Inf in an iteration line
    loss_missing: tuple[int, int, str] | None = None  # first iteration line without lm loss
    last_exception: tuple[int, str] | None = None
    keyerror: tuple[int, str] | None = None
    graph_config_traceback: bool = False
    srun_exit: tuple[int, str] | None = None
    cuda_error_line: tuple[int, list[Hit]] | None = None  # the last `CUDA error: ` line and the hits it made
    crash_lines: crash.CrashLines = field(default_factory=crash.CrashLines)  # how a process said it died
    # the frames of the traceback being printed (reset at each "Traceback (most recent call last):")
    frames: list[str] = field(default_factory=list)  # function names, outermost first
    frame_where: list[tuple[str, str, str]] = field(default_factory=list)  # (path, line, function)
    source_at: tuple[int, int] = (-1, 0)  # (line, column) of the last frame's source line

    # -- state helpers --------------------------------------------------------------------
    def cause_frame(self) -> str | None:
        """The innermost frame of the current traceback outside torch: where the failing call was made."""
        for path, line, func in reversed(self.frame_where):
            if "/torch/" not in path:
                return f"{path.rsplit('/', 1)[-1]}:{line} in {func}"
        return None

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


def _decimals(fs: FileScan, d: int | None) -> None:
    if d is not None and (fs.elapsed_decimals is None or d < fs.elapsed_decimals):
        fs.elapsed_decimals = d


def _max(old: float | None, new: float) -> float | None:
    """The larger, ignoring None and NaN (a value read from several ranks or lines)."""
    if math.isnan(new):
        return old
    return new if old is None else max(old, new)


def _handle_line(fs: FileScan, raw: bytes, lineno: int) -> None:
    """Everything a (prefiltered) line can say. Not exclusive: glued lines carry several records."""
    if lf.ITER_NEEDLE in raw:
        _iteration_segments(fs, raw, lineno)
    if lf.STEP_NEEDLE in raw:
        m = lf.STEP.search(raw)
        if m:
            fs.step_tflops.append(float(m.group(2)))
    if lf.MEM_NEEDLE in raw:
        _memory(fs, raw)
    if b"raph" in raw or b"[graphsweep]" in raw:
        _capture(fs, raw, lineno)
    if b"raining" in raw or b"etup" in raw or b"initialize megatron" in raw or b"xiting program" in raw \
            or b"StopIteration" in raw or b"no samples left" in raw:
        _lifecycle(fs, raw, lineno)
    if lf.FRAME_NEEDLE in raw:
        _frame(fs, raw, lineno)
    if lf.PROVENANCE_B in raw and (facts := lf.provenance_facts(raw)) is not None:
        fs.provenance.append(facts)
    if fs.seed is None and lf.SEED_NEEDLE in raw and (m := lf.SEED_LINE.search(raw)):
        fs.seed = int(m.group(1))
    if raw.rstrip().endswith(lf.RNG_SECTION):
        fs.rng_section_line = lineno
    elif fs.config_seed is None and 0 < lineno - fs.rng_section_line <= lf.RNG_SECTION_LINES \
            and (m := lf.RNG_SEED.search(raw)):
        fs.config_seed = int(m.group(1))
    for anchor in sg.ERROR_ANCHORS:
        if anchor in raw:
            _signatures(fs, raw, lineno)
            break


def _iteration_segments(fs: FileScan, raw: bytes, lineno: int) -> None:
    heads = list(lf.ITER_HEAD.finditer(raw))
    if not heads:
        fs.iter_lines_unparsed += 1
        return
    for k, h in enumerate(heads):
        seg = raw[h.end(): heads[k + 1].start() if k + 1 < len(heads) else len(raw)]
        el = lf.ELAPSED.search(seg)
        if el is None or not group_float(el) > 0:  # truncated mid-line, another print glued in, or a time of 0 ms or
            fs.iter_lines_unparsed += 1  # less (no step takes none: a damaged line): no timing, no row
            continue
        i = int(h.group(1))
        fs.train_iters = int(h.group(2))
        loss_m = lf.LM_LOSS.search(seg)
        gn = group_float(lf.GRAD_NORM.search(seg))
        loss = group_float(loss_m)
        fs.it.append(i)
        fs.it_line.append(lineno)
        fs.elapsed.append(group_float(el))
        _decimals(fs, lf.decimals(el.group(1)))
        fs.tflops.append(group_float(lf.THROUGHPUT.search(seg)))
        fs.loss.append(loss)
        fs.grad_norm.append(gn)
        if loss_m is not None:
            fs.lm_loss_seen = True
        elif fs.loss_missing is None and b"loss scale" in seg:  # complete line without the lm loss key
            fs.loss_missing = (i, lineno, _text(raw))
        if fs.nan_iteration is None and (math.isnan(gn) and lf.GRAD_NORM.search(seg) or math.isinf(gn)
                                         or math.isinf(loss) or (loss_m is not None and math.isnan(loss))):
            fs.nan_iteration = (i, lineno, _text(raw))


def _memory(fs: FileScan, raw: bytes) -> None:
    if (record := read_memory_line(raw)) is not None:
        it, vals = record
        fs.memory[it] = merge_readings(fs.memory.get(it), vals)


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

    if m := lf.GRAPHABLE.search(raw):
        n = int(m.group(2))
        if fs.graphable_layers is None or n > fs.graphable_layers:
            fs.graphable_line = (lineno, _text(raw))
        fs.graphable_layers = n if fs.graphable_layers is None else max(fs.graphable_layers, n)
    if lf.TE_CAPTURE_START_B in raw:
        start("Start CUDA Graphs capture...")
    if m := lf.TE_CAPTURE_TIME_RE.search(raw):
        done(_text(raw), float(m.group(2)))
        fs.te_captured = True
    if lf.NO_GRAPHABLE in raw and fs.no_graphable is None:
        fs.no_graphable = (lineno, _text(raw))
    if lf.FULL_CAPTURE_START_B in raw or lf.OPT_CAPTURE_START_B in raw:
        start("Capture CUDA graph for training!!!")
    if lf.FULL_CAPTURE_DONE_B in raw:
        m = lf.FULL_CAPTURE_S.search(raw)
        done("CUDA graph capture done for training!!!", float(m.group(1)) if m else None)
        fs.full_captured = True
    elif lf.OPT_CAPTURE_DONE_B in raw:  # the optimizer step's graph (optimizer.optimizer_cuda_graph)
        done(lf.OPT_CAPTURE_DONE, None)
        fs.opt_captured = True
    if lf.LOCAL_CREATING.search(raw):
        start(_text(raw))
    if m := lf.LOCAL_BUILT.search(raw):
        done(_text(raw), float(m.group(2)))
        if fs.local_built is None or int(m.group(1)) > fs.local_built[0]:
            fs.local_built = (int(m.group(1)), lineno, _text(raw))
    if b"[graphsweep]" in raw:
        if m := lf.RE_GRAPHS_DETECTED.search(raw):  # the Megatron entry saw the captured graphs from Python
            done(lf.GRAPHS_DETECTED.strip(), None)
            if fs.graphs_detected is None:
                fs.graphs_detected = (int(m.group(1)), lineno, _text(raw))
        if fs.no_graph_seen is None and lf.RE_NO_GRAPH_SEEN.search(raw):
            fs.no_graph_seen = (lineno, _text(raw))
        if lf.ENTRY_GRAPH_API_B in raw:
            fs.megatron_entry = True
        if m := lf.RE_CAPTURE_SECONDS.search(raw):  # the value is read in run.py, once the writer is known
            done("[graphsweep] capture seconds", None)
            fs.capture_seconds_marker = _max(fs.capture_seconds_marker, float(m.group(1)))
        if m := lf.RE_CAPTURE_ITERATION_EXCESS.search(raw):
            done(lf.CAPTURE_ITERATION_EXCESS.strip(), None)
            fs.capture_excess_s = _max(fs.capture_excess_s, float(m.group(1)))
        if m := lf.RE_PEAKS_RESET.search(raw):
            fs.peaks_reset = int(m.group(1)) if fs.peaks_reset is None else fs.peaks_reset
        if m := lf.RE_GPU_BUSY.search(raw):
            fs.gpu_busy_ms = _max(fs.gpu_busy_ms, float(m.group(4)))
        elif fs.gpu_busy_note is None and (m := lf.RE_GPU_BUSY_UNMEASURED.search(raw)):
            fs.gpu_busy_note = m.group(2).decode("utf-8", "replace").strip()
        if lf.HOST_TIME_B in raw:
            measured, note = host_time_lines(raw)
            for rank, step, regions in measured:
                fs.host_time.setdefault(rank, (step, regions))
            fs.host_time_note = fs.host_time_note or note
        if m := lf.RE_REPLAY.search(raw):
            fs.replay_iteration = int(m.group(1)) if fs.replay_iteration is None else fs.replay_iteration
        if m := lf.RE_REPLAYS.search(raw):
            fs.replays = int(m.group(1))
        if lf.DEVICE_B in raw:
            fs.device = _text(raw).split("[graphsweep] device: ", 1)[-1]


def _frame(fs: FileScan, raw: bytes, lineno: int) -> None:
    if m := lf.TRACEBACK_FRAME.search(raw):
        fs.source_at = (lineno + 1, raw.find(lf.FRAME_NEEDLE))  # the frame's source line, indented below it
        path, line, func = (g.decode("utf-8", "replace") for g in m.groups())
        fs.frames.append(func)
        fs.frame_where.append((path, line, func))


def _lifecycle(fs: FileScan, raw: bytes, lineno: int) -> None:
    if m := lf.TRAIN_START.search(raw):
        fs.training_started = True
        fs.start_iteration = int(m.group(1))
    elif lf.TRAIN_START_MLM in raw:
        fs.training_started = True
    if any(n in raw for n in lf.SETUP_DONE):
        fs.setup_done = True
    if fs.end_marker is None and any(n in raw for n in lf.END_MARKERS):
        fs.end_marker = (lineno, _text(raw))
    if fs.end_data is None and any(n in raw for n in lf.END_DATA):
        fs.end_data = (lineno, _text(raw))
    if fs.exit_minutes is None and lf.EXIT_MINUTES.search(raw):
        fs.exit_minutes = (lineno, _text(raw))
    if fs.sigterm is None and lf.SIGTERM_EXIT in raw:
        fs.sigterm = (lineno, _text(raw))
    if fs.straggler is None and lf.STRAGGLER_EXIT in raw:
        fs.straggler = (lineno, _text(raw))


def _hit(fs: FileScan, sig: sg.Signature, lineno: int, text: str) -> Hit:
    return Hit(sig, fs.path, lineno, text, fs.iteration_now(), fs.capture_state, fs.capture_iteration,
               fs.training_started or bool(fs.it), fs.end_marker is not None, fs.cause_frame())


def _signatures(fs: FileScan, raw: bytes, lineno: int) -> None:
    if lineno == fs.source_at[0] and raw[fs.source_at[1]:fs.source_at[1] + 2] == b"  ":
        return  # a traceback's source line (`raise ValueError("...")`): the exception line below proves it
    if lf.TRACEBACK_START in raw:  # a new traceback: earlier frames belong to another exception
        fs.frames.clear()
        fs.frame_where.clear()
    text: str | None = None
    new: list[Hit] = []
    for sig in sg.matching(raw):
        if sig.id in fs.hit_ids or (sig.unless and sig.unless in fs.hit_ids):
            continue
        if sig.frame is not None and sig.frame not in fs.frames:  # the cause must be on the traceback before it
            continue
        text = text or _text(raw)
        fs.hit_ids.add(sig.id)
        new.append(_hit(fs, sig, lineno, text))
    fs.hits.extend(new)
    if lf.CUDA_ERROR in raw:
        fs.cuda_error_line = (lineno, new)
    if b"cudaError" in raw and (m := lf.CUDA_ERROR_NAME.search(raw)):
        target = cuda_errors.attach(m.group(1).decode(), lineno, fs.cuda_error_line, fs.hits, fs.hit_ids)
        if target is not None:  # no error line before it: the line naming the enum proves it
            h = _hit(fs, target, lineno, _text(raw))
            h.cuda_enum = target.cuda_enum
            fs.hits.append(h)
    for needle, infra in sg.SLURM_INFRA:
        if fs.slurm_infra is None and needle in raw:
            fs.slurm_infra = (infra, lineno, _text(raw))
    crash.observe(fs.crash_lines, raw, lineno, len(fs.it), _text)
    if b"rror" in raw or b"Exception" in raw or b"Interrupt" in raw:
        if b"cuda_graph_config" in raw or b"CudaGraphModule" in raw:
            fs.graph_config_traceback = True
        if m := lf.KEYERROR.search(raw):
            if fs.graph_config_traceback and fs.keyerror is None:
                fs.keyerror = (lineno, _text(raw))
        if m := lf.SRUN_EXIT.search(raw):
            fs.srun_exit = (lineno, _text(raw))
        if (m := lf.EXC_LINE.search(raw)) and b"Warning" not in m.group(1):
            fs.last_exception = (lineno, _text(raw))
    elif b"cuda_graph_config" in raw:
        fs.graph_config_traceback = True


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
    if reason := binary_reason(head):
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


def _to_float(pc: Any, pa: Any, col: Any) -> tuple[Any, Any]:
    """(float64 values with NaN where absent, bool present) as numpy arrays."""
    present = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    out = pc.cast(pc.cast(col, pa.string()), pa.float64()).fill_null(math.nan)
    return np.asarray(out.to_numpy(zero_copy_only=False), dtype=np.float64), present


def _other_pattern() -> str:
    """RE2 alternation of the prefilter needles other than iteration/Step Time; a needle that contains another
    needle is redundant and dropped (a shorter alternation is a faster DFA)."""
    needles = [n for n in _PREFILTER_NEEDLES if n not in (lf.ITER_NEEDLE, lf.STEP_NEEDLE)]
    kept = [n for n in needles if not any(m != n and m in n for m in needles)]
    return "|".join(re.escape(n.decode()) for n in dict.fromkeys(kept))


_OTHER_PATTERN = _other_pattern()  # once per process, not once per log (it was 10% of parsing a builtin log)
_ITER_LITERAL = re.escape(lf.ITER_NEEDLE.decode())
_STEP_LITERAL = re.escape(lf.STEP_NEEDLE.decode())


def _scan_arrow(fs: FileScan, path: Path) -> None:
    """Vectorised: an Arrow binary array over each block (offsets at newlines); plain iteration and
    Step Time lines are extracted with RE2, every other prefiltered line goes to `_handle_line` in
    file order, after the iteration rows that precede it."""
    other_pattern = _OTHER_PATTERN
    lineno = 0
    nbytes = 0
    last = b""
    for chunk in blocks(path, _BLOCK):
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
    empty = {"idx": np.array([], dtype=np.int64)}
    if len(idx) == 0:
        return empty
    sub = arr.take(pa.array(idx))
    head = pc.extract_regex(sub, lf.RE2_ITER)
    it, _ = _to_float(pc, pa, pc.struct_field(head, [0]))
    total, _ = _to_float(pc, pa, pc.struct_field(head, [1]))
    f: dict[str, Any] = {}
    present: dict[str, Any] = {}
    text_of: dict[str, Any] = {}
    for k, pattern in lf.RE2_FIELDS.items():
        text_of[k] = pc.struct_field(pc.extract_regex(sub, pattern), [0])
        f[k], present[k] = _to_float(pc, pa, text_of[k])
    good = (f["elapsed"] > 0) & ~np.isnan(it)  # NaN, 0 and negative times are no timing (as in _iteration_segments)
    if good.any():  # the print step of the elapsed time, from the digits as printed
        col = pc.cast(text_of["elapsed"], pa.string()).filter(pa.array(good))
        dot = np.asarray(pc.find_substring(col, ".").to_numpy(zero_copy_only=False))
        length = np.asarray(pc.utf8_length(col).to_numpy(zero_copy_only=False))
        _decimals(fs, int(np.where(dot >= 0, length - dot - 1, 0).min()))
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


def scan_text(text: str | bytes, name: str = "<text>") -> FileScan:
    """Scan log text held in memory (the line loop)."""
    data = text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else text
    fs = FileScan(name)
    if reason := binary_reason(data[:65536]):
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
