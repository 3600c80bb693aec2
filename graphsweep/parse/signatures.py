"""The log signature catalogue: every text that proves what happened to a run, and how it ranks.

Every signature is a literal substring (searched anywhere in a physical line, so srun labels such as
`mx_v1_perf/0 `, `[rank4]: `, `[default0]:` and glued ranks do not matter), with the outcome and error class it
proves and where Megatron/PyTorch/Slurm print it (docs/megatron-facts.md §x.y). The signatures
of Megatron's constraints come from the constraint catalogue (graphsweep/constraints) under the constraint's own id,
so a run that hits an assertion and a cell preflight blocked for it carry the same id; the rest (OOM, crashes,
capture symptoms, infrastructure) are listed here. `rank` is the classification rule that uses a signature
(graphsweep/parse/classify.py); within a rank, a cause outranks a symptom (a `symptom` signature is used only when
nothing else of its rank matched).

The parser finds candidate lines cheaply with ERROR_ANCHORS (every needle contains an anchor, or sits on an
exception line, which contains "rror": tests check this), then tries only the needles of the anchors a line has.
This module is small on purpose: the run rule's waiting process imports it (find_transient) without pandas.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from graphsweep import logformat as lf
from graphsweep.constraints.catalogue import CONSTRAINTS
from graphsweep.constraints.model import CAPTURE, CONFIG, LAUNCH, Constraint
from graphsweep.vocab import BLOCKED, CANCELLED, CRASHED, LOST, NODE_FAIL, OOM, PREEMPTED, TIMEOUT


@dataclass(frozen=True)
class Signature:
    id: str
    needle: bytes  # literal, case-sensitive, anywhere in the line
    outcome: str
    error_class: str
    source: str  # where the text comes from (reference section / file / issue)
    transient: bool = False  # in Bridge's is_flaky_failure list (docs/megatron-facts.md §6.2): one automatic retry
    requires: bytes | None = None  # a second literal the same line must contain
    rank: int = 0  # classification rule number (graphsweep/parse/classify.py)
    frame: str | None = None  # a function the traceback just before the line must pass through (the cause)
    symptom: bool = False  # a generic consequence: used only when no cause of the same rank matched
    unless: str | None = None  # not when this other signature already matched in the file (a more specific one)
    unless_text: bytes | None = None  # not on a line that also contains this text


def _sig(rank: int, id: str, needle: str, outcome: str, error_class: str, source: str, *, transient: bool = False,
         requires: str | None = None, symptom: bool = False, unless: str | None = None,
         unless_text: str | None = None) -> Signature:
    return Signature(id, needle.encode(), outcome, error_class, source, transient,
                     requires.encode() if requires else None, rank, None, symptom, unless,
                     unless_text.encode() if unless_text else None)


# How a constraint's run-time text ranks: when Megatron checks it decides the class
_BY_STAGE = {LAUNCH: (5, "blocked_config"), CONFIG: (6, "blocked_config"), CAPTURE: (10, "blocked_capture")}


def _from_constraint(c: Constraint) -> list[Signature]:
    rank, error_class = _BY_STAGE.get(c.at, (6, "blocked_config"))
    return [Signature(c.id, n.encode(), BLOCKED, error_class, c.source, False,
                      c.requires.encode() if c.requires else None, rank, c.frame) for n in c.needles]


B, C, O = BLOCKED, CRASHED, OOM
OOM_CLASS = OOM  # a CUDA OOM run is outcome oom with error class oom
TIME_LIMIT = "time_limit"

RUNTIME: tuple[Signature, ...] = (
    # 2 host OOM (Slurm cgroup): `slurmstepd: error: Detected 1 oom-kill event(s) ...` (older: oom_kill)
    _sig(2, "host_oom_kill", "oom-kill", C, "host_oom", "slurmstepd (docs/megatron-facts.md §5.8 'host OOM oom_kill')"),
    _sig(2, "host_oom_kill_", "oom_kill", C, "host_oom", "slurmstepd (docs/megatron-facts.md §5.8)"),
    # 4 builtin workload (graphsweep/entry/builtin_gpt.py, exit 3); the specific line hides the general one
    _sig(4, "gs_no_cuda", lf.NO_CUDA.split(" (")[0], B, "no_cuda", "graphsweep/entry/builtin_gpt.py"),
    _sig(4, "gs_blocked", lf.BLOCKED.strip(), B, "env_blocked", "graphsweep/entry/builtin_gpt.py", unless="gs_no_cuda"),
    # 5 launch: argparse and Hydra override rejections (docs/megatron-facts.md §6.3 step 1, §6.1)
    _sig(5, "argparse_error", "error: argument ", B, "launch_error", "argparse (docs/megatron-facts.md §6.3 step 1)",
         unless_text="is_cuda_graph_impl_valid"),
    _sig(5, "argparse_unrecognized", "error: unrecognized arguments:", B, "launch_error", "argparse (docs/megatron-facts.md §6.3 step 1)"),
    _sig(5, "hydra_overrides", "Failed to parse Hydra overrides", B, "blocked_config", "Bridge OverridesError (docs/megatron-facts.md §6.1)"),
    _sig(5, "hydra_overrides_err", "OverridesError", B, "blocked_config", "Bridge (docs/megatron-facts.md §6.1)"),
    # 7 environment (baseline fails too: docs/megatron-facts.md §6.1 environment/backend, skill case 4)
    _sig(7, "no_te", "CUDA Graphs are not supported without TE.", B, "env_blocked",
         "MCore cuda_graphs.py TECudaGraphHelper.__init__ (0.19 L2098-2107)"),
    _sig(7, "no_attention_backend", "Available backends = {FlashAttention=False, FusedAttention=False, "
         "UnfusedDotProductAttention=False}", B, "env_blocked", "TE attention backend selection (docs/megatron-facts.md §6.1, skill case 4)"),
    # 8 API / version breakage (docs/megatron-facts.md §6.1)
    _sig(8, "is_moe_layer", "object has no attribute 'is_moe_layer'", B, "api_mismatch",
         "Bridge #4583 (local + mlp scope, model build)"),
    _sig(8, "device_pointer_scales", "get_device_pointer_for_data_and_scales()", B, "api_mismatch",
         "Bridge #4844 (full-iteration graphs, nightly MXFP8)", requires="TypeError"),
    _sig(8, "none_copy", "'NoneType' object has no attribute 'copy_'", B, "api_mismatch",
         "MLM PR #6958 (full-iteration input slot None at capture, clone_tensors_in_struct)"),
    # MCore <= 0.18 local graph runner + FP8 on TE 2.15.0 (TE dropped the setter; MCore 0.19.2 cuda_graphs.py
    # L150-162 checks hasattr first, TE 2.20.2 quantization.py L423 has it again)
    _sig(8, "fp8_skip_update_setter", "has no attribute 'set_skip_fp8_weight_update_tensor'", B, "api_mismatch",
         "MLM #4707, PR #4874; TE PR #3015"),
    # 9 CUDA OOM (docs/megatron-facts.md §5.8); the allocator line carries "Tried to allocate <size>"
    _sig(9, "cuda_oom", "CUDA out of memory", O, OOM_CLASS, "PyTorch caching allocator OutOfMemoryError (docs/megatron-facts.md §5.8)"),
    _sig(9, "cuda_oom_raw", "CUDA error: out of memory", O, OOM_CLASS, "raw CUDA OOM outside the allocator (docs/megatron-facts.md §5.8)"),
    _sig(9, "cublas_alloc", "CUBLAS_STATUS_ALLOC_FAILED", O, OOM_CLASS, "cuBLAS workspace allocation (docs/megatron-facts.md §5.8)"),
    _sig(9, "nccl_calloc", "Failed to CUDA calloc", O, OOM_CLASS, "NCCL (docs/megatron-facts.md §5.8; verify per container)"),
    # 10 capture errors (docs/megatron-facts.md §5.8 and §3.4 replay checks)
    _sig(10, "capture_not_permitted", "operation not permitted when stream is capturing", B, "blocked_capture",
         "cudaErrorStreamCaptureUnsupported (docs/megatron-facts.md §5.8; MLM #5889, #1598)"),
    # the symptom every failed capture prints first (it comes from capture_end): never the reason when a cause shows
    _sig(10, "capture_invalidated", "operation failed due to a previous error during capture", B, "blocked_capture",
         "cudaErrorStreamCaptureInvalidated (docs/megatron-facts.md §5.8)", symptom=True),
    _sig(10, "capture_unjoined", "capturing stream has unjoined work", B, "blocked_capture", "docs/megatron-facts.md §5.8"),
    _sig(10, "capture_legacy", "operation would make the legacy stream depend on a capturing blocking stream", B,
         "blocked_capture", "docs/megatron-facts.md §5.8"),
    _sig(10, "capture_isolation", "cudaErrorStreamCaptureIsolation", B, "blocked_capture", "docs/megatron-facts.md §5.8; Bridge #1688"),
    _sig(10, "captured_event", "cudaErrorCapturedEvent", B, "blocked_capture", "docs/megatron-facts.md §5.8; MLM #6152"),
    _sig(10, "rng_offset", "Offset increment outside graph capture encountered unexpectedly.", B, "blocked_capture",
         "PyTorch RNG (docs/megatron-facts.md §5.8)"),
    _sig(10, "arg_mismatch", "CUDA graph argument mismatch:", B, "blocked_capture",
         "MCore cuda_graphs.py _CudaGraphRunner.replay_graph_capture L1632"),
    _sig(10, "no_matching_runner", "is set to True but no matching cudagraph runners were found", B, "blocked_capture",
         "MCore cuda_graphs.py L1896"),
    _sig(10, "capture_twice", "CUDA Graph capture has already been finished.", B, "blocked_capture",
         "MCore TECudaGraphHelper._start_capturing"),
    # torch 2.11 aten/src/ATen/native/cuda/Copy.cu (libtorch_cuda.so): a pageable host tensor copied inside a capture
    # (router z-loss with the moe_router scope before MLM PR #5401)
    _sig(10, "capture_pageable_copy", "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the "
         "CPU tensor is pinned.", B, "blocked_capture", "torch 2.11 ATen native/cuda/Copy.cu; MLM PR #5401"),
    # the caching allocator after a failed capture (torch 2.11 c10/cuda/CUDACachingAllocator.cpp:3662, the text in
    # libc10_cuda.so): a consequence, the cause is the capture error printed before it when there is one (TGI #3175)
    _sig(10, "captures_underway", "captures_underway.empty() INTERNAL ASSERT FAILED", B, "blocked_capture",
         "torch 2.11 c10/cuda/CUDACachingAllocator.cpp L3662; TGI #3175", symptom=True),
    # 11 illegal memory access (docs/megatron-facts.md §5.8, MLM #5474: expandable_segments without NCCL_GRAPH_REGISTER=0)
    _sig(11, "illegal_memory_access", "illegal memory access", C, "illegal_memory_access",
         "CUDA / NCCL WARN Cuda failure (docs/megatron-facts.md §5.8, §6.2)", transient=True),
    # 12 NCCL / distributed (docs/megatron-facts.md §5.8, §6.2)
    _sig(12, "nccl_watchdog", "Watchdog caught collective operation timeout", C, "nccl_error",
         "ProcessGroupNCCL watchdog (docs/megatron-facts.md §5.8, MLM #735)", transient=True),
    _sig(12, "nccl_failed", "Some NCCL operations have failed or timed out.", C, "nccl_error", "docs/megatron-facts.md §5.8, §6.2",
         transient=True),
    _sig(12, "dist_backend", "torch.distributed.DistBackendError", C, "nccl_error", "docs/megatron-facts.md §5.8, §6.2", transient=True),
    _sig(12, "nccl_remote", "ncclRemoteError", C, "nccl_error", "docs/megatron-facts.md §5.8, §6.2", transient=True),
    _sig(12, "nccl_unhandled_cuda", "ncclUnhandledCudaError", C, "nccl_error", "docs/megatron-facts.md §5.8"),
    _sig(12, "cuda_call_failed", "Call to CUDA function failed.", C, "nccl_error", "docs/megatron-facts.md §5.8, §6.2", transient=True),
    # 13 segfault (docs/megatron-facts.md §5.8, MLM #6152: 6th replay segfaults with exitcode -11)
    _sig(13, "segfault", "Segmentation fault", C, "segfault", "docs/megatron-facts.md §5.8, §6.2", transient=True),
    _sig(13, "segfault_encountered", "Segfault encountered", C, "segfault", "docs/megatron-facts.md §5.8, §6.2", transient=True),
    _sig(13, "exitcode_11", "exitcode: -11", C, "segfault", "torchrun elastic `failed (exitcode: -11)`"),
    _sig(13, "exitcode_11_ref", "exitcode -11", C, "segfault", "docs/megatron-facts.md §5.8 `exitcode -11` (MLM #6152)"),
    _sig(13, "exitcode_11b", "exitcode  : -11", C, "segfault", "torchrun ChildFailedError block (docs/megatron-facts.md §5.8)"),
    _sig(13, "sigsegv", "SIGSEGV", C, "segfault", "torchrun signal report"),
    # 14 other transient signatures: Bridge scripts/performance/setup_experiment.py::is_flaky_failure (docs/megatron-facts.md §6.2)
    _sig(14, "dist_network", "torch.distributed.DistNetworkError", C, "transient:network", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "server_socket", "The server socket has failed to listen on any local network address.", C,
         "transient:network", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "connection_reset", "Connection reset by peer", C, "transient:network", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "ecc", "uncorrectable ECC error encountered", C, "transient:ecc", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "illegal_instruction", "illegal instruction", C, "transient:cuda_error", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "unspecified_launch", "unspecified launch failure", C, "transient:cuda_error", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "double_free", "double free or corruption", C, "transient:memory_corruption", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "invalid_pointer", "invalid pointer", C, "transient:memory_corruption", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "tcache", "malloc(): unaligned tcache chunk detected", C, "transient:memory_corruption", "docs/megatron-facts.md §6.2",
         transient=True),
    _sig(14, "unsorted_chunks", "free(): corrupted unsorted chunks", C, "transient:memory_corruption", "docs/megatron-facts.md §6.2",
         transient=True),
    _sig(14, "glibc", "Fatal glibc error", C, "transient:memory_corruption", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "zmq", "zmq.error.ZMQError: Address already in use", C, "transient:port_in_use", "docs/megatron-facts.md §6.2",
         transient=True),
    _sig(14, "hf_hub", "We couldn't connect to 'https://huggingface.co'", C, "transient:hub", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "unpack", "Unpack failed: incomplete input", C, "transient:io", "docs/megatron-facts.md §6.2", transient=True),
    _sig(14, "eof_data", "EOFError: No data left in file", C, "transient:io", "docs/megatron-facts.md §6.2", transient=True),
    # Follows every CUDA error (docs/megatron-facts.md §5.8): transient only when nothing more specific explains the failure.
    _sig(14, "cuda_launch_blocking", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1", C, "transient:cuda_error",
         "docs/megatron-facts.md §6.2", transient=True),
    # 15 walltime (docs/megatron-facts.md §5.8 slurmstepd; §6.2 timeout marker)
    _sig(15, TIME_LIMIT, "DUE TO TIME LIMIT", TIMEOUT, "hang_timeout", "slurmstepd `*** JOB <id> ON <node> "
         "CANCELLED AT <ts> DUE TO TIME LIMIT ***` (docs/megatron-facts.md §5.8)"),
    # 16 NaN / Inf (docs/megatron-facts.md §5.8 rerun state machine; MLM #5966)
    _sig(16, "found_nan", "found NaN in", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8, §6.2)", transient=True),
    _sig(16, "found_inf", "found Inf in", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8)"),
    _sig(16, "unexpected_nan", "Unexpected result nan", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8)"),
    _sig(16, "unexpected_inf", "Unexpected result inf", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8)"),
    _sig(16, "spiky_loss", "Spiky loss", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8)"),
)

# Constraint texts first: a cause with a traceback frame is more specific than the generic text it shares
SIGNATURES: tuple[Signature, ...] = (*[s for c in CONSTRAINTS for s in _from_constraint(c)], *RUNTIME)

# Slurm job-end lines other than TIME LIMIT (slurmstepd; not quoted in the reference: verify per site).
SLURM_INFRA = (
    (b"DUE TO PREEMPTION", PREEMPTED),
    (b"DUE TO NODE FAILURE", NODE_FAIL),
)
INFRA_STATES = {
    "PREEMPTED": PREEMPTED, "NODE_FAIL": NODE_FAIL, "BOOT_FAIL": NODE_FAIL, "CANCELLED": CANCELLED,
    "REVOKED": CANCELLED, "LOST": LOST, "UNKNOWN": LOST,
}  # fmt: skip

# Cheap literal prefilter: a line is looked at only if it contains one of these. Exceptions carry
# "rror" (AssertionError, ValueError, CUDA error, slurmstepd: error, ...); graph texts carry "raph".
ERROR_ANCHORS: tuple[bytes, ...] = (
    b"rror", b"raph", b"NCCL", b"nccl", b"oom", b"Seg", b"SIG", b"exitcode", b"illegal", b"found NaN", b"found Inf",
    b"Unexpected result", b"Spiky", b"free(", b"double free", b"malloc(", b"invalid pointer", b"socket",
    b"Connection reset", b"CUDA_LAUNCH_BLOCKING", b"DUE TO", b"CANCELLED", b"Unpack failed", b"Available backends",
    b"offload", b"recompute", b"Watchdog", b"ECC", b"launch failure", b"huggingface", b"out of memory", b"CUBLAS",
    b"calloc", b"Call to CUDA", b"[graphsweep]", b"Traceback", b"StopIteration", b"xiting program", b"Pretrain failed",
    # a death without an exception (graphsweep/parse/crash.py; logformat FATAL, LAUNCHER_SIGNAL)
    b"terminate called", b"death signal", b"got signal",
)
TRANSIENT_NEEDLES: tuple[str, ...] = tuple(s.needle.decode() for s in SIGNATURES if s.transient)


def anchored(sig: Signature) -> bool:
    """True when the prefilter can see this signature's line."""
    texts = [sig.needle] + ([sig.requires] if sig.requires else [])
    return any(a in t for t in texts for a in ERROR_ANCHORS) or sig.rank in (5, 6, 7, 8)  # exception lines: "rror"


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
    return {a: tuple(v) for a, v in out.items()}


_BUCKETS = _bucket()
_ORDER = {sig: k for k, sig in enumerate(SIGNATURES)}


@functools.lru_cache(maxsize=512)
def _candidates_for(anchors: frozenset[bytes]) -> tuple[Signature, ...]:
    seen = {sig for a in anchors for sig in _BUCKETS[a]}
    return tuple(sorted(seen, key=_ORDER.__getitem__))  # catalogue order, as a plain loop would find them


def _match(raw: bytes) -> tuple[Signature, ...]:
    cands = _candidates_for(frozenset(a for a in _BUCKETS if a in raw))
    return tuple(s for s in cands if s.needle in raw and (s.requires is None or s.requires in raw)
                 and not (s.unless_text and s.unless_text in raw))


_match_cached = functools.lru_cache(maxsize=4096)(_match)


def matching(raw: bytes) -> tuple[Signature, ...]:
    """The signatures whose text is on this line. Short lines are cached by content: a long log repeats the same
    warning lines thousands of times (the cache holds at most 4096 x 2 KB)."""
    return _match_cached(raw) if len(raw) <= 2048 else _match(raw)


# --------------------------------------------------------------------------------------------------
# The one automatic retry of a transient failure (the run rule asks before it records a failed run)
def transient_of(sigs: Iterable[Signature]) -> Signature | None:
    """The most specific transient signature, unless something deterministic explains the failure."""
    found = list(sigs)
    if any(s.rank <= 10 for s in found) or any(s.id == TIME_LIMIT for s in found):
        return None
    cand = [s for s in found if s.transient]
    return min(cand, key=lambda s: s.rank) if cand else None


def find_transient(log: str | bytes | Path) -> str | None:
    """The docs/megatron-facts.md §6.2 transient substring in a failed run's log (a path, or the text itself), or None: None when
    something deterministic explains the failure (config rejected, CUDA OOM, capture error: retrying cannot help)
    or the job hit its walltime. A line loop, no pandas: the run rule's waiting process stays small."""
    seen: dict[str, Signature] = {}
    for raw in _lines(log):
        if any(a in raw for a in ERROR_ANCHORS):
            for s in matching(raw):
                seen.setdefault(s.id, s)
    hit = transient_of(seen.values())
    return hit.needle.decode() if hit else None


def _lines(log: str | bytes | Path) -> Iterable[bytes]:
    if isinstance(log, bytes) or (isinstance(log, str) and ("\n" in log or not Path(log).is_file())):
        data = log if isinstance(log, bytes) else log.encode("utf-8", "surrogateescape")
        return data.splitlines(keepends=True)
    try:
        return Path(log).read_bytes().splitlines(keepends=True)
    except OSError:
        return []
