"""Fine-grained activation offloading and GTP under CUDA graphs: Megatron Core's TransformerConfig checks, per release.

Core 0.17.1 checks none of these with graphs (its offloading block, transformer_config.py L1448-1470, knows no graph
impl); core_v0.18.0/0.18.2 have the first set (L2351-2372); the 0.19.2 wheel (transformer_config.py identical to
core_r0.19.0's) adds the local-impl rules and GTP (L2575-2642). Each rule's source names the lines per release; the
messages are Megatron's, per release where they differ. tests/constraints/test_preflight_releases.py holds them against
each release's own TransformerConfig.
"""

from __future__ import annotations

from graphsweep.constraints.graph import Ctx, as_list, number
from graphsweep.constraints.rules import rule

# MCore 0.19.2 transformer_config.py L2599: the offload modules the local impl supports
LOCAL_OFFLOAD_MODULES = ("expert_fc1", "moe_act", "fused_group_mlp")


def _offloading(c: Ctx) -> bool:
    """Fine-grained activation offloading with graphs, on a Core that checks it (>= 0.18; 0.17.1 has no such check)."""
    return c.g.graphs_on and c.flag("model.fine_grained_activation_offloading") and not c.core_before((0, 18))


def _offload_modules(c: Ctx) -> set[str]:
    return set(as_list(c.get("model.offload_modules")) or [])


@rule("fine_grained_offload_local_modules",
      "MCore 0.19.2 transformer_config.py L2598-2606 (core_r0.19.0 L2603); not in core_v0.18.2 (its L2352-2357 "
      "refuses every local offload, fine_grained_offload_impl)",
      "fine-grained activation offloading with cuda_graph_impl=local offloads only expert_fc1, moe_act, fused_group_mlp",
      needles=("fine-grained activation offloading with cuda_graph_impl='local' only supports offload_modules",))
def _local_modules(c: Ctx) -> str | None:
    if not (_offloading(c) and c.g.effective == "local") or c.core_before((0, 19)):
        return None
    unsupported = _offload_modules(c) - set(LOCAL_OFFLOAD_MODULES)
    if unsupported:
        return ("fine-grained activation offloading with cuda_graph_impl='local' only supports offload_modules "
                f"'expert_fc1', 'moe_act', and 'fused_group_mlp'. Unsupported offload_modules: {sorted(unsupported)}.")
    return None


@rule("fine_grained_offload_local_whole_layer",
      "MCore 0.19.2 transformer_config.py L2607-2610 (core_r0.19.0 L2609); not in core_v0.18.2",
      "fine-grained activation offloading with cuda_graph_impl=local cannot capture whole layers (empty modules)",
      needles=("fine-grained activation offloading with cuda_graph_impl='local' is not supported with whole-layer "
               "CUDA graph capture.",))
def _local_whole_layer(c: Ctx) -> str | None:
    if not (_offloading(c) and c.g.effective == "local") or c.core_before((0, 19)):
        return None
    if (_offload_modules(c) - set(LOCAL_OFFLOAD_MODULES)) or c.g.modules:
        return None  # the module rule fires first (L2601), or modules are named
    return ("fine-grained activation offloading with cuda_graph_impl='local' is not supported with whole-layer "
            "CUDA graph capture.")


@rule("fine_grained_offload_impl",
      "MCore 0.19.2 transformer_config.py L2611-2626 (core_r0.19.0 L2621); core_v0.18.0/0.18.2 L2352-2357 (every "
      "local per-layer graph refused)",
      "fine-grained activation offloading needs transformer_engine or full_iteration graphs (0.19: or local graphs "
      "of expert_fc1/moe_act/fused_group_mlp without the moe module)",
      needles=("fine-grained activation offloading is only supported with transformer_engine CUDA graph "
               "implementation",))
def _offload_impl(c: Ctx) -> str | None:
    if not _offloading(c) or c.g.effective in ("transformer_engine", "full_iteration"):
        return None
    if c.core_before((0, 19)):  # core_v0.18.2 L2352-2357
        return ("fine-grained activation offloading is only supported with transformer_engine CUDA graph "
                "implementation or local CUDA graph implementation with full_iteration scope.")
    mods = _offload_modules(c)
    if (mods - set(LOCAL_OFFLOAD_MODULES)) or not c.g.modules:
        return None  # one of the two local rules above fires first
    if mods and "moe" not in c.g.modules:
        return None  # local partial MoE offload (L2611-2616)
    return ("fine-grained activation offloading is only supported with transformer_engine CUDA graph "
            "implementation or local CUDA graph implementation with partial MoE offload. Local partial CUDA graphs "
            "are supported only for expert_fc1, moe_act, or fused_group_mlp offload when the full MoE module is not "
            "captured.")


@rule("token_drop_offload", "MCore 0.19.2 transformer_config.py L2627-2629; core_v0.18.0/0.18.2 L2358-2359",
      "no moe module in the graph with fine-grained activation offloading",
      needles=("Token-drop MoE is temporarily not supported with activation offloading.",))
def _token_drop(c: Ctx) -> str | None:
    if _offloading(c) and c.g.effective in ("transformer_engine", "full_iteration", "local") and "moe" in c.g.modules:
        if _offload_impl(c) or _local_modules(c) or _local_whole_layer(c):
            return None  # an earlier assertion of the same block fires first
        return "Token-drop MoE is temporarily not supported with activation offloading."
    return None


@rule("fine_grained_offload_warmup",
      "MCore 0.19.2 transformer_config.py L2630-2633 (under fine_grained_activation_offloading L2596, graphs on L2465), "
      "core_v0.18.0/0.18.2 L2360-2363; at model build 0.19.2 transformer_layer.py L1510-1512 (core_r0.19.0 L1500, "
      "offloaded modules inside the graph); not in core_v0.17.1",
      "fine-grained activation offloading with CUDA graphs needs cuda_graph_warmup_steps > 0",
      needles=("cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained activation offloading.",
               "Fine-grained activation offloading needs cuda_graph_warmup_steps > 0."))
def _offload_warmup(c: Ctx) -> str | None:
    # MCore's default cuda_graph_warmup_steps is 3; graphsweep always sets it from the spec's warmup
    if not _offloading(c) or _offload_impl(c) or _local_modules(c) or _local_whole_layer(c) or _token_drop(c):
        return None
    if (number(c.get("model.cuda_graph_warmup_steps"), 3.0) or 0) <= 0:
        return "cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained activation offloading."
    return None


@rule("fine_grained_offload_max_inflight",
      "MCore 0.19.2 transformer_config.py L2634-2642 (core_r0.19.0 L2639); core_v0.18.0/0.18.2 L2364-2372; the field "
      "defaults to None (0.19.2 L1286)",
      "full-iteration graphs with fine-grained activation offloading need fine_grained_offloading_max_inflight_offloads >= 0",
      needles=("fine_grained_offloading_max_inflight_offloads must be a non-negative integer when using fine-grained "
               "activation offloading with full-iteration CUDA graphs",))
def _max_inflight(c: Ctx) -> str | None:
    if not _offloading(c) or c.g.effective != "full_iteration" or _token_drop(c) or _offload_warmup(c):
        return None
    n = number(c.get("model.fine_grained_offloading_max_inflight_offloads"))
    if n is None or n < 0:
        return ("fine_grained_offloading_max_inflight_offloads must be a non-negative integer when using fine-grained "
                "activation offloading with full-iteration CUDA graphs")
    return None


@rule("gtp_local_graph_shared_experts_recompute",
      "MCore 0.19.2 transformer_config.py L2575-2594 (core_r0.19.0 L2588; GTP arrived after 0.18.2, MLM PR #4967)",
      "GTP weight remat + local graphs that capture shared experts cannot recompute shared_experts under fp8/fp4",
      needles=("GTP + local CUDA graphs that capture shared_experts",))
def _gtp_shared_experts(c: Ctx) -> str | None:
    if not c.g.graphs_on or c.g.effective != "local" or c.core_before((0, 19)):
        return None
    if (number(c.get("model.gtp_weight_remat_size"), 1.0) or 1.0) <= 1:
        return None
    if c.get("model.recompute_granularity") != "selective" or "shared_experts" not in (
            as_list(c.get("model.recompute_modules")) or []):
        return None
    if c.get("model.fp8") is None and c.get("model.fp4") is None:
        return None
    if c.get("model.moe_shared_expert_intermediate_size") is None or c.flag("model.moe_shared_expert_overlap"):
        return None
    if c.g.modules and not ({"moe", "moe_router"} & set(c.g.modules)):
        return None  # neither the whole layer nor the MoE part is captured
    return ("GTP + local CUDA graphs that capture shared_experts (moe_router/moe scope) cannot recompute it under "
            "fp8/fp4: te_checkpoint requires .backward(), but the local fwd-graph warmup uses .grad(). Drop "
            "'shared_experts' from --recompute-modules (GTP-shard + offload instead), or use --cuda-graph-impl "
            "full_iteration.")
