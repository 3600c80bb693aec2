"""Which catalogue signatures a log line matches (graphsweep/parse/signatures.py), found cheaply.

The parser finds candidate lines with ERROR_ANCHORS (every needle contains an anchor, or sits on an exception line,
which contains "rror": tests check this), then tries only the needles of the anchors a line has. A CUDA runtime
message (a signature with a `cuda_enum`) also arrives on NCCL's own line, `NCCL WARN Cuda failure
'<cudaGetErrorString>'`, which holds no "rror": those signatures sit under that line's anchor too.
"""

from __future__ import annotations

import functools

from graphsweep import logformat as lf
from graphsweep.parse.signatures import EXCEPTION_RULES, ORDER, SIGNATURES, Signature

# Cheap literal prefilter: a line is looked at only if it contains one of these. Exceptions carry
# "rror" (AssertionError, ValueError, CUDA error, slurmstepd: error, cudaError..., ...); graph texts carry "raph".
ERROR_ANCHORS: tuple[bytes, ...] = (
    b"rror", b"raph", b"NCCL", b"nccl", b"oom", b"Seg", b"SIG", b"exitcode", b"illegal", b"found NaN", b"found Inf",
    b"Unexpected result", b"Spiky", b"free(", b"double free", b"malloc(", b"invalid pointer", b"socket",
    b"Connection reset", b"DUE TO", b"CANCELLED", b"Unpack failed", b"Available backends", b"offload", b"recompute",
    b"Watchdog", b"ECC", b"off the bus", b"launch failure", b"huggingface", b"out of memory", b"CUBLAS", b"calloc",
    b"Call to CUDA", b"[graphsweep]", b"Traceback", b"StopIteration", b"xiting program", b"Pretrain failed",
    # a death without an exception (graphsweep/parse/crash.py; logformat FATAL, LAUNCHER_SIGNAL)
    b"terminate called", b"death signal", b"got signal", b"[F",
    # NCCL's own CUDA failure line (NCCL_CUDA_FAILURE): it carries the cudaGetErrorString text and no "rror"
    b"Cuda failure",
)


NCCL_CUDA_FAILURE = ERROR_ANCHORS[-1]


def anchored(sig: Signature) -> bool:
    """True when the prefilter can see this signature's line."""
    texts = [sig.needle] + ([sig.requires] if sig.requires else [])
    # exception lines and torch's `CUDA error: <text>` lines carry "rror"
    return any(a in t for t in texts for a in ERROR_ANCHORS) or sig.rule in EXCEPTION_RULES or bool(sig.cuda_enum)


# --------------------------------------------------------------------------------------------------
# Which signatures a line matches
def _bucket() -> dict[bytes, tuple[Signature, ...]]:
    """Signatures per prefilter anchor; needles with no anchor of their own sit on exception lines ("rror")."""
    out: dict[bytes, list[Signature]] = {a: [] for a in ERROR_ANCHORS}
    for sig in SIGNATURES:
        own = [a for a in ERROR_ANCHORS if a in sig.needle or (sig.requires and a in sig.requires)]
        for a in own or [b"rror"]:
            out[a].append(sig)
        if own and b"rror" not in own:  # the same text can also arrive as an exception message
            out[b"rror"].append(sig)
        if sig.cuda_enum and NCCL_CUDA_FAILURE not in own:  # a CUDA runtime message: also on NCCL's WARN line
            out[NCCL_CUDA_FAILURE].append(sig)
    return {a: tuple(v) for a, v in out.items()}


_BUCKETS = _bucket()


@functools.lru_cache(maxsize=512)
def _candidates_for(anchors: frozenset[bytes]) -> tuple[Signature, ...]:
    seen = {sig for a in anchors for sig in _BUCKETS[a]}
    return tuple(sorted(seen, key=ORDER.__getitem__))  # catalogue order, as a plain loop would find them


def _match(raw: bytes) -> tuple[Signature, ...]:
    if lf.CUDA_ERROR_HELP in raw and lf.CUDA_ERROR_NAME.search(raw):
        return ()  # torch's `Search for `cudaErrorX'` help line: its enum is paired with the error line (scan.py)
    cands = _candidates_for(frozenset(a for a in _BUCKETS if a in raw))
    found = tuple(s for s in cands if s.needle in raw and (s.requires is None or s.requires in raw)
                  and not (s.unless_text and s.unless_text in raw))
    if any(not s.fallback for s in found):
        found = tuple(s for s in found if not s.fallback)
    return found


_match_cached = functools.lru_cache(maxsize=4096)(_match)


def matching(raw: bytes) -> tuple[Signature, ...]:
    """The signatures whose text is on this line. Short lines are cached by content: a long log repeats the same
    warning lines thousands of times (the cache holds at most 4096 x 2 KB)."""
    return _match_cached(raw) if len(raw) <= 2048 else _match(raw)
