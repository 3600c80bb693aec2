"""Everything one log line can say, onto its attempt's FileScan: the reference reader of the log grammar
(graphsweep/logformat.py). graphsweep/parse/scan.py hands it every line its prefilter lets through (templates.py reads
the plain iteration and Step Time lines of a long log a block at a time, to the same effect).

Not exclusive: ranks' lines glued into one physical line carry several records. Error lines (signatures, tracebacks,
how a process died) are graphsweep/parse/errorlines.py's.
"""

from __future__ import annotations

import math

from graphsweep import logformat as lf
from graphsweep.parse import errorlines
from graphsweep.parse.busy import host_time_lines
from graphsweep.parse.filescan import FileScan, larger, text
from graphsweep.parse.matching import ERROR_ANCHORS
from graphsweep.parse.memory import merge as merge_readings, read_line as read_memory_line
from graphsweep.parse.numbers import group_float, to_float

# The literals of the lines handle_line reads besides iteration lines and error lines (the prefilter's)
MARKER_NEEDLES: tuple[bytes, ...] = (
    lf.MEM_NEEDLE, lf.STEP_NEEDLE, b"Starting training loop", lf.TRAIN_START_MLM, b"after training is done",
    b"graphable layers", b"CUDA Graphs capture", b"CUDA graph capture done", b"Capture CUDA graph", b"cuda graph(s) in",
    b"CUDA graphs", b"[graphsweep]", b"done with setup", b"time to initialize megatron", b"no samples left",
    lf.FRAME_NEEDLE, lf.SEED_NEEDLE, lf.RNG_SECTION, b"seed: ",
)
# A line is read only when it holds one of these (scan.py)
NEEDLES: tuple[bytes, ...] = (lf.ITER_NEEDLE,) + MARKER_NEEDLES + ERROR_ANCHORS


def starts_attempt(fs: FileScan, raw: bytes) -> bool:
    """The line starts a new attempt in a file whose current attempt already trained: a requeued job appends its next
    attempt to the same file (submitit's `--open-mode=append`). Its training loop starts a second time (Bridge's
    `Starting training loop at iteration N`, train.py L337; MCore's `[before the start of training step]`), or its
    iterations start over (an iteration at or before the attempt's last one: only the last rank prints them)."""
    if lf.ITER_NEEDLE in raw and fs.it and (m := lf.ITER_HEAD.search(raw)) and int(m.group(1)) <= fs.it[-1]:
        return True
    return fs.training_started and (lf.TRAIN_START_MLM in raw or (b"Starting training loop" in raw
                                                                 and lf.TRAIN_START.search(raw) is not None))


def handle_line(fs: FileScan, raw: bytes, lineno: int, offset: int) -> None:
    """Everything a (prefiltered) line can say; `offset`: the line's byte offset in the file."""
    if lf.ITER_NEEDLE in raw:
        iteration_segments(fs, raw, lineno, offset)
    if lf.STEP_NEEDLE in raw:
        m = lf.STEP.search(raw)
        if m:
            fs.step_tflops.append(to_float(m.group(2)))
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
    for anchor in ERROR_ANCHORS:
        if anchor in raw:
            errorlines.error_line(fs, raw, lineno)
            break


def span_of(fs: FileScan, iteration: int) -> int:
    """How many iterations a line at `iteration` covers: those since the attempt's previous line (log_interval)."""
    before = fs.it[-1] if fs.it else fs.start_iteration
    return max(1, iteration - before)


def iteration_segments(fs: FileScan, raw: bytes, lineno: int, offset: int) -> None:
    """The iteration rows of a line (one per `iteration i/N |` head: ranks' lines can be glued into one)."""
    heads = list(lf.ITER_HEAD.finditer(raw))
    if not heads:
        fs.iter_lines_unparsed += 1
        return
    for k, h in enumerate(heads):
        seg = raw[h.end(): heads[k + 1].start() if k + 1 < len(heads) else len(raw)]
        el = lf.ELAPSED.search(seg)
        if el is None or not 0 < group_float(el) < math.inf:  # truncated mid-line, another print glued in, a time
            fs.iter_lines_unparsed += 1  # of 0 ms or less or none at all (a damaged line): no timing, no row
            continue
        i = int(h.group(1))
        fs.train_iters = int(h.group(2))
        loss_m = lf.LM_LOSS.search(seg)
        gn_m = lf.GRAD_NORM.search(seg)
        gn, loss, skipped = group_float(gn_m), group_float(loss_m), group_float(lf.SKIPPED.search(seg))
        all_skipped = skipped >= span_of(fs, i)  # no loss in the line's mean (lf.SKIPPED): not a NaN
        fs.it.append(i)
        fs.it_line.append(lineno)
        fs.it_offset.append(offset)
        fs.elapsed.append(group_float(el))
        fs.note_decimals(lf.decimals(el.group(1)))
        fs.tflops.append(group_float(lf.THROUGHPUT.search(seg)))
        fs.loss.append(loss)
        fs.grad_norm.append(gn)
        fs.skipped.append(skipped)
        if loss_m is not None:
            fs.lm_loss_seen = True
        elif fs.loss_missing is None and b"loss scale" in seg and not all_skipped:  # a whole line without the key
            fs.loss_missing = (i, lineno, text(raw))
        if fs.nan_iteration is None and (math.isnan(gn) and gn_m is not None or math.isinf(gn)
                                         or (not all_skipped and (math.isinf(loss)
                                                                  or (loss_m is not None and math.isnan(loss))))):
            fs.nan_iteration = (i, lineno, text(raw))


def _memory(fs: FileScan, raw: bytes) -> None:
    if (record := read_memory_line(raw)) is not None:
        it, vals = record
        fs.memory[it] = merge_readings(fs.memory.get(it), vals)


def _capture(fs: FileScan, raw: bytes, lineno: int) -> None:
    now = fs.iteration_now()
    nxt = (now if now is not None else fs.start_iteration) + 1

    def start() -> None:  # capture began; only a "done" marker counts as capture evidence
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
            fs.graphable_line = (lineno, text(raw))
        fs.graphable_layers = n if fs.graphable_layers is None else max(fs.graphable_layers, n)
    if lf.TE_CAPTURE_START_B in raw:
        start()
    if m := lf.TE_CAPTURE_TIME_RE.search(raw):
        done(text(raw), to_float(m.group(2)))
        fs.te_captured = True
    if lf.NO_GRAPHABLE in raw and fs.no_graphable is None:
        fs.no_graphable = (lineno, text(raw))
    if lf.FULL_CAPTURE_START_B in raw or lf.OPT_CAPTURE_START_B in raw:
        start()
    if lf.FULL_CAPTURE_DONE_B in raw:
        done(lf.FULL_CAPTURE_DONE, group_float(lf.FULL_CAPTURE_S.search(raw)))
        fs.full_captured = True
    elif lf.OPT_CAPTURE_DONE_B in raw:  # the optimizer step's graph (optimizer.optimizer_cuda_graph)
        done(lf.OPT_CAPTURE_DONE, None)
        fs.opt_captured = True
    if lf.LOCAL_CREATING.search(raw):
        start()
    if m := lf.LOCAL_BUILT.search(raw):
        done(text(raw), to_float(m.group(2)))
        if fs.local_built is None or int(m.group(1)) > fs.local_built[0]:
            fs.local_built = (int(m.group(1)), lineno, text(raw))
    if b"[graphsweep]" in raw:
        _markers(fs, raw, lineno, done)


def _markers(fs: FileScan, raw: bytes, lineno: int, done) -> None:  # noqa: ANN001 - _capture's `done`
    """graphsweep's own `[graphsweep] ...` lines (logformat's markers, written by the entry programs)."""
    if m := lf.RE_GRAPHS_DETECTED.search(raw):  # the Megatron entry saw the captured graphs from Python
        done(lf.GRAPHS_DETECTED.strip(), None)
        if fs.graphs_detected is None:
            fs.graphs_detected = (int(m.group(1)), lineno, text(raw))
    if fs.no_graph_seen is None and lf.RE_NO_GRAPH_SEEN.search(raw):
        fs.no_graph_seen = (lineno, text(raw))
    if lf.ENTRY_GRAPH_API_B in raw:
        fs.megatron_entry = True
    if m := lf.RE_CAPTURE_SECONDS.search(raw):  # the value is read in evidence.py, once the writer is known
        done("[graphsweep] capture seconds", None)
        fs.capture_seconds_marker = larger(fs.capture_seconds_marker, to_float(m.group(1)))
    if m := lf.RE_CAPTURE_ITERATION_EXCESS.search(raw):
        done(lf.CAPTURE_ITERATION_EXCESS.strip(), None)
        fs.capture_excess_s = larger(fs.capture_excess_s, to_float(m.group(1)))
    if m := lf.RE_PEAKS_RESET.search(raw):
        fs.peaks_reset = int(m.group(1)) if fs.peaks_reset is None else fs.peaks_reset
    if m := lf.RE_GPU_BUSY.search(raw):
        fs.gpu_busy_ms = larger(fs.gpu_busy_ms, to_float(m.group(4)))
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
        fs.device = text(raw).split("[graphsweep] device: ", 1)[-1]


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
        fs.end_marker = (lineno, text(raw))
    if fs.end_data is None and any(n in raw for n in lf.END_DATA):
        fs.end_data = (lineno, text(raw))
    if fs.exit_minutes is None and lf.EXIT_MINUTES.search(raw):
        fs.exit_minutes = (lineno, text(raw))
    if fs.sigterm is None and lf.SIGTERM_EXIT in raw:
        fs.sigterm = (lineno, text(raw))
    if fs.straggler is None and lf.STRAGGLER_EXIT in raw:
        fs.straggler = (lineno, text(raw))
