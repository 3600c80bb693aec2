"""What happened in one run: the signature catalogue and the classification order.

Every signature is a literal substring (searched anywhere in a physical line, so srun labels such as
`mx_v1_perf/0 `, `[rank4]: `, `[default0]:` and glued ranks do not matter), with the error class it
proves and where Megatron/PyTorch/Slurm print it (file, line, version from
../shared/docs/megatron-reference.md, "ref §x.y" below). The parser finds lines cheaply with
ANCHORS (every needle contains an anchor, or sits on a line that does: tests check this), then
tries the needles on those lines only.

Classification order (reference §6.3, extended; the first rule that matches decides):

    #   evidence                                              outcome     error_class
    1   run.json state PREEMPTED / NODE_FAIL / CANCELLED,       preempted / node_fail / cancelled / lost
        Slurm `DUE TO PREEMPTION|NODE FAILURE`, job lost      (infrastructure: retried, never a result)
    2   run.json state OUT_OF_MEMORY, slurmstepd oom-kill     crashed     host_oom   (host RAM, not CUDA)
    3   no readable log: missing, empty, binary               unparseable (or lost when run.json has no end)
    4   `[graphsweep] blocked:` (builtin workload)            blocked     no_cuda | env_blocked
    5   argparse/Hydra override rejection                     blocked     launch_error | blocked_config
    6   §3.2-3.4 assertion texts, graph-config KeyError       blocked     blocked_config
    7   environment: no attention backend, TE missing         blocked     env_blocked
    8   known API/version breakage (§6.1)                     blocked     api_mismatch
    9   CUDA OOM (allocator, raw, cuBLAS, NCCL calloc)        oom         oom (+ phase, requested size)
    10  capture errors (§5.8, §3.4 replay checks)             blocked     blocked_capture
    11  illegal memory access                                 crashed     illegal_memory_access
    12  NCCL / distributed errors                             crashed     nccl_error
    13  segfault                                              crashed     segfault
    14  other §6.2 transient signatures (ECC, socket, glibc)  crashed     transient:<kind>
    15  `DUE TO TIME LIMIT` or state TIMEOUT                  timeout     hang_timeout (usable when the
                                                                          steady window was complete)
    16  NaN/Inf: `found NaN in`, `grad norm: nan`, lm loss    crashed     nan
        key missing, `Unexpected result nan`
    17  Python exception / non-zero exit without a signature  crashed     python_error | exit_<code>
    18  end marker or exit 0 with iterations                  completed   (graph arm without capture +
                                                              / invalid    replay evidence: invalid)
    19  nothing conclusive (no end, no error, no run.json)    unparseable truncated / incomplete log

A signature found only after the end-of-training marker of a run that exited 0 is teardown noise
(e.g. c10d `Connection reset by peer` as ranks exit) and does not change `completed`.
Transient signatures (§6.2) earn one retry (the submitter asks `find_transient`); when the retry
fails the same way the run is `crashed` with both attempts' evidence in the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

# Infrastructure outcomes: the rule fails so Snakemake retries; never recorded as results.
INFRA_OUTCOMES = ("preempted", "node_fail", "cancelled", "lost")
OUTCOMES = ("completed", "blocked", "oom", "crashed", "timeout", "invalid", "unparseable") + INFRA_OUTCOMES


@dataclass(frozen=True)
class Signature:
    id: str
    needle: bytes  # literal, case-sensitive, anywhere in the line
    outcome: str
    error_class: str
    source: str  # where the text comes from (reference section / file / issue)
    transient: bool = False  # in Bridge's is_flaky_failure list (ref §6.2): one automatic retry
    requires: bytes | None = None  # a second literal the same line must contain
    rank: int = 0  # classification rule number (module docstring table); set by _sig()


def _sig(rank: int, id: str, needle: str, outcome: str, error_class: str, source: str, *,
         transient: bool = False, requires: str | None = None) -> Signature:
    return Signature(id, needle.encode(), outcome, error_class, source, transient,
                     requires.encode() if requires else None, rank)


B, C, O = "blocked", "crashed", "oom"

SIGNATURES: tuple[Signature, ...] = (
    # 2 host OOM (Slurm cgroup): `slurmstepd: error: Detected 1 oom-kill event(s) ...` (older: oom_kill)
    _sig(2, "host_oom_kill", "oom-kill", C, "host_oom", "slurmstepd (ref §5.8 'host OOM oom_kill')"),
    _sig(2, "host_oom_kill_", "oom_kill", C, "host_oom", "slurmstepd (ref §5.8)"),
    # 4 builtin workload (graphsweep/workload.py BLOCKED_LINE, exit 3)
    _sig(4, "gs_no_cuda", "[graphsweep] blocked: CUDA graphs need a CUDA device", B, "no_cuda", "graphsweep/workload.py"),
    _sig(4, "gs_blocked", "[graphsweep] blocked:", B, "env_blocked", "graphsweep/workload.py"),
    # 5 launch: perf-harness argparse (ref §3.2, exit code 2), Hydra overrides (ref §6.1)
    _sig(5, "argparse_impl", "invalid is_cuda_graph_impl_valid value", B, "blocked_config",
         "Bridge scripts/performance/argument_parser.py (ref §3.2)"),
    _sig(5, "argparse_error", "error: argument ", B, "launch_error", "argparse (ref §6.3 step 1)"),
    _sig(5, "argparse_unrecognized", "error: unrecognized arguments:", B, "launch_error", "argparse (ref §6.3 step 1)"),
    _sig(5, "hydra_overrides", "Failed to parse Hydra overrides", B, "blocked_config", "Bridge OverridesError (ref §6.1)"),
    _sig(5, "hydra_overrides_err", "OverridesError", B, "blocked_config", "Bridge (ref §6.1)"),
    # 6 config rejected: Bridge r0.6.0 (ref §3.2)
    _sig(6, "rng_tracker", "Transformer engine's RNG tracker is required for cudagraphs", B, "blocked_config",
         "Bridge models/gpt_provider.py L232-237"),
    _sig(6, "nan_check_full_iteration", "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph",
         B, "blocked_config", "Bridge training/config.py L1364-1369"),
    _sig(6, "local_scoped", 'Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs',
         B, "blocked_config", "Bridge utils/cuda_graph.py::validate_cuda_graph_configuration"),
    _sig(6, "packing_pad", "Offline packing with CUDA graphs requires dataset pad_to_max_length=True.", B,
         "blocked_config", "Bridge training/config.py L1170-1188"),
    _sig(6, "packing_cu_seqlens", "Packed attention CUDA graphs require offline_packing_specs.pad_cu_seqlens=True.", B,
         "blocked_config", "Bridge training/config.py L1170-1188"),
    _sig(6, "delay_wgrad_te", "CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0.", B, "blocked_config",
         "Bridge training/comm_overlap.py L520-557"),
    _sig(6, "delay_wgrad_gaf", "CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion to be enabled.",
         B, "blocked_config", "Bridge training/comm_overlap.py L520-557"),
    _sig(6, "delay_wgrad_bias", "CUDA graph with delay_wgrad_compute does not support attention bias for now.", B,
         "blocked_config", "Bridge training/comm_overlap.py L520-557"),
    _sig(6, "delay_wgrad_ep", "overlap_moe_expert_parallel_comm is required for delay_wgrad_compute", B,
         "blocked_config", "Bridge training/comm_overlap.py"),
    _sig(6, "invalid_impl_value", "Invalid value for cuda_graph_impl: ", B, "blocked_config",
         "Bridge scripts/performance/argument_parser.py"),
    _sig(6, "invalid_scope_value", "Invalid value for cuda_graph_scope: ", B, "blocked_config",
         "Bridge scripts/performance/argument_parser.py"),
    _sig(6, "perf_full_iter_mixed", "full_iteration CUDA graph scope cannot be combined with other scopes.", B,
         "blocked_config", "Bridge scripts/performance/utils/overrides.py L117-160"),
    _sig(6, "perf_full_iter_te", "full_iteration CUDA graph scope cannot use cuda_graph_impl=transformer_engine.", B,
         "blocked_config", "Bridge scripts/performance/utils/overrides.py L117-160"),
    _sig(6, "perf_invalid_scope", "Invalid cuda graph scope: ", B, "blocked_config",
         "Bridge scripts/performance/utils/overrides.py L117-160"),
    # 6 config rejected: MCore 0.19 TransformerConfig.__post_init__ and cuda_graph_config.py (ref §3.3)
    _sig(6, "legacy_with_impl", "Do not use enable_cuda_graph or external_cuda_graph with cuda_graph_impl.", B,
         "blocked_config", "MCore transformer_config.py L2368"),
    _sig(6, "legacy_both", "enable_cuda_graph and external_cuda_graph cannot be enabled at the same time.", B,
         "blocked_config", "MCore transformer_config.py L2371"),
    _sig(6, "scope_and_modules", "cuda_graph_scope and cuda_graph_modules cannot be set together.", B,
         "blocked_config", "MCore transformer_config.py L2388"),
    _sig(6, "full_scope_mixed", "full scope cannot be used with other scopes.", B, "blocked_config",
         "MCore cuda_graph_config.py L40"),
    _sig(6, "multiple_deprecated", "cuda_graph_modules cannot contain multiple deprecated values at the same time", B,
         "blocked_config", "MCore cuda_graph_config.py L98"),
    _sig(6, "modules_full_iter_te", "cuda_graph_modules='full_iteration' cannot be combined with "
         "cuda_graph_impl='transformer_engine'.", B, "blocked_config", "MCore cuda_graph_config.py L108"),
    _sig(6, "invalid_impl", "Invalid cuda graph implementation: ", B, "blocked_config", "MCore transformer_config.py L2450"),
    _sig(6, "invalid_inference_scope", "Invalid inference CUDA graph scope '", B, "blocked_config",
         "MCore transformer_config.py L2456"),
    _sig(6, "modules_not_empty", 'cuda_graph_modules must be empty when cuda_graph_impl="full_iteration".', B,
         "blocked_config", "MCore transformer_config.py L2463"),
    _sig(6, "cpu_offloading", "CUDA graphs not supported with CPU offloading.", B, "blocked_config",
         "MCore transformer_config.py L2468 (ValueError)"),
    _sig(6, "moe_and_router", "must not contain both moe and moe_router.", B, "blocked_config",
         "MCore transformer_config.py L2487 (cuda_graph_modules; <=0.18 cuda_graph_scope)"),
    _sig(6, "preprocess_without_router", "moe_preprocess cuda graph is only supported with moe_router cuda graph.", B,
         "blocked_config", "MCore transformer_config.py L2491"),
    _sig(6, "moe_dense", "moe cuda graph is only supported for MoE.", B, "blocked_config",
         "MCore transformer_config.py L2496"),
    _sig(6, "mlp_all_moe", "mlp cuda graph is only supported for dense layers, but not found in the model.", B,
         "blocked_config", "MCore transformer_config.py L2502"),
    _sig(6, "moe_dropless", "moe cuda graph is only supported with drop-padding MoE.", B, "blocked_config",
         "MCore transformer_config.py L2511"),
    _sig(6, "moe_preprocess_dtoh", "moe_preprocess cuda graph is not supported when there are DtoH copies and "
         "synchronizations in the preprocess step.", B, "blocked_config", "MCore transformer_config.py L2518"),
    _sig(6, "full_recompute", "full recompute is only supported with full iteration CUDA graph.", B, "blocked_config",
         "MCore transformer_config.py L2525"),
    _sig(6, "moe_recompute_router", "moe recompute is not supported with moe_router CUDA graph with: ", B,
         "blocked_config", "MCore transformer_config.py L2535"),
    _sig(6, "attn_dropout_recompute", "attention dropout is not supported with graphed attention recomputation.", B,
         "blocked_config", "MCore transformer_config.py L2550"),
    _sig(6, "hidden_dropout_recompute", "hidden dropout is not supported with graphed MLP/MoE recomputation.", B,
         "blocked_config", "MCore transformer_config.py L2566"),
    _sig(6, "jitter_recompute", "moe_input_jitter_eps is not supported with graphed moe recomputation.", B,
         "blocked_config", "MCore transformer_config.py L2572"),
    _sig(6, "fine_grained_offload", "fine-grained activation offloading is only supported with transformer_engine "
         "CUDA graph implementation", B, "blocked_config", "MCore transformer_config.py L2598-2637"),
    _sig(6, "token_drop_offload", "Token-drop MoE is temporarily not supported with activation offloading.", B,
         "blocked_config", "MCore transformer_config.py L2598-2637"),
    _sig(6, "offload_warmup", "cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained activation "
         "offloading.", B, "blocked_config", "MCore transformer_config.py L2598-2637"),
    _sig(6, "ep_overlap_scope", "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm",
         B, "blocked_config", "MCore transformer_config.py L2744"),
    _sig(6, "delay_wgrad_ep_mcore", "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute",
         B, "blocked_config", "MCore transformer_config.py L2749-2757"),
    _sig(6, "delay_wgrad_te_mcore", "TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph",
         B, "blocked_config", "MCore transformer_config.py L2749-2757"),
    # non-graph recompute/offload checks, seen when sweeping recompute (ref §3.3 "Related")
    _sig(6, "offload_layers", "CPU offloading can be done only for layers less than", B, "blocked_config",
         "MCore model_parallel_config.py"),
    _sig(6, "offload_pp", "Currently there is no support for Pipeline parallelism with CPU offloading", B,
         "blocked_config", "MCore model_parallel_config.py"),
    _sig(6, "offload_recompute", "CPU offloading does not work when activation recomputation is enabled", B,
         "blocked_config", "MCore model_parallel_config.py"),
    _sig(6, "recompute_method", 'Using recompute_granularity: full so recompute_method must be "block" or "uniform"', B,
         "blocked_config", "MCore transformer_config.py L1724-1760"),
    _sig(6, "recompute_num_layers_full", "When using recompute_granularity: full recompute_num_layers must be between 1",
         B, "blocked_config", "MCore transformer_config.py L1724-1760"),
    _sig(6, "recompute_num_layers_sel", "When using recompute_granularity: selective recompute_num_layers must be None.",
         B, "blocked_config", "MCore transformer_config.py L1724-1760"),
    # MCore runtime checks at helper construction (ref §3.4)
    _sig(6, "te_impl_not_enabled", "Option cuda_graph_impl=transformer_engine not enabled.", B, "blocked_config",
         "MCore cuda_graphs.py TECudaGraphHelper.__init__ (0.19 L2098-2107)"),
    _sig(6, "local_impl_not_enabled", "Option cuda_graph_impl=local not enabled.", B, "blocked_config",
         "MCore cuda_graphs.py CudaGraphManager.__init__ L1822-1828"),
    _sig(6, "rng_not_graph_safe", "RNG tracker does not support cudagraphs!", B, "blocked_config",
         "MCore cuda_graphs.py CudaGraphManager.__init__ L1822-1828"),
    # The guard is an AssertionError; the same sentence must not count as a config block when only logged.
    _sig(6, "nccl_graph_register", "Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph "
         "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.", B, "blocked_config",
         "MCore cuda_graphs.py TECudaGraphHelper.__init__ (0.19 L2098-2107; local impl <=0.18 sm<100)", requires="rror"),
    _sig(6, "full_iter_te_old", "full_iteration cuda graph is not supported for cuda_graph_impl=transformer_engine.", B,
         "blocked_config", "MCore <=0.18 TECudaGraphHelper"),
    _sig(6, "full_iter_te_old17", "To use full iteration cuda graph, please use cuda_graph_impl=local instead of "
         "cuda_graph_impl=transformer_engine.", B, "blocked_config", "MCore <=0.17 TransformerConfig"),
    # 7 environment (baseline fails too: ref §6.1 environment/backend, skill case 4)
    _sig(7, "no_te", "CUDA Graphs are not supported without TE.", B, "env_blocked",
         "MCore cuda_graphs.py TECudaGraphHelper.__init__ (0.19 L2098-2107)"),
    _sig(7, "no_attention_backend", "Available backends = {FlashAttention=False, FusedAttention=False, "
         "UnfusedDotProductAttention=False}", B, "env_blocked", "TE attention backend selection (ref §6.1, skill case 4)"),
    # 8 API / version breakage (ref §6.1)
    _sig(8, "is_moe_layer", "object has no attribute 'is_moe_layer'", B, "api_mismatch",
         "Bridge #4583 (local + mlp scope, model build)"),
    _sig(8, "device_pointer_scales", "get_device_pointer_for_data_and_scales()", B, "api_mismatch",
         "Bridge #4844 (full-iteration graphs, nightly MXFP8)", requires="TypeError"),
    _sig(8, "none_copy", "'NoneType' object has no attribute 'copy_'", B, "api_mismatch",
         "MLM PR #6958 (full-iteration input slot None at capture, clone_tensors_in_struct)"),
    # 9 CUDA OOM (ref §5.8); the allocator line carries "Tried to allocate <size>"
    _sig(9, "cuda_oom", "CUDA out of memory", O, "oom", "PyTorch caching allocator OutOfMemoryError (ref §5.8)"),
    _sig(9, "cuda_oom_raw", "CUDA error: out of memory", O, "oom", "raw CUDA OOM outside the allocator (ref §5.8)"),
    _sig(9, "cublas_alloc", "CUBLAS_STATUS_ALLOC_FAILED", O, "oom", "cuBLAS workspace allocation (ref §5.8)"),
    _sig(9, "nccl_calloc", "Failed to CUDA calloc", O, "oom", "NCCL (ref §5.8; verify per container)"),
    # 10 capture errors (ref §5.8 and §3.4 replay checks)
    _sig(10, "capture_not_permitted", "operation not permitted when stream is capturing", B, "blocked_capture",
         "cudaErrorStreamCaptureUnsupported (ref §5.8; MLM #5889, #1598)"),
    _sig(10, "capture_invalidated", "operation failed due to a previous error during capture", B, "blocked_capture",
         "cudaErrorStreamCaptureInvalidated (ref §5.8)"),
    _sig(10, "capture_unjoined", "capturing stream has unjoined work", B, "blocked_capture", "ref §5.8"),
    _sig(10, "capture_legacy", "operation would make the legacy stream depend on a capturing blocking stream", B,
         "blocked_capture", "ref §5.8"),
    _sig(10, "capture_isolation", "cudaErrorStreamCaptureIsolation", B, "blocked_capture", "ref §5.8; Bridge #1688"),
    _sig(10, "captured_event", "cudaErrorCapturedEvent", B, "blocked_capture", "ref §5.8; MLM #6152"),
    _sig(10, "rng_offset", "Offset increment outside graph capture encountered unexpectedly.", B, "blocked_capture",
         "PyTorch RNG (ref §5.8)"),
    _sig(10, "arg_mismatch", "CUDA graph argument mismatch:", B, "blocked_capture",
         "MCore cuda_graphs.py _CudaGraphRunner.replay_graph_capture L1632"),
    _sig(10, "no_matching_runner", "is set to True but no matching cudagraph runners were found", B, "blocked_capture",
         "MCore cuda_graphs.py L1896"),
    _sig(10, "tensor_inputs", "CUDA graph accepts only Tensor inputs.", B, "blocked_capture",
         "MCore transformer_layer.py L1211-1217 / module.py L306 (packed sequences, ref §6.1)"),
    _sig(10, "capture_twice", "CUDA Graph capture has already been finished.", B, "blocked_capture",
         "MCore TECudaGraphHelper._start_capturing"),
    # 11 illegal memory access (ref §5.8, MLM #5474: expandable_segments without NCCL_GRAPH_REGISTER=0)
    _sig(11, "illegal_memory_access", "illegal memory access", C, "illegal_memory_access",
         "CUDA / NCCL WARN Cuda failure (ref §5.8, §6.2)", transient=True),
    # 12 NCCL / distributed (ref §5.8, §6.2)
    _sig(12, "nccl_watchdog", "Watchdog caught collective operation timeout", C, "nccl_error",
         "ProcessGroupNCCL watchdog (ref §5.8, MLM #735)", transient=True),
    _sig(12, "nccl_failed", "Some NCCL operations have failed or timed out.", C, "nccl_error", "ref §5.8, §6.2",
         transient=True),
    _sig(12, "dist_backend", "torch.distributed.DistBackendError", C, "nccl_error", "ref §5.8, §6.2", transient=True),
    _sig(12, "nccl_remote", "ncclRemoteError", C, "nccl_error", "ref §5.8, §6.2", transient=True),
    _sig(12, "nccl_unhandled_cuda", "ncclUnhandledCudaError", C, "nccl_error", "ref §5.8"),
    _sig(12, "cuda_call_failed", "Call to CUDA function failed.", C, "nccl_error", "ref §5.8, §6.2", transient=True),
    # 13 segfault (ref §5.8, MLM #6152: 6th replay segfaults with exitcode -11)
    _sig(13, "segfault", "Segmentation fault", C, "segfault", "ref §5.8, §6.2", transient=True),
    _sig(13, "segfault_encountered", "Segfault encountered", C, "segfault", "ref §5.8, §6.2", transient=True),
    _sig(13, "exitcode_11", "exitcode: -11", C, "segfault", "torchrun elastic `failed (exitcode: -11)`"),
    _sig(13, "exitcode_11_ref", "exitcode -11", C, "segfault", "ref §5.8 `exitcode -11` (MLM #6152)"),
    _sig(13, "exitcode_11b", "exitcode  : -11", C, "segfault", "torchrun ChildFailedError block (ref §5.8)"),
    _sig(13, "sigsegv", "SIGSEGV", C, "segfault", "torchrun signal report"),
    # 14 other transient signatures: Bridge scripts/performance/setup_experiment.py::is_flaky_failure (ref §6.2)
    _sig(14, "dist_network", "torch.distributed.DistNetworkError", C, "transient:network", "ref §6.2", transient=True),
    _sig(14, "server_socket", "The server socket has failed to listen on any local network address.", C,
         "transient:network", "ref §6.2", transient=True),
    _sig(14, "connection_reset", "Connection reset by peer", C, "transient:network", "ref §6.2", transient=True),
    _sig(14, "ecc", "uncorrectable ECC error encountered", C, "transient:ecc", "ref §6.2", transient=True),
    _sig(14, "illegal_instruction", "illegal instruction", C, "transient:cuda_error", "ref §6.2", transient=True),
    _sig(14, "unspecified_launch", "unspecified launch failure", C, "transient:cuda_error", "ref §6.2", transient=True),
    _sig(14, "double_free", "double free or corruption", C, "transient:memory_corruption", "ref §6.2", transient=True),
    _sig(14, "invalid_pointer", "invalid pointer", C, "transient:memory_corruption", "ref §6.2", transient=True),
    _sig(14, "tcache", "malloc(): unaligned tcache chunk detected", C, "transient:memory_corruption", "ref §6.2",
         transient=True),
    _sig(14, "unsorted_chunks", "free(): corrupted unsorted chunks", C, "transient:memory_corruption", "ref §6.2",
         transient=True),
    _sig(14, "glibc", "Fatal glibc error", C, "transient:memory_corruption", "ref §6.2", transient=True),
    _sig(14, "zmq", "zmq.error.ZMQError: Address already in use", C, "transient:port_in_use", "ref §6.2",
         transient=True),
    _sig(14, "hf_hub", "We couldn't connect to 'https://huggingface.co'", C, "transient:hub", "ref §6.2", transient=True),
    _sig(14, "unpack", "Unpack failed: incomplete input", C, "transient:io", "ref §6.2", transient=True),
    _sig(14, "eof_data", "EOFError: No data left in file", C, "transient:io", "ref §6.2", transient=True),
    # Follows every CUDA error (ref §5.8): transient only when nothing more specific explains the failure.
    _sig(14, "cuda_launch_blocking", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1", C, "transient:cuda_error",
         "ref §6.2", transient=True),
    # 15 walltime (ref §5.8 slurmstepd; §6.2 timeout marker)
    _sig(15, "time_limit", "DUE TO TIME LIMIT", "timeout", "hang_timeout", "slurmstepd `*** JOB <id> ON <node> "
         "CANCELLED AT <ts> DUE TO TIME LIMIT ***` (ref §5.8)"),
    # 16 NaN / Inf (ref §5.8 rerun state machine; MLM #5966)
    _sig(16, "found_nan", "found NaN in", C, "nan", "MCore rerun_state_machine (ref §5.8, §6.2)", transient=True),
    _sig(16, "found_inf", "found Inf in", C, "nan", "MCore rerun_state_machine (ref §5.8)"),
    _sig(16, "unexpected_nan", "Unexpected result nan", C, "nan", "MCore rerun_state_machine (ref §5.8)"),
    _sig(16, "unexpected_inf", "Unexpected result inf", C, "nan", "MCore rerun_state_machine (ref §5.8)"),
    _sig(16, "spiky_loss", "Spiky loss", C, "nan", "MCore rerun_state_machine (ref §5.8)"),
)

# Slurm job-end lines other than TIME LIMIT (slurmstepd; not quoted in the reference: verify per site).
SLURM_INFRA = (
    (b"DUE TO PREEMPTION", "preempted"),
    (b"DUE TO NODE FAILURE", "node_fail"),
)

# Cheap literal prefilter: a line is looked at only if it contains one of these. Exceptions carry
# "rror" (AssertionError, ValueError, CUDA error, slurmstepd: error, ...); graph texts carry "raph".
ERROR_ANCHORS: tuple[bytes, ...] = (
    b"rror", b"raph", b"NCCL", b"nccl", b"oom", b"Seg", b"SIG", b"exitcode", b"illegal", b"found NaN", b"found Inf",
    b"Unexpected result", b"Spiky", b"free(", b"double free", b"malloc(", b"invalid pointer", b"socket",
    b"Connection reset", b"CUDA_LAUNCH_BLOCKING", b"DUE TO", b"CANCELLED", b"Unpack failed", b"Available backends",
    b"offload", b"recompute", b"Watchdog", b"ECC", b"launch failure", b"huggingface", b"out of memory", b"CUBLAS",
    b"calloc", b"Call to CUDA", b"[graphsweep]", b"Traceback", b"StopIteration", b"xiting program", b"Pretrain failed",
)

TRANSIENT_NEEDLES: tuple[str, ...] = tuple(s.needle.decode() for s in SIGNATURES if s.transient)


def anchored(sig: Signature) -> bool:
    """True when the prefilter can see this signature's line."""
    texts = [sig.needle] + ([sig.requires] if sig.requires else [])
    return any(a in t for t in texts for a in ERROR_ANCHORS) or sig.rank in (5, 6, 7, 8)  # exception lines: "rror"


INFRA_STATES = {
    "PREEMPTED": "preempted",
    "NODE_FAIL": "node_fail",
    "BOOT_FAIL": "node_fail",
    "CANCELLED": "cancelled",
    "REVOKED": "cancelled",
    "LOST": "lost",
    "UNKNOWN": "lost",
}


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------
@dataclass
class RunSummary:
    outcome: str  # completed | blocked | oom | crashed | timeout | invalid | unparseable | preempted | node_fail | cancelled | lost
    error_class: str | None = None
    phase: str | None = None  # setup | warmup | capture | steady
    signature: str | None = None  # the proving line (text, trimmed)
    signature_line: int | None = None
    signature_file: str | None = None
    reason: str = ""
    oom_request: str | None = None
    n_iterations: int = 0
    steady_first: int | None = None
    steady_last: int | None = None
    steady_n: int = 0
    steady_reason: str = ""
    step_ms_median: float | None = None
    step_ms_mean: float | None = None
    step_ms_p10: float | None = None
    step_ms_p90: float | None = None
    peak_mem_gb: float | None = None  # max mem-max-allocated after capture (whole run for eager), 1e9-byte GB
    peak_mem_before_capture_gb: float | None = None
    capture_seen: bool = False
    replay_seen: bool = False
    capture_s: float | None = None
    graphable_layers: int | None = None
    transient: str | None = None  # the reference §6.2 substring found, when nothing deterministic explains the failure
    # extras
    signature_id: str | None = None  # catalogue id (SIGNATURES)
    signature_source: str | None = None  # where Megatron/PyTorch/Slurm prints it
    arm: str = "eager"
    warmup: int | None = None
    failed_iteration: int | None = None  # the iteration that was running when the run failed
    capture_iteration: int | None = None
    train_iters: int | None = None  # N of "iteration i/N"
    last_iteration: int | None = None
    measurement_usable: bool = False  # the steady window can be compared (completed, or timeout after the window)
    infrastructure: bool = False  # retried by the workflow, never a result
    end_marker: str | None = None
    exit_code: int | None = None
    slurm_state: str | None = None
    attempt: int | None = None
    previous_attempts: list[dict] = field(default_factory=list)
    device: str | None = None
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def summary_to_dict(summary: RunSummary) -> dict:
    """JSON-safe dict (NaN and numpy scalars become None / plain numbers)."""
    import math
    from dataclasses import asdict

    def clean(v: object) -> object:
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if hasattr(v, "item") and not isinstance(v, (str, bytes)):
            v = v.item()  # numpy scalar
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v

    return clean(asdict(summary))  # type: ignore[return-value]


@dataclass
class Hit:
    """One line that matched a catalogue signature, and where the run was when it was printed."""

    sig: Signature
    file: str
    line: int
    text: str
    iteration_before: int | None  # last iteration known finished in this file when the line was printed
    capture_state: str  # none | capturing | captured (this file)
    capture_iteration: int | None
    training_started: bool
    after_end: bool  # printed after the end-of-training marker


@dataclass
class Mark:
    file: str
    line: int
    text: str


@dataclass
class Evidence:
    """What all files of one run say, merged (built by graphsweep.parse)."""

    files: list[str]
    problems: list[str]  # per-file problems (unreadable, empty, binary)
    hits: list[Hit]
    iterations: list[int]  # merged, sorted
    elapsed_ms: list[float]
    memory: dict[int, list[float]]  # iteration -> [alloc, max_alloc, max_reserved] GB, max over ranks
    train_iters: int | None = None
    start_iteration: int = 0
    training_started: bool = False
    capture_iteration: int | None = None  # from markers (first file that has them)
    capture_marker: str | None = None
    capture_s: float | None = None
    graphable_layers: int | None = None
    no_graphable: Mark | None = None
    replay_iteration: int | None = None
    replays: int | None = None
    end_marker: Mark | None = None
    end_data: Mark | None = None
    exit_minutes: Mark | None = None
    sigterm: Mark | None = None
    straggler: Mark | None = None
    slurm_infra: tuple[str, Mark] | None = None
    nan_iteration: tuple[int, Mark] | None = None
    loss_missing: tuple[int, Mark] | None = None
    lm_loss_seen: bool = False
    last_exception: Mark | None = None
    keyerror: Mark | None = None
    srun_exit: Mark | None = None
    ends_mid_line: bool = False
    last_line: Mark | None = None
    recognised_lines: bool = False  # any Megatron line at all (iteration, marker, memory, signature)
    device: str | None = None
    iter_lines_unparsed: int = 0
    superseded: list[str] = field(default_factory=list)  # notes on earlier attempts replaced by a restart


# ---------------------------------------------------------------------------------------------
# Classification
# ---------------------------------------------------------------------------------------------
def _state(info: Mapping) -> str | None:
    st = info.get("state")
    return str(st).split()[0].upper() if st else None


def _fmt_gb(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f} GB"


def _where(h: Hit | Mark) -> str:
    return f"{h.file}:{h.line}"


def _set_sig(s: RunSummary, h: Hit | Mark, sig: Signature | None = None) -> None:
    s.signature, s.signature_line, s.signature_file = h.text, h.line, h.file
    if sig is not None:
        s.signature_id, s.signature_source = sig.id, sig.source


def phase_of(h: Hit, arm: str, warmup: int | None, ev: Evidence) -> tuple[str, int | None]:
    """(phase, failing iteration) of a failure line. The iteration line `i/N` is printed after
    iteration i finished, so the failing one is the last printed + 1; capture is iteration
    warmup+1 (ref §3.1, §3.6), or the capture markers say so."""
    before = h.iteration_before
    if before is None and not h.training_started:
        if ev.iterations:  # e.g. a rank-0 stderr file next to the last rank's stdout: use the run's progress
            before = ev.iterations[-1]
        else:
            return "setup", None
    failing = (before if before is not None else ev.start_iteration) + 1
    if h.capture_state == "capturing":
        return "capture", failing
    if arm == "graph" or h.capture_state != "none":
        cap = warmup + 1 if warmup is not None else (h.capture_iteration or ev.capture_iteration)
        if cap is None:
            return ("steady" if h.capture_state == "captured" else "warmup"), failing
        return ("warmup" if failing < cap else "capture" if failing == cap else "steady"), failing
    first = warmup + 2 if warmup is not None else 2
    return ("warmup" if failing < first else "steady"), failing


def _window(s: RunSummary, ev: Evidence, arm: str, warmup: int | None, min_steady: int) -> None:
    import numpy as np

    from graphsweep import stats

    s.n_iterations = len(ev.iterations)
    s.last_iteration = ev.iterations[-1] if ev.iterations else None
    s.train_iters = ev.train_iters
    if warmup is not None:
        first_allowed = warmup + 2  # skip iterations 1..warmup and the capture iteration warmup+1, both arms
    elif ev.capture_iteration is not None:
        first_allowed = ev.capture_iteration + 1
        s.notes.append(f"warmup unknown: steady window starts after the capture iteration {ev.capture_iteration}")
    else:
        first_allowed = 2
    its = [i for i, e in zip(ev.iterations, ev.elapsed_ms) if e == e]
    ms = [e for e in ev.elapsed_ms if e == e]
    w = stats.steady_window(its, ms, first_allowed, min_steady)
    s.steady_first, s.steady_last, s.steady_n, s.steady_reason = w.first, w.last, w.n, w.reason
    if w.first is not None and w.last is not None:
        x = np.array([e for i, e in zip(its, ms) if w.first <= i <= w.last], dtype=float)
        if len(x):
            s.step_ms_median = float(np.median(x))
            s.step_ms_mean = float(np.mean(x))
            s.step_ms_p10 = float(np.percentile(x, 10))
            s.step_ms_p90 = float(np.percentile(x, 90))
    # memory: peak after capture (graph) or whole run (eager); before capture = iterations <= warmup
    cap = warmup + 1 if warmup is not None else ev.capture_iteration
    s.capture_iteration = cap if arm == "graph" else None
    mx = {i: v[1] for i, v in ev.memory.items() if v[1] == v[1]}
    if mx:
        before = [v for i, v in mx.items() if cap is not None and i < cap]
        s.peak_mem_before_capture_gb = max(before) if before else None
        if arm == "graph":
            after = [v for i, v in mx.items() if cap is not None and i >= cap]
            s.peak_mem_gb = max(after) if after else None
            if not after:
                s.notes.append("no memory line at or after the capture iteration (Megatron reports memory after "
                               "iterations 1-2 only): peak memory after capture unknown")
        else:
            s.peak_mem_gb = max(mx.values())
    s.capture_s = ev.capture_s
    s.graphable_layers = ev.graphable_layers
    s.capture_seen = ev.capture_marker is not None
    if ev.replays is not None or ev.replay_iteration is not None:  # builtin workload says it explicitly
        s.replay_seen = bool(ev.replay_iteration is not None or (ev.replays or 0) > 0)
    elif s.capture_seen and ev.capture_iteration is not None:
        # Megatron prints no replay line: an iteration after the capture iteration ran on the graph
        s.replay_seen = any(i > ev.capture_iteration for i in ev.iterations)


def _pick(hits: Sequence[Hit], ranks: Iterable[int]) -> Hit | None:
    rs = set(ranks)
    cand = [h for h in hits if h.sig.rank in rs]
    return min(cand, key=lambda h: h.sig.rank) if cand else None  # stable: first in file order within a rank


def _transient(hits: Sequence[Hit]) -> Hit | None:
    """The most specific transient signature, unless something deterministic explains the failure."""
    if any(h.sig.rank <= 10 for h in hits) or any(h.sig.id == "time_limit" for h in hits):
        return None
    cand = [h for h in hits if h.sig.transient]
    return min(cand, key=lambda h: h.sig.rank) if cand else None


def classify(ev: Evidence, *, arm: str, warmup: int | None, run_info: Mapping | None, min_steady: int,
             previous: list[dict] | None = None) -> RunSummary:
    """Apply the order in the module docstring. `previous`: earlier attempts with their evidence."""
    info = dict(run_info or {})
    s = RunSummary(outcome="unparseable", arm=arm, warmup=warmup, files=list(ev.files), device=ev.device)
    state = _state(info)
    exit_code = info.get("exit_code")
    s.exit_code = int(exit_code) if isinstance(exit_code, (int, float)) else None
    s.slurm_state = state
    s.attempt = info.get("attempt")
    s.previous_attempts = list(previous or [])
    if ev.end_marker:
        s.end_marker = ev.end_marker.text
    s.notes.extend(ev.superseded)
    if ev.iter_lines_unparsed:
        s.notes.append(f"{ev.iter_lines_unparsed} iteration line(s) without a readable elapsed time (truncated or glued)")
    _window(s, ev, arm, warmup, min_steady)
    exited_ok = s.exit_code in (0, None) and state in (None, "COMPLETED")
    ended = ev.end_marker is not None or ev.end_data is not None
    hits = [h for h in ev.hits if not (h.after_end and exited_ok)]  # teardown noise after a clean end
    noise = [h for h in ev.hits if h.after_end and exited_ok]
    if noise:
        s.notes.append(f"ignored after the end of training: {noise[0].sig.id} at {_where(noise[0])}")

    def fail(outcome: str, error_class: str | None, h: Hit | Mark | None, reason: str, sig: Signature | None = None,
             phase: bool = True) -> RunSummary:
        s.outcome, s.error_class, s.reason = outcome, error_class, reason
        if h is not None:
            _set_sig(s, h, sig if sig is not None else getattr(h, "sig", None))
            if phase and isinstance(h, Hit):
                s.phase, s.failed_iteration = phase_of(h, arm, warmup, ev)
        s.infrastructure = outcome in INFRA_OUTCOMES
        return s

    # 1 infrastructure
    if state in INFRA_STATES:
        out = INFRA_STATES[state]
        mark = ev.slurm_infra[1] if ev.slurm_infra else None
        return fail(out, None, mark, f"Slurm state {info.get('state')}: infrastructure failure, retried (not a result)")
    if ev.slurm_infra:
        out, mark = ev.slurm_infra
        return fail(out, None, mark, f"job ended by Slurm ({mark.text.strip()}): infrastructure failure, retried")
    # 2 host OOM (cgroup), not CUDA OOM
    host = next((h for h in hits if h.sig.error_class == "host_oom"), None)
    if state == "OUT_OF_MEMORY" or host:
        why = "Slurm state OUT_OF_MEMORY" if state == "OUT_OF_MEMORY" else "slurmstepd oom-kill"
        s_ = fail("crashed", "host_oom", host, f"host (CPU) memory exhausted ({why}): not a CUDA OOM; "
                  "raise --mem or lower data-loader workers")
        if host is None:
            s_.phase, s_.failed_iteration = ("setup", None) if not ev.iterations else ("steady", ev.iterations[-1] + 1)
        return s_
    # 3 nothing readable
    if not ev.recognised_lines and (ev.problems or not ev.files):
        why = "; ".join(ev.problems) if ev.problems else "no log files"
        if info and s.exit_code is None and state is None:
            return fail("lost", None, None, f"job left no end state and no readable log ({why}): lost, retried")
        return fail("unparseable", None, None, f"{why}")
    # 4-8 blocked (config, launch, environment, API), keyerror in the graph-config normaliser
    h = _pick(hits, (4, 5, 6, 7, 8))
    if h is None and ev.keyerror is not None:
        return fail("blocked", "blocked_config", ev.keyerror,
                    f"config rejected: unknown CUDA-graph module name ({ev.keyerror.text.strip()}; "
                    "MCore cuda_graph_config.py CudaGraphModule[name] lookup, ref §3.3)")
    if h is not None:
        what = {"no_cuda": "no CUDA device", "launch_error": "launch rejected", "blocked_config": "config rejected",
                "env_blocked": "environment cannot run it", "api_mismatch": "known API/version breakage"}
        return fail("blocked", h.sig.error_class, h, f"{what.get(h.sig.error_class, 'blocked')}: "
                    f"{_after(h.text, h.sig.needle.decode())} ({h.sig.source})")
    # 9 CUDA OOM
    h = _pick(hits, (9,))
    if h is not None:
        fail("oom", "oom", h, "")
        s.oom_request = _oom_request([x.text for x in hits if x.sig.rank == 9])
        at = f"{s.phase}" + (f" (iteration {s.failed_iteration})" if s.failed_iteration else "")
        s.reason = f"CUDA OOM at {at}" + (f" allocating {s.oom_request}" if s.oom_request else "") + \
            f" ({h.sig.source})"
        return s
    # 10 capture errors
    h = _pick(hits, (10,))
    if h is not None:
        fail("blocked", "blocked_capture", h, "")
        s.reason = f"CUDA graph capture failed at {s.phase}" + \
            (f" (iteration {s.failed_iteration})" if s.failed_iteration else "") + \
            f": {_after(h.text, h.sig.needle.decode())} ({h.sig.source})"
        return s
    # 11-14 crashes
    h = _pick(hits, (11, 12, 13, 14))
    if h is not None:
        t = _transient(hits)
        s.transient = t.sig.needle.decode() if t else None
        fail("crashed", h.sig.error_class, h, "")
        at = f"{s.phase}" + (f" (iteration {s.failed_iteration})" if s.failed_iteration else "")
        s.reason = f"crashed at {at}: {h.sig.error_class} ({h.text.strip()[:160]})"
        _retry_note(s)
        return s
    # 15 walltime
    tl = next((h for h in hits if h.sig.id == "time_limit"), None)
    if tl or state == "TIMEOUT" or ev.exit_minutes:
        mark: Hit | Mark | None = tl or ev.exit_minutes
        fail("timeout", "hang_timeout", mark, "")
        graph_ok = arm != "graph" or (s.capture_seen and s.replay_seen)
        s.measurement_usable = s.steady_n >= min_steady and graph_ok
        done = s.last_iteration is not None and s.train_iters is not None and s.last_iteration >= s.train_iters
        if s.measurement_usable:
            s.reason = (f"walltime hit after the measurement window ({s.steady_n} steady iterations "
                        f"{s.steady_first}-{s.steady_last}): steady statistics are usable")
            if done:
                s.reason += "; the run hung after its last iteration (known end-of-run hang with full-iteration " \
                            "graphs, MLM #2130 / Bridge #1185)"
            s.phase = "steady"
        else:
            s.reason = (f"walltime hit before the measurement window was complete ({s.steady_n} steady iterations, "
                        f"{min_steady} needed; last iteration {s.last_iteration}): retried with more time")
            if arm == "graph" and s.steady_n >= min_steady and not graph_ok:
                s.reason += "; no capture/replay evidence either"
            s.phase = "setup" if not ev.iterations else s.phase
        return s
    # 16 NaN / Inf
    h = _pick(hits, (16,))
    nan_mark: Hit | Mark | None = h
    if nan_mark is None and ev.nan_iteration:
        nan_mark = ev.nan_iteration[1]
    if nan_mark is None and ev.loss_missing and ev.lm_loss_seen:
        nan_mark = ev.loss_missing[1]
    if nan_mark is not None:
        fail("crashed", "nan", nan_mark, "")
        if isinstance(nan_mark, Hit):
            t = _transient(hits)
            s.transient = t.sig.needle.decode() if t else None
        else:
            it = (ev.nan_iteration or ev.loss_missing)[0]  # type: ignore[index]
            s.failed_iteration = it
            s.phase = "steady" if s.steady_first is not None and it >= s.steady_first else \
                ("capture" if arm == "graph" and s.capture_iteration == it else "warmup")
        s.reason = f"NaN/Inf in training at {s.phase}" + \
            (f" (iteration {s.failed_iteration})" if s.failed_iteration else "") + f": {nan_mark.text.strip()[:160]}"
        _retry_note(s)
        return s
    # 17 failure without a known signature
    failed = (s.exit_code not in (0, None)) or state == "FAILED" or (not ended and ev.last_exception is not None) \
        or ev.straggler is not None or ev.sigterm is not None or (not ended and ev.srun_exit is not None)
    if failed:
        if ev.sigterm and state is None and s.exit_code in (None, 143, -15):
            return fail("cancelled", None, ev.sigterm, "received SIGTERM (cancelled or preempted): retried")
        mark = ev.straggler or ev.last_exception or ev.srun_exit or ev.last_line
        cls = "straggler_exit" if ev.straggler else "python_error" if ev.last_exception else \
            (f"exit_{s.exit_code}" if s.exit_code not in (None, 0) else "unknown")
        fail("crashed", cls, mark, "")
        if ev.iterations:
            s.failed_iteration = ev.iterations[-1] + 1
        s.phase = "setup" if not ev.iterations and not ev.training_started else _phase_from_iteration(
            s.failed_iteration or 1, arm, warmup, ev)
        s.reason = f"crashed at {s.phase}" + (f" (iteration {s.failed_iteration})" if s.failed_iteration else "") + \
            (f", exit code {s.exit_code}" if s.exit_code not in (None, 0) else "") + \
            (f": {mark.text.strip()[:200]}" if mark else ": no error line")
        if ended:
            s.reason += " (after the end-of-training marker: the steady window itself is complete)"
            s.measurement_usable = s.steady_n >= min_steady
        return s
    # 18 completed / invalid
    if ended or ((s.exit_code == 0 or state == "COMPLETED") and ev.iterations):
        s.outcome = "completed"
        end = ev.end_marker or ev.end_data
        if end is not None:
            _set_sig(s, end)
        if not ev.iterations:
            s.outcome, s.reason = "unparseable", "the run ended normally but printed no iteration lines " \
                "(logger.log_interval? wrong file?)"
            return s
        if arm == "graph" and not (s.capture_seen and s.replay_seen):
            s.outcome, s.error_class = "invalid", ("no_capture" if not s.capture_seen else "no_replay")
            if ev.no_graphable is not None:
                _set_sig(s, ev.no_graphable)
                s.reason = f"graph arm completed but captured nothing: {ev.no_graphable.text.strip()}"
            elif not s.capture_seen:
                s.reason = "graph arm completed without any CUDA-graph capture line (TE `Time spent in CUDA Graphs " \
                           "capture`, full-iteration `CUDA graph capture done for training!!!`, local `> built N " \
                           "cuda graph(s)`): not a graph measurement"
            else:
                s.reason = f"graph arm captured (iteration {ev.capture_iteration}) but no iteration ran after the " \
                           "capture: no evidence of replay"
            return s
        if arm == "eager" and s.capture_seen:
            s.outcome, s.error_class = "invalid", "graph_in_eager"
            s.reason = f"eager arm shows CUDA-graph capture ({ev.capture_marker}): not an eager baseline"
            return s
        s.measurement_usable = s.steady_n >= min_steady
        s.reason = f"completed {s.n_iterations} iterations; steady {s.steady_reason}"
        if arm == "graph":
            s.reason += f"; captured at iteration {ev.capture_iteration}" + \
                (f" in {s.capture_s:.2f} s" if s.capture_s is not None else "")
        if ev.end_data is not None and ev.end_marker is None:
            s.reason += " (data exhausted)"
        _retry_note(s)
        return s
    # 19 nothing conclusive
    if info and s.exit_code is None and state is None:
        return fail("lost", None, ev.last_line, "job left no end state, no end marker and no error: lost, retried",
                    phase=False)
    last = ev.last_line
    if ev.ends_mid_line and last is not None:
        s.reason = f"log ends mid-line at {_where(last)} after iteration {s.last_iteration} of {s.train_iters}, " \
                   "with no end-of-training marker and no error: truncated log"
        _set_sig(s, last)
    elif not ev.recognised_lines:
        s.reason = "no Megatron log lines found (no iteration, setup, capture or error line)"
    else:
        s.reason = f"no end-of-training marker and no error after iteration {s.last_iteration}" + \
                   (f" of {s.train_iters}" if s.train_iters else "") + \
                   ": incomplete log (still running, or killed without a trace); give run.json for the job state"
        if last is not None:
            _set_sig(s, last)
    return s


def _phase_from_iteration(failing: int, arm: str, warmup: int | None, ev: Evidence) -> str:
    cap = warmup + 1 if warmup is not None else ev.capture_iteration
    if arm == "graph" and cap is not None:
        return "warmup" if failing < cap else "capture" if failing == cap else "steady"
    first = warmup + 2 if warmup is not None else 2
    return "warmup" if failing < first else "steady"


def _after(text: str, needle: str) -> str:
    """The proving line from the needle on (drops srun/rank prefixes and the exception name)."""
    i = text.find(needle)
    return text[i:].strip() if i >= 0 else text.strip()


def _oom_request(texts: Sequence[str]) -> str | None:
    import re

    for t in texts:
        m = re.search(r"Tried to allocate ([\d.]+ ?[KMGT]?i?B)", t)
        if m:
            return m.group(1)
    return None


def _retry_note(s: RunSummary) -> None:
    prev = [p for p in s.previous_attempts if p.get("signature")]
    if not prev:
        if s.transient and s.outcome != "completed":
            s.reason += f" [transient signature '{s.transient}': one automatic retry applies]"
        return
    p = prev[-1]
    where = f" at {p['file']}:{p['line']}" if p.get("line") else f" ({p.get('log')})"
    if s.outcome == "completed":
        s.reason += f" [retried once after transient '{p['signature']}'{where}]"
    elif s.transient and s.transient == p["signature"]:
        s.reason += f" [failed the same way twice: attempt 1 '{p['signature']}'{where}; attempt 2 " \
                    f"{s.signature_file}:{s.signature_line}]"
    else:
        s.reason += f" [previous attempt failed with transient '{p['signature']}'{where}]"
