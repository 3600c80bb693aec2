"""An error line onto its attempt's FileScan: the catalogue signatures it proves (graphsweep/parse/matching.py), with
where the run was when it was printed; a CUDA error's `Search for` enum (cuda_errors.py); Slurm's job-end lines; how a
process said it died (crash.py); the last exception and the traceback frames before it.
"""

from __future__ import annotations

from graphsweep import logformat as lf
from graphsweep.parse import crash, cuda_errors
from graphsweep.parse.filescan import FileScan, text
from graphsweep.parse.matching import matching
from graphsweep.parse.records import Hit
from graphsweep.parse.signatures import SLURM_INFRA, Signature


def _hit(fs: FileScan, sig: Signature, lineno: int, line: str) -> Hit:
    return Hit(sig, fs.path, lineno, line, fs.iteration_now(), fs.capture_state, fs.capture_iteration,
               fs.training_started or bool(fs.it), fs.end_marker is not None, fs.cause_frame())


def error_line(fs: FileScan, raw: bytes, lineno: int) -> None:
    """Everything an error line (one with a matching.ERROR_ANCHORS literal) says."""
    if lineno == fs.source_at[0] and raw[fs.source_at[1]:fs.source_at[1] + 2] == b"  ":
        return  # a traceback's source line (`raise ValueError("...")`): the exception line below proves it
    if lf.TRACEBACK_START in raw:  # a new traceback: earlier frames belong to another exception
        fs.frames.clear()
        fs.frame_where.clear()
    line: str | None = None
    new: list[Hit] = []
    for sig in matching(raw):
        if sig.id in fs.hit_ids or (sig.unless and sig.unless in fs.hit_ids):
            continue
        if sig.frame is not None and sig.frame not in fs.frames:  # the cause must be on the traceback before it
            continue
        line = line or text(raw)
        fs.hit_ids.add(sig.id)
        new.append(_hit(fs, sig, lineno, line))
    fs.hits.extend(new)
    if lf.CUDA_ERROR in raw:
        fs.cuda_error_line = (lineno, new)
    if b"cudaError" in raw and (m := lf.CUDA_ERROR_NAME.search(raw)):
        target = cuda_errors.attach(m.group(1).decode(), lineno, fs.cuda_error_line, fs.hits, fs.hit_ids)
        if target is not None:  # no error line before it: the line naming the enum proves it
            h = _hit(fs, target, lineno, text(raw))
            h.cuda_enum = target.cuda_enum
            fs.hits.append(h)
    for needle, infra in SLURM_INFRA:
        if fs.slurm_infra is None and needle in raw:
            fs.slurm_infra = (infra, lineno, text(raw))
    crash.observe(fs.crash_lines, raw, lineno, len(fs.it), text)
    if b"rror" in raw or b"Exception" in raw or b"Interrupt" in raw:
        if b"cuda_graph_config" in raw or b"CudaGraphModule" in raw:
            fs.graph_config_traceback = True
        if fs.graph_config_traceback and fs.keyerror is None and lf.KEYERROR.search(raw):
            fs.keyerror = (lineno, text(raw))
        if lf.SRUN_EXIT.search(raw):
            fs.srun_exit = (lineno, text(raw))
        if (m := lf.EXC_LINE.search(raw)) and b"Warning" not in m.group(1):
            fs.last_exception = (lineno, text(raw))
    elif b"cuda_graph_config" in raw:
        fs.graph_config_traceback = True
