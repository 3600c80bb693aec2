"""Constraints Megatron enforces that graphsweep does not predict before a job: known by the text a run prints.

A run that prints one of these is blocked (config rejected, or the launch refused), with the constraint's id and
source; preflight has no predicate for them (yet). Texts as docs/megatron-facts.md §3.2-3.4 lists them.
"""

from __future__ import annotations

from graphsweep.constraints.model import CAPTURE, CONFIG, LAUNCH, NEVER, Constraint


def _c(id: str, needle: str, source: str, summary: str, at: str = CONFIG, frame: str | None = None) -> Constraint:
    return Constraint(id, summary, source, None, (needle,), at, frame=frame)


# A spec that cannot become one fair command for a run (GPU layout, recipe name): found while planning
UNLAUNCHABLE = Constraint("unlaunchable", "the run's settings make no valid launch (layout, recipe, owned keys)",
                          "graphsweep", None, (), NEVER)

# A run that needs a CUDA device (a graph arm; every arm of a workload that trains on CUDA only) whose job would run
# on a machine without one (the local executor on a CPU): blocked at plan time (workloads/base.py no_cuda_here),
# 0 GPU-seconds; the builtin's eager arm runs on the CPU
NO_CUDA = Constraint(
    "no_cuda_here", "the run needs a CUDA device, and the executor runs its jobs on a machine without one",
    "graphsweep: plan time, /proc/driver/nvidia/version missing or CUDA_VISIBLE_DEVICES empty", None, (), NEVER,
    advice="what the graphs measure on a GPU: the committed H200 report of the builtin sweep, "
           "`results/examples/h200-builtin/report.html` in the graphsweep repository")

# `preflight: megatron`: Bridge's own validator refused a run (graphsweep/workloads/bridge_check.py), by outcome
BRIDGE_VALIDATOR = {
    outcome: Constraint(f"bridge_{outcome}", summary, "Megatron Bridge runtime_config_update (preflight: megatron)",
                        None, (), NEVER)
    for outcome, summary in (("rejected", "Bridge's config validation raised"),
                             ("override_error", "an override names a key this Bridge's config does not have"),
                             ("recipe_error", "the recipe could not be built where preflight ran"))
}

RUNTIME_ONLY: tuple[Constraint, ...] = (
    UNLAUNCHABLE,
    NO_CUDA,
    *BRIDGE_VALIDATOR.values(),
    _c("perf_harness_impl_choice", "invalid is_cuda_graph_impl_valid value",
       "Bridge scripts/performance/argument_parser.py (docs/megatron-facts.md §3.2)", "the perf harness knows none, local, transformer_engine",
       LAUNCH),
    _c("legacy_switch_with_impl", "Do not use enable_cuda_graph or external_cuda_graph with cuda_graph_impl.",
       "MCore transformer_config.py L2368", "the deprecated switches cannot be combined with cuda_graph_impl"),
    _c("legacy_switches_both", "enable_cuda_graph and external_cuda_graph cannot be enabled at the same time.",
       "MCore transformer_config.py L2371", "only one of the deprecated switches"),
    _c("deprecated_scopes_multiple", "cuda_graph_modules cannot contain multiple deprecated values at the same time",
       "MCore cuda_graph_config.py L98", "one deprecated scope name at a time"),
    _c("inference_scope_invalid", "Invalid inference CUDA graph scope '", "MCore transformer_config.py L2456",
       "inference graph scopes are their own set"),
    _c("attn_dropout_graphed_recompute", "attention dropout is not supported with graphed attention recomputation.",
       "MCore transformer_config.py L2550", "graphed attention recompute needs attention_dropout 0"),
    _c("hidden_dropout_graphed_recompute", "hidden dropout is not supported with graphed MLP/MoE recomputation.",
       "MCore transformer_config.py L2566", "graphed MLP/MoE recompute needs hidden_dropout 0"),
    _c("jitter_graphed_moe_recompute", "moe_input_jitter_eps is not supported with graphed moe recomputation.",
       "MCore transformer_config.py L2572", "graphed MoE recompute cannot jitter inputs"),
    _c("offload_layers", "CPU offloading can be done only for layers less than", "MCore model_parallel_config.py",
       "CPU offloading covers fewer layers than the model has"),
    _c("offload_pipeline", "Currently there is no support for Pipeline parallelism with CPU offloading",
       "MCore model_parallel_config.py", "no CPU offloading with pipeline parallelism"),
    _c("offload_recompute", "CPU offloading does not work when activation recomputation is enabled",
       "MCore model_parallel_config.py", "no CPU offloading with activation recompute"),
    _c("recompute_method_full", 'Using recompute_granularity: full so recompute_method must be "block" or "uniform"',
       "MCore transformer_config.py L1724-1760", "full recompute needs a recompute method"),
    _c("recompute_num_layers_full", "When using recompute_granularity: full recompute_num_layers must be between 1",
       "MCore transformer_config.py L1724-1760", "full recompute needs a layer count"),
    _c("recompute_num_layers_selective", "When using recompute_granularity: selective recompute_num_layers must be None.",
       "MCore transformer_config.py L1724-1760", "selective recompute takes no layer count"),
    _c("te_impl_not_enabled", "Option cuda_graph_impl=transformer_engine not enabled.",
       "MCore cuda_graphs.py TECudaGraphHelper.__init__ (0.19 L2098-2107)", "the TE graph helper needs the TE impl"),
    _c("local_impl_not_enabled", "Option cuda_graph_impl=local not enabled.",
       "MCore cuda_graphs.py CudaGraphManager.__init__ L1822-1828", "the local graph manager needs the local impl"),
    _c("rng_tracker_not_graph_safe", "RNG tracker does not support cudagraphs!",
       "MCore cuda_graphs.py CudaGraphManager.__init__ L1822-1826 (local impl)", "the RNG tracker must be graph-safe"),
    # MCore main (0.20.0, MLM PR #6643) transformer/cuda_graphs.py _get_cuda_graph_stream L146, when the local runners'
    # stream pool is built (absent in core_r0.19.0). PyTorch's bounded stream pool handed out one stream twice;
    # nothing in a config predicts it (the CUDA_DEVICE_MAX_CONNECTIONS warning L138-141 printed first is advice only)
    # MCore main (d98e8a64dd, MLM PR #6535) tensor_parallel/gtp_symmetric_memory.py L173 RegisteredLIFOPool.alloc: the
    # GTP reduce-scatter's registered buffers ran out inside a capture (`[GTP] RegisteredLIFOPool exhausted during
    # CUDA-graph capture (group=..., numel=..., dtype=...): likely the warmup depth or RS concurrency changed between
    # warmup and capture -- run more warmup iters.`); absent in core_r0.19.0
    _c("gtp_pool_exhausted_at_capture", "RegisteredLIFOPool exhausted during CUDA-graph capture",
       "MCore main tensor_parallel/gtp_symmetric_memory.py L173 (MLM PR #6535)",
       "GTP's registered buffer pool must be warmed before capture (more warmup iterations)", CAPTURE),
    # a full-iteration graph captures the pipeline's point-to-point sends and receives (MCore 0.19.2
    # pipeline_parallel/p2p_communication.py L411-413 `req.wait()` in P2PCommunicator._communicate): torch before 2.7
    # returns no Work for an isend/irecv inside a capture (pytorch #133984; fixed by pytorch PR #148462, torch 2.7)
    _c("p2p_in_capture_before_torch_2_7", "'NoneType' object has no attribute 'wait'",
       "MCore 0.19.2 pipeline_parallel/p2p_communication.py L411-413; pytorch #133984, PR #148462 (torch 2.7)",
       "pipeline-parallel point-to-point inside a full-iteration capture needs torch >= 2.7", CAPTURE,
       frame="_communicate"),
    # TE refuses a module that holds hooks (TE 2.20.2 pytorch/graph.py L386-401 make_graphed_callables; torch's own
    # cuda/graphs.py L391 the same): Megatron-FSDP's module hooks under per-layer TE graphs (field row 23)
    _c("te_graph_module_hooks", "Modules must not have hooks registered at the time they are passed.",
       "TE 2.20.2 pytorch/graph.py L386-401 make_graphed_callables; torch 2.11 cuda/graphs.py L391",
       "transformer_engine graphs take no module with hooks registered (Megatron-FSDP's)", CAPTURE),
    _c("cuda_graph_stream_aliasing", "CUDA graph stream pool contains aliased streams",
       "MCore main 0.20.0 transformer/cuda_graphs.py L146 (MLM PR #6643)",
       "the local graph runners need distinct CUDA streams", CAPTURE),
)
