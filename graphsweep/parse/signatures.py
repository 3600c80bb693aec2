"""The log signature catalogue: every text that proves what happened to a run, the rule it feeds, and its retry.

Every signature is a literal substring (searched anywhere in a physical line, so srun labels such as
`mx_v1_perf/0 `, `[rank4]: `, `[default0]:` and glued ranks do not matter), with the outcome and error class it
proves and where Megatron/PyTorch/CUDA/NCCL/Slurm print it. The signatures of Megatron's constraints come from the
constraint catalogue (graphsweep/constraints) under the constraint's own id, so a run that hits an assertion and a
cell preflight blocked for it carry the same id; the rest (OOM, crashes, CUDA and NCCL errors, infrastructure) are
listed here. `rule` names the classification rule that uses a signature (graphsweep/parse/rules.py RULES, read
top-down); within a rule a cause outranks a symptom (a `symptom` is used only when nothing else of its rule matched).

A CUDA error is named by its cause: torch prints `CUDA error: <cudaGetErrorString>` and, on the next line, ``Search
for `<cudaError name>' in https://docs.nvidia.com/...`` (torch 2.11 c10/cuda/CUDAException.cpp
c10_cuda_check_implementation + CUDAMiscFunctions.cpp get_cuda_error_help). The parser pairs the two
(graphsweep/parse/cuda_errors.py): the error line is the proving line, the enum names the cause (BY_ENUM), and a text
this catalogue does not know still proves its enum's class. The messages below are libcudart 13.0's cudaGetErrorString
(read from nvidia-cuda-runtime 13.0.96's libcudart.so.13); the help and suffix lines after them (CUDA_LAUNCH_BLOCKING,
"asynchronously reported", TORCH_USE_CUDA_DSA) are boilerplate and never a signature.

`retry` is a signature's retry policy (graphsweep/parse/retry.py applies it, docs/failures.md explains it): node and
network faults in any arm, NCCL collective timeouts while no graph runs, and the CUDA kernel faults NVIDIA's perf
harness retries only in an eager arm. Which signatures a line matches: graphsweep/parse/matching.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphsweep import logformat as lf
from graphsweep.constraints.catalogue import CONSTRAINTS
from graphsweep.constraints.model import CAPTURE, CONFIG, LAUNCH, Constraint
from graphsweep.vocab import (
    BLOCKED, CANCELLED, CONTROL, CRASHED, EAGER, LOST, NODE_FAIL, OOM, PREEMPTED, TIMEOUT,
)  # fmt: skip

# The classification rules that signatures feed (graphsweep/parse/rules.py RULES holds them all, in order)
R_HOST_OOM = "host-oom"
R_BUILTIN = "builtin-blocked"
R_LAUNCH = "launch-rejected"
R_CONFIG = "config-rejected"
R_ENV = "environment"
R_API = "api-mismatch"
R_NODE = "node-fault"
R_OOM = "cuda-oom"
R_CAPTURE = "graph-capture"
R_REPLAY = "graph-replay"
R_IMA = "illegal-memory-access"
R_NCCL = "nccl"
R_SEGV = "segfault"
R_CUDA = "cuda-error"
R_NETWORK = "network"
R_HOST = "host-fault"
R_WALLTIME = "walltime"
R_NAN = "nan-inf"
# The rules whose texts arrive as exception messages (no anchor of their own: the exception line's "rror")
EXCEPTION_RULES = (R_LAUNCH, R_CONFIG, R_ENV, R_API)

# When a signature earns the one automatic retry (None: never; a rerun fails the same way)
RETRY_ANY = "any arm"  # a node or network fault: a rerun on another node can fix it
# an NCCL timeout: one during a capture is the capture's own hang, one in a graph arm replaying its graphs the replay's
# (NCCL user guide "Using NCCL with CUDA Graphs": captured collectives "have been seen to cause CUDA to deadlock",
# NCCL_GRAPH_MIXING_SUPPORT; vllm #2770, NeMo #13140, Bridge #3517, pytorch #196133): a rerun hangs the same way
RETRY_NO_GRAPH = "while no graph runs"
RETRY_EAGER = "eager arm only"  # a CUDA kernel fault NVIDIA's harness retries; in a graph arm the graph is the suspect
RETRY_POLICIES = (RETRY_ANY, RETRY_NO_GRAPH, RETRY_EAGER)
EAGER_ARMS = (EAGER, CONTROL)  # arms that run no graph (a pair job runs both arms: a graph arm here)


@dataclass(frozen=True)
class Signature:
    id: str
    needle: bytes  # literal, case-sensitive, anywhere in the line
    outcome: str
    error_class: str
    source: str  # where the text comes from (file, line, release / issue)
    rule: str  # the classification rule that uses it (R_* above)
    retry: str | None = None  # RETRY_* (docs/failures.md); None: deterministic, never retried
    requires: bytes | None = None  # a second literal the same line must contain
    frame: str | None = None  # a function the traceback just before the line must pass through (the cause)
    symptom: bool = False  # a generic consequence: used only when no cause of the same rule matched
    unless: str | None = None  # not when this other signature already matched in the file (a more specific one)
    unless_text: bytes | None = None  # not on a line that also contains this text
    cuda_enum: str | None = None  # the cudaError whose cudaGetErrorString the needle is (BY_ENUM)
    neutral: bool = False  # a wrapper of another error (DistBackendError): neither causes nor prevents a retry
    fallback: bool = False  # only on a line no other signature matched (the generic `CUDA error: `)


# the error class of a graph run the launch gate skipped (graphsweep/run/gate.py): from run.json's gate record, which
# parse/classify.py reads; no log line is its signature
LAUNCH_GATE_CLASS = "launch_gate"


def _sig(rule: str, id: str, needle: str, outcome: str, error_class: str, source: str, *, retry: str | None = None,
         requires: str | None = None, symptom: bool = False, unless: str | None = None,
         unless_text: str | None = None, cuda_enum: str | None = None, neutral: bool = False,
         fallback: bool = False, frame: str | None = None) -> Signature:
    return Signature(id, needle.encode(), outcome, error_class, source, rule, retry,
                     requires.encode() if requires else None, frame, symptom, unless,
                     unless_text.encode() if unless_text else None, cuda_enum, neutral, fallback)


# How a constraint's run-time text is classified: when Megatron checks it decides the rule
_BY_STAGE = {LAUNCH: (R_LAUNCH, "blocked_config"), CONFIG: (R_CONFIG, "blocked_config"),
             CAPTURE: (R_CAPTURE, "blocked_capture")}


def _from_constraint(c: Constraint) -> list[Signature]:
    rule, error_class = _BY_STAGE.get(c.at, (R_CONFIG, "blocked_config"))
    return [Signature(c.id, n.encode(), BLOCKED, error_class, c.source, rule,
                      requires=c.requires.encode() if c.requires else None, frame=c.frame) for n in c.needles]


B, C, O = BLOCKED, CRASHED, OOM
OOM_CLASS = OOM  # a CUDA OOM run is outcome oom with error class oom
TIME_LIMIT = "time_limit"
CUDART = "libcudart 13.0 cudaGetErrorString"  # nvidia-cuda-runtime 13.0.96, the Megatron venv's CUDA runtime
NCCL = "libnccl 2.28.9 ncclGetErrorString"  # nvidia-nccl-cu13 2.28.9
BRIDGE_FLAKY = "Bridge scripts/performance/setup_experiment.py is_flaky_failure"  # NVIDIA's perf harness retry list

RUNTIME: tuple[Signature, ...] = (
    # host OOM (Slurm cgroup): `slurmstepd: error: Detected 1 oom-kill event(s) ...` (older: oom_kill)
    _sig(R_HOST_OOM, "host_oom_kill", "oom-kill", C, "host_oom", "slurmstepd (docs/megatron-facts.md §5.8 'host OOM oom_kill')"),
    _sig(R_HOST_OOM, "host_oom_kill_", "oom_kill", C, "host_oom", "slurmstepd (docs/megatron-facts.md §5.8)"),
    # builtin workload (graphsweep/entry/builtin_gpt.py, exit 3); the specific line hides the general one
    _sig(R_BUILTIN, "gs_no_cuda", lf.NO_CUDA.split(" (")[0], B, "no_cuda", "graphsweep/entry/builtin_gpt.py"),
    _sig(R_BUILTIN, "gs_blocked", lf.ARM_BLOCKED.strip(), B, "env_blocked", "graphsweep/entry/builtin_gpt.py",
         unless="gs_no_cuda"),
    # launch: argparse and Hydra override rejections (docs/megatron-facts.md §6.3 step 1, §6.1)
    _sig(R_LAUNCH, "argparse_error", "error: argument ", B, "launch_error", "argparse (docs/megatron-facts.md §6.3 step 1)",
         unless_text="is_cuda_graph_impl_valid"),
    _sig(R_LAUNCH, "argparse_unrecognized", "error: unrecognized arguments:", B, "launch_error",
         "argparse (docs/megatron-facts.md §6.3 step 1)"),
    _sig(R_LAUNCH, "hydra_overrides", "Failed to parse Hydra overrides", B, "blocked_config",
         "Bridge OverridesError (docs/megatron-facts.md §6.1)"),
    _sig(R_LAUNCH, "hydra_overrides_err", "OverridesError", B, "blocked_config", "Bridge (docs/megatron-facts.md §6.1)"),
    # environment (baseline fails too: docs/megatron-facts.md §6.1 environment/backend, skill case 4)
    _sig(R_ENV, "no_te", "CUDA Graphs are not supported without TE.", B, "env_blocked",
         "MCore cuda_graphs.py TECudaGraphHelper.__init__ (0.19 L2098-2107)"),
    _sig(R_ENV, "no_attention_backend", "Available backends = {FlashAttention=False, FusedAttention=False, "
         "UnfusedDotProductAttention=False}", B, "env_blocked", "TE attention backend selection (docs/megatron-facts.md §6.1, skill case 4)"),
    # API / version breakage (docs/megatron-facts.md §6.1)
    _sig(R_API, "is_moe_layer", "object has no attribute 'is_moe_layer'", B, "api_mismatch",
         "Bridge #4583 (local + mlp scope, model build)"),
    _sig(R_API, "device_pointer_scales", "get_device_pointer_for_data_and_scales()", B, "api_mismatch",
         "Bridge #4844 (full-iteration graphs, nightly MXFP8)", requires="TypeError"),
    _sig(R_API, "none_copy", "'NoneType' object has no attribute 'copy_'", B, "api_mismatch",
         "MLM PR #6958 (full-iteration input slot None at capture, clone_tensors_in_struct)"),
    # MCore <= 0.18 local graph runner + FP8 on TE 2.15.0 (TE dropped the setter; MCore 0.19.2 cuda_graphs.py
    # L150-162 checks hasattr first, TE 2.20.2 quantization.py L423 has it again)
    _sig(R_API, "fp8_skip_update_setter", "has no attribute 'set_skip_fp8_weight_update_tensor'", B, "api_mismatch",
         "MLM #4707, PR #4874; TE PR #3015"),
    # node faults: the GPU or its links broke; a rerun on another node can succeed, in any arm
    _sig(R_NODE, "ecc", "uncorrectable ECC error encountered", C, "transient:ecc",
         f"{CUDART} cudaErrorECCUncorrectable; {BRIDGE_FLAKY}", retry=RETRY_ANY,
         cuda_enum="cudaErrorECCUncorrectable"),
    _sig(R_NODE, "nvlink_uncorrectable", "uncorrectable NVLink error detected during the execution", C,
         "transient:nvlink", f"{CUDART} cudaErrorNvlinkUncorrectable", retry=RETRY_ANY,
         cuda_enum="cudaErrorNvlinkUncorrectable"),
    _sig(R_NODE, "gpu_off_bus", "GPU has fallen off the bus", C, "transient:gpu",
         "NVIDIA driver NVRM Xid 79 (`NVRM: Xid (PCI:...): 79, pid=..., GPU has fallen off the bus.`)",
         retry=RETRY_ANY),
    # another process holds the GPU (exclusive compute mode) or the device is unavailable on this node
    _sig(R_NODE, "devices_unavailable", "CUDA-capable device(s) is/are busy or unavailable", C, "transient:gpu",
         f"{CUDART} cudaErrorDevicesUnavailable", retry=RETRY_ANY, cuda_enum="cudaErrorDevicesUnavailable"),
    # CUDA OOM (docs/megatron-facts.md §5.8); the allocator line carries "Tried to allocate <size>"
    _sig(R_OOM, "cuda_oom", "CUDA out of memory", O, OOM_CLASS,
         "PyTorch caching allocator OutOfMemoryError (docs/megatron-facts.md §5.8)"),
    _sig(R_OOM, "cuda_oom_raw", "CUDA error: out of memory", O, OOM_CLASS,
         f"raw CUDA OOM outside the allocator (docs/megatron-facts.md §5.8); {CUDART} cudaErrorMemoryAllocation",
         cuda_enum="cudaErrorMemoryAllocation"),
    _sig(R_OOM, "cublas_alloc", "CUBLAS_STATUS_ALLOC_FAILED", O, OOM_CLASS, "cuBLAS workspace allocation (docs/megatron-facts.md §5.8)"),
    _sig(R_OOM, "nccl_calloc", "Failed to CUDA calloc", O, OOM_CLASS, "NCCL (docs/megatron-facts.md §5.8; verify per container)"),
    # the graph could not be captured: every cudaErrorStreamCapture* and cudaErrorCapturedEvent, and the capture
    # texts of PyTorch, MCore and TE (docs/megatron-facts.md §5.8, §3.4). Deterministic: the same capture fails again on any node
    _sig(R_CAPTURE, "capture_not_permitted", "operation not permitted when stream is capturing", B, "blocked_capture",
         f"{CUDART} cudaErrorStreamCaptureUnsupported (docs/megatron-facts.md §5.8; MLM #5889, #1598)",
         cuda_enum="cudaErrorStreamCaptureUnsupported"),
    # the symptom every failed capture prints first (it comes from capture_end): never the reason when a cause shows
    _sig(R_CAPTURE, "capture_invalidated", "operation failed due to a previous error during capture", B,
         "blocked_capture", f"{CUDART} cudaErrorStreamCaptureInvalidated (docs/megatron-facts.md §5.8)", symptom=True,
         cuda_enum="cudaErrorStreamCaptureInvalidated"),
    _sig(R_CAPTURE, "capture_merge", "operation would result in a merge of separate capture sequences", B,
         "blocked_capture", f"{CUDART} cudaErrorStreamCaptureMerge", cuda_enum="cudaErrorStreamCaptureMerge"),
    _sig(R_CAPTURE, "capture_unmatched", "capture was not ended in the same stream as it began", B, "blocked_capture",
         f"{CUDART} cudaErrorStreamCaptureUnmatched", cuda_enum="cudaErrorStreamCaptureUnmatched"),
    _sig(R_CAPTURE, "capture_unjoined", "capturing stream has unjoined work", B, "blocked_capture",
         f"{CUDART} cudaErrorStreamCaptureUnjoined (docs/megatron-facts.md §5.8)", cuda_enum="cudaErrorStreamCaptureUnjoined"),
    _sig(R_CAPTURE, "capture_isolation", "dependency created on uncaptured work in another stream", B,
         "blocked_capture", f"{CUDART} cudaErrorStreamCaptureIsolation (docs/megatron-facts.md §5.8; Bridge #1688)",
         cuda_enum="cudaErrorStreamCaptureIsolation"),
    _sig(R_CAPTURE, "capture_legacy", "operation would make the legacy stream depend on a capturing blocking stream",
         B, "blocked_capture", f"{CUDART} cudaErrorStreamCaptureImplicit (docs/megatron-facts.md §5.8)",
         cuda_enum="cudaErrorStreamCaptureImplicit"),
    _sig(R_CAPTURE, "captured_event", "operation not permitted on an event last recorded in a capturing stream", B,
         "blocked_capture", f"{CUDART} cudaErrorCapturedEvent (docs/megatron-facts.md §5.8; MLM #6152)",
         cuda_enum="cudaErrorCapturedEvent"),
    _sig(R_CAPTURE, "capture_wrong_thread", "attempt to terminate a thread-local capture sequence from another thread",
         B, "blocked_capture", f"{CUDART} cudaErrorStreamCaptureWrongThread",
         cuda_enum="cudaErrorStreamCaptureWrongThread"),
    _sig(R_CAPTURE, "rng_offset", "Offset increment outside graph capture encountered unexpectedly.", B,
         "blocked_capture", "PyTorch RNG (docs/megatron-facts.md §5.8)"),
    _sig(R_CAPTURE, "capture_twice", "CUDA Graph capture has already been finished.", B, "blocked_capture",
         "MCore 0.19.2 cuda_graphs.py TECudaGraphHelper._start_capturing L2659"),
    # torch 2.11 aten/src/ATen/native/cuda/Copy.cu (libtorch_cuda.so): a pageable host tensor copied inside a capture
    # (router z-loss with the moe_router scope before MLM PR #5401)
    _sig(R_CAPTURE, "capture_pageable_copy", "Cannot copy between CPU and CUDA tensors during CUDA graph capture "
         "unless the CPU tensor is pinned.", B, "blocked_capture", "torch 2.11 ATen native/cuda/Copy.cu; MLM PR #5401"),
    # TE >= 2.11 pytorch/graph.py _make_graphed_callables (main L770; v2.18 L631; TE PR #2376): the capture order
    # (`_order`, MCore's from its schedule) has a dgrad graph without its wgrad graph (delay_wgrad_compute, EP overlap)
    _sig(R_CAPTURE, "te_wgrad_dgrad_order", "doesn't match number of dgrad graphs", B, "blocked_capture",
         "TE >= 2.11 pytorch/graph.py _make_graphed_callables (TE PR #2376)"),
    # torch 2.11 aten/src/ATen/cuda/CUDAGeneratorImpl.cpp assertNotCapturing (the pieces in libtorch_cuda.so; every
    # `Cannot call CUDAGeneratorImpl::<method>` is that check: current_seed, set_offset, get_offset, ...): code
    # inside the capture read or set the CUDA RNG state (`torch.cuda.get_rng_state()`: activation checkpointing with
    # torch's RNG, a non-graph-safe RNG tracker, a kernel wrapper saving its RNG state) -- `Cannot call
    # CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need this call to be captured, please file an
    # issue. Current cudaStreamCaptureStatus: cudaStreamCaptureStatusActive`
    _sig(R_CAPTURE, "rng_state_in_capture", "Cannot call CUDAGeneratorImpl::", B, "blocked_capture",
         "torch 2.11 ATen/cuda/CUDAGeneratorImpl.cpp assertNotCapturing; pytorch #83148 (checkpoint in "
         "make_graphed_callables), flash-attention #165"),
    # MCore 0.19 fine-grained activation offloading frees a CUDA-graph static output on the first forward after the
    # TE capture (pipeline_parallel/fine_grained_activation_offload.py bulk_offload: `release_tensor.untyped_storage()
    # .resize_(0)`): torch's storage check refuses it. Proven only through that frame: the text itself is generic
    _sig(R_CAPTURE, "offload_graph_output_resize", "Trying to resize storage that is not resizable", B,
         "blocked_capture", "MLM #7009 (fine-grained activation offloading + TE scoped graphs, MCore 0.19)",
         frame="bulk_offload"),
    # the caching allocator after a failed capture (torch 2.11 c10/cuda/CUDACachingAllocator.cpp:3662, the text in
    # libc10_cuda.so): a consequence, the cause is the capture error printed before it when there is one (TGI #3175)
    _sig(R_CAPTURE, "captures_underway", "captures_underway.empty() INTERNAL ASSERT FAILED", B, "blocked_capture",
         "torch 2.11 c10/cuda/CUDACachingAllocator.cpp L3662; TGI #3175", symptom=True),
    # the captured graph failed when it was replayed or updated: crashed, deterministic
    _sig(R_REPLAY, "graph_exec_update", "the graph update was not performed because it included changes which "
         "violated constraints specific to instantiated graph update", C, "graph_replay",
         f"{CUDART} cudaErrorGraphExecUpdateFailure", cuda_enum="cudaErrorGraphExecUpdateFailure"),
    _sig(R_REPLAY, "arg_mismatch", "CUDA graph argument mismatch:", C, "graph_replay",
         "MCore 0.19.2 cuda_graphs.py _CudaGraphRunner.replay_graph_capture L1632"),
    _sig(R_REPLAY, "no_matching_runner", "is set to True but no matching cudagraph runners were found", C,
         "graph_replay", "MCore 0.19.2 cuda_graphs.py CudaGraphManager.__call__ L1897"),
    # illegal memory access (docs/megatron-facts.md §5.8; MLM #5474: expandable_segments without NCCL_GRAPH_REGISTER=0; TE #3316)
    _sig(R_IMA, "illegal_memory_access", "illegal memory access", C, "illegal_memory_access",
         f"{CUDART} cudaErrorIllegalAddress / NCCL WARN Cuda failure (docs/megatron-facts.md §5.8); {BRIDGE_FLAKY}", retry=RETRY_EAGER,
         cuda_enum="cudaErrorIllegalAddress"),
    # NCCL / distributed (docs/megatron-facts.md §5.8, §6.2)
    _sig(R_NCCL, "nccl_watchdog", "Watchdog caught collective operation timeout", C, "nccl_error",
         f"torch 2.11 ProcessGroupNCCL watchdog (docs/megatron-facts.md §5.8, MLM #735); {BRIDGE_FLAKY}", retry=RETRY_NO_GRAPH),
    # torch 2.11 ProcessGroupNCCL HeartbeatMonitor (libtorch_cuda.so): a NCCL/CUDA API call hung inside the process;
    # torch's own text says to debug the hang, not to rerun it
    _sig(R_NCCL, "nccl_watchdog_stuck", "ProcessGroupNCCL's watchdog got stuck for", C, "nccl_error",
         "torch 2.11 ProcessGroupNCCL.cpp HeartbeatMonitor (libtorch_cuda.so)"),
    _sig(R_NCCL, "nccl_failed", "Some NCCL operations have failed or timed out.", C, "nccl_error",
         f"torch 2.11 ProcessGroupNCCL WorkNCCL::handleException (docs/megatron-facts.md §5.8); {BRIDGE_FLAKY}",
         retry=RETRY_NO_GRAPH, symptom=True),
    # the exception torch raises for any NCCL error: the NCCL text inside it names the fault
    _sig(R_NCCL, "dist_backend", "torch.distributed.DistBackendError", C, "nccl_error", "docs/megatron-facts.md §5.8, §6.2", neutral=True),
    _sig(R_NCCL, "nccl_remote", "ncclRemoteError", C, "nccl_error",
         f"torch 2.11 NCCLUtils.cpp getNcclErrorDetailStr (docs/megatron-facts.md §5.8); {BRIDGE_FLAKY}", retry=RETRY_ANY),
    _sig(R_NCCL, "nccl_remote_text", "remote process exited or there was a network error", C, "nccl_error",
         f"{NCCL}(ncclRemoteError), inside torch's `NCCL error in: ...`", retry=RETRY_ANY),
    # ncclInvalidUsage (5): a program bug, the same on any node. libnccl's text is in torch's `NCCL Error 5: invalid
    # usage (run with NCCL_DEBUG=WARN for details)` (torch 2.11 torch/csrc/cuda/nccl.cpp throw_nccl_error: a
    # std::runtime_error, so its `terminate called after throwing an instance of 'std::runtime_error'` and SIGABRT
    # only say how the process ended) and in C10D_NCCL_CHECK's `NCCL error in: <file>:<line>, invalid usage ...`
    _sig(R_NCCL, "nccl_invalid_usage", "invalid usage (run with NCCL_DEBUG=WARN for details)", C, "nccl_error",
         f"{NCCL}(ncclInvalidUsage), in torch 2.11 torch/csrc/cuda/nccl.cpp throw_nccl_error `NCCL Error 5: ...`"),
    _sig(R_NCCL, "nccl_invalid_usage_detail", "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
         C, "nccl_error", "torch 2.11 NCCLUtils.cpp getNcclErrorDetailStr (libtorch_cuda.so)"),
    _sig(R_NCCL, "nccl_unhandled_cuda", "ncclUnhandledCudaError", C, "nccl_error",
         "torch 2.11 NCCLUtils.cpp getNcclErrorDetailStr (docs/megatron-facts.md §5.8)", retry=RETRY_EAGER),
    _sig(R_NCCL, "cuda_call_failed", "Call to CUDA function failed.", C, "nccl_error",
         f"torch 2.11 NCCLUtils.cpp (ncclUnhandledCudaError); {BRIDGE_FLAKY}", retry=RETRY_EAGER),
    # NCCL's own line for the CUDA call that failed under it (src/include/checks.h CUDACHECK `WARN("Cuda failure
    # '%s'", cudaGetErrorString(err))`, driver calls `Cuda failure %d '%s'`), printed before torch's
    # ncclUnhandledCudaError: `host:pid:tid [dev] enqueue.cc:267 NCCL WARN Cuda failure 'dependency created on
    # uncaptured work in another stream'` (vllm #4432). A message this catalogue knows (a capture error, an illegal
    # memory access) proves its own signature on this line; any other is this one
    # that the run repeats or not is the other lines' to say (torch's ncclUnhandledCudaError): neutral
    _sig(R_NCCL, "nccl_cuda_failure", "NCCL WARN Cuda failure ", C, "nccl_error",
         "NCCL src/include/checks.h CUDACHECK (NCCL_DEBUG=WARN or INFO); vllm #4432", neutral=True, fallback=True),
    # segfault (docs/megatron-facts.md §5.8, MLM #6152: the 6th replay segfaults with exitcode -11): a native bug, it repeats
    _sig(R_SEGV, "segfault", "Segmentation fault", C, "segfault", "docs/megatron-facts.md §5.8, §6.2"),
    _sig(R_SEGV, "segfault_encountered", "Segfault encountered", C, "segfault", "docs/megatron-facts.md §5.8, §6.2"),
    _sig(R_SEGV, "exitcode_11", "exitcode: -11", C, "segfault", "torchrun elastic `failed (exitcode: -11)`"),
    _sig(R_SEGV, "exitcode_11_ref", "exitcode -11", C, "segfault", "docs/megatron-facts.md §5.8 `exitcode -11` (MLM #6152)"),
    _sig(R_SEGV, "exitcode_11b", "exitcode  : -11", C, "segfault", "torchrun ChildFailedError block (docs/megatron-facts.md §5.8)"),
    _sig(R_SEGV, "sigsegv", "SIGSEGV", C, "segfault", "torchrun signal report"),
    # other CUDA errors: a kernel fault (retried in an eager arm, as NVIDIA's harness does), or any CUDA error this
    # catalogue does not know, named by its text and the enum of torch's `Search for` line (never retried)
    _sig(R_CUDA, "illegal_instruction", "illegal instruction", C, "cuda_error",
         f"{CUDART} cudaErrorIllegalInstruction; {BRIDGE_FLAKY}", retry=RETRY_EAGER,
         cuda_enum="cudaErrorIllegalInstruction"),
    _sig(R_CUDA, "unspecified_launch", "unspecified launch failure", C, "cuda_error",
         f"{CUDART} cudaErrorLaunchFailure; {BRIDGE_FLAKY}", retry=RETRY_EAGER, cuda_enum="cudaErrorLaunchFailure"),
    _sig(R_CUDA, "cuda_error", "CUDA error: ", C, "cuda_error",
         "torch 2.11 c10/cuda/CUDAException.cpp c10_cuda_check_implementation", fallback=True),
    # network faults (any arm): a rerun on other nodes or ports can succeed
    _sig(R_NETWORK, "dist_network", "torch.distributed.DistNetworkError", C, "transient:network", BRIDGE_FLAKY,
         retry=RETRY_ANY),
    _sig(R_NETWORK, "server_socket", "The server socket has failed to listen on any local network address.", C,
         "transient:network", f"torch 2.11 c10d TCPStore (libtorch_cpu.so); {BRIDGE_FLAKY}", retry=RETRY_ANY),
    _sig(R_NETWORK, "connection_reset", "Connection reset by peer", C, "transient:network", BRIDGE_FLAKY,
         retry=RETRY_ANY),
    _sig(R_NETWORK, "zmq", "zmq.error.ZMQError: Address already in use", C, "transient:network", BRIDGE_FLAKY,
         retry=RETRY_ANY),
    _sig(R_NETWORK, "hf_hub", "We couldn't connect to 'https://huggingface.co'", C, "transient:network",
         BRIDGE_FLAKY, retry=RETRY_ANY),
    # the process's own memory or input broke: a bug or a bad file, the same on every node (Bridge retries these)
    _sig(R_HOST, "double_free", "double free or corruption", C, "memory_corruption", BRIDGE_FLAKY),
    _sig(R_HOST, "invalid_pointer", "invalid pointer", C, "memory_corruption", BRIDGE_FLAKY),
    _sig(R_HOST, "tcache", "malloc(): unaligned tcache chunk detected", C, "memory_corruption", BRIDGE_FLAKY),
    _sig(R_HOST, "unsorted_chunks", "free(): corrupted unsorted chunks", C, "memory_corruption", BRIDGE_FLAKY),
    _sig(R_HOST, "glibc", "Fatal glibc error", C, "memory_corruption", BRIDGE_FLAKY),
    _sig(R_HOST, "unpack", "Unpack failed: incomplete input", C, "io_error", BRIDGE_FLAKY),
    _sig(R_HOST, "eof_data", "EOFError: No data left in file", C, "io_error", BRIDGE_FLAKY),
    # walltime (docs/megatron-facts.md §5.8 slurmstepd; §6.2 timeout marker)
    _sig(R_WALLTIME, TIME_LIMIT, "DUE TO TIME LIMIT", TIMEOUT, "hang_timeout", "slurmstepd `*** JOB <id> ON <node> "
         "CANCELLED AT <ts> DUE TO TIME LIMIT ***` (docs/megatron-facts.md §5.8)"),
    # NaN / Inf (docs/megatron-facts.md §5.8 rerun state machine; MLM #5966): under graphs a NaN is the finding, not a flake
    _sig(R_NAN, "found_nan", "found NaN in", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8, §6.2)"),
    _sig(R_NAN, "found_inf", "found Inf in", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8)"),
    _sig(R_NAN, "unexpected_nan", "Unexpected result nan", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8)"),
    _sig(R_NAN, "unexpected_inf", "Unexpected result inf", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8)"),
    _sig(R_NAN, "spiky_loss", "Spiky loss", C, "nan", "MCore rerun_state_machine (docs/megatron-facts.md §5.8)"),
)

# Constraint texts first: a cause with a traceback frame is more specific than the generic text it shares
SIGNATURES: tuple[Signature, ...] = (*[s for c in CONSTRAINTS for s in _from_constraint(c)], *RUNTIME)
# The signature a cudaError name proves (torch's `Search for` line), when this catalogue knows the enum
BY_ENUM: dict[str, Signature] = {s.cuda_enum: s for s in RUNTIME if s.cuda_enum}

# Slurm job-end lines other than TIME LIMIT: slurmstepd's src/slurmd/slurmstepd/req.c _handle_signal_container
# `error("*** %s ON %s CANCELLED AT %s DUE TO PREEMPTION ***", entity, node_name, time_str)` (entity `JOB <id>` or
# `STEP <id>.<step>`), `... DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***` and `... DUE TO JOB REQUEUE ***`
# (scontrol requeue: what submitit runs on preemption, slurm.py L190); all four texts are in the local cluster's
# slurmstepd 22.05.8. An attempt a requeued one follows in the same file is superseded (parse/evidence.py)
SLURM_INFRA = (
    (b"DUE TO PREEMPTION", PREEMPTED),
    (b"DUE TO NODE FAILURE", NODE_FAIL),
    (b"DUE TO JOB REQUEUE", CANCELLED),
)
INFRA_STATES = {
    "PREEMPTED": PREEMPTED, "NODE_FAIL": NODE_FAIL, "BOOT_FAIL": NODE_FAIL, "CANCELLED": CANCELLED,
    "REVOKED": CANCELLED, "LOST": LOST, "UNKNOWN": LOST,
}  # fmt: skip


# The catalogue's order: a plain loop over SIGNATURES finds the earlier first (matching.py, retry.py keep it)
ORDER: dict[Signature, int] = {sig: k for k, sig in enumerate(SIGNATURES)}
