"""What fails when the graph is built or captured, not when the config is read: preflight for it (issue 36 item 4).

Megatron accepts each of these configurations at config time (Bridge 0.6.2's runtime_config_update, Core 0.19.2's
TransformerConfig) and the run then fails when the model is built, at its first forward, inside the capture or at the
first replay. Each rule says where, with Megatron's (or torch's) own text as the needle a run prints, so a cell blocked
here and a run that hit the failure carry one id. Sources: the Megatron Core 0.19.2 and Megatron Bridge 0.6.2 wheels,
Transformer Engine's repository at its tags, torch 2.11; Bridge main (0.7.0) where a rule is Bridge main's only.
"""

from __future__ import annotations

import math

from graphsweep.constraints.graph import Ctx, as_list, number, version_tuple
from graphsweep.constraints.model import CAPTURE, CONFIG, Constraint
from graphsweep.constraints.rules import PREFLIGHT, rule


def _te_whole_layer(c: Ctx) -> bool:
    """Transformer Engine graphs of whole layers: cuda_graph_modules empty (MCore: the whole layer is captured)."""
    return c.g.effective == "transformer_engine" and c.g.graphs_on and not c.g.modules


@rule("te_whole_layer_ep_overlap",
      "MCore 0.19.2 transformer/transformer_layer.py L1255-1265 _te_cuda_graph_replay, at the first replay of a "
      "whole-layer TE graph (the assert's string is continued with a backslash: Megatron prints `EP overlap must be`, "
      "17 spaces, `disabled when ...`); transformer_config.py L2738-2746 checks only the moe and mlp modules",
      "whole-layer transformer_engine graphs (cuda_graph_modules=[]) cannot overlap the MoE expert-parallel "
      "all-to-all (overlap_moe_expert_parallel_comm)",
      at=CAPTURE, needles=("disabled when CUDA graph captures the whole MLP/MoE part.",), requires="EP overlap must be")
def _whole_layer_ep_overlap(c: Ctx) -> str | None:
    if _te_whole_layer(c) and c.flag("comm_overlap.overlap_moe_expert_parallel_comm",
                                     "model.overlap_moe_expert_parallel_comm"):
        return "EP overlap must be disabled when CUDA graph captures the whole MLP/MoE part."
    return None


# MCore 0.19.2 transformer_layer.py L1494-1503: the offloaded modules inside a TE graph
_ATTN_OFFLOAD = ("core_attn", "attn_proj", "qkv_linear")


@rule("te_graph_offload_versions",
      "MCore 0.19.2 transformer/transformer_layer.py L1494-1512 (TransformerLayer._set_offload_modules, when the "
      "model is built)", "fine-grained activation offloading of modules inside a TE graph needs torch >= 2.9 and "
      "Transformer Engine >= 2.14",
      needles=("Offloading modules captured in cuda graph requires torch>=2.9.0.",
               "Offloading modules captured in cuda graph requires TE>=2.14.0."))
def _offload_versions(c: Ctx) -> str | None:
    if not (c.g.graphs_on and c.flag("model.fine_grained_activation_offloading")) or c.core_before((0, 19)):
        return None
    offloaded = set(as_list(c.get("model.offload_modules")) or [])
    modules = set(c.g.modules)
    # attn_norm is never offloaded with an attn graph (L1460-1467); mlp_norm only when attn and mlp are both captured
    inside = ("attn" in modules and offloaded & set(_ATTN_OFFLOAD)) or (
        {"attn", "mlp"} <= modules and "mlp_norm" in offloaded)
    if not inside:
        return None
    if c.torch_version and version_tuple(c.torch_version) < (2, 9):
        return "Offloading modules captured in cuda graph requires torch>=2.9.0."
    if c.te_version and version_tuple(c.te_version) < (2, 14):
        return "Offloading modules captured in cuda graph requires TE>=2.14.0."
    return None


@rule("optimizer_graph_grad_norm_skip",
      "MCore 0.19.2 optimizer/optimizer.py L1923-1927 ChainedOptimizer.step (`math.isfinite(grad_norm_skip_threshold) "
      "and grad_norm > grad_norm_skip_threshold`: the norm is a CUDA tensor, its truth a host sync) inside the "
      "optimizer graph capture (optimizer_cuda_graph.py L32-46); MLM #5889 (the default inf failed the same way until "
      "the isfinite short circuit, MLM PR #5857); not checked at config time",
      "an optimizer CUDA graph cannot check a finite grad_norm_skip_threshold (a host sync inside the capture)",
      at=CAPTURE, needles=("operation not permitted when stream is capturing",), frame="step")
def _optimizer_graph_skip(c: Ctx) -> str | None:
    threshold = number(c.get("optimizer.grad_norm_skip_threshold"))
    if c.flag("optimizer.optimizer_cuda_graph") and threshold is not None and math.isfinite(threshold):
        return ("optimizer.optimizer_cuda_graph with a finite optimizer.grad_norm_skip_threshold: ChainedOptimizer.step() "
                "compares the gradient norm, a CUDA tensor, with it inside the optimizer graph capture "
                "(optimizer.py L1923-1927), a host sync that fails with 'CUDA error: operation not permitted when "
                "stream is capturing' (MLM #5889); leave the threshold at its default, inf")
    return None


@rule("optimizer_graph_cpu_offload",
      "torch 2.11 torch/optim/optimizer.py L476-483 Optimizer._cuda_graph_capture_health_check; MCore 0.19.2 "
      "optimizer/__init__.py L502-529 (optimizer_cpu_offload builds a HybridDeviceOptimizer whose CPU optimizer is "
      "torch.optim.AdamW, L11, without capturable; only the GPU Adam gets capturable=optimizer_cuda_graph, L551) and "
      "optimizer_cuda_graph.py L32-46 (the capture of optimizer.step())",
      "the optimizer CUDA graph cannot capture a CPU-offloaded optimizer (torch's AdamW is not capturable)",
      at=CAPTURE, needles=("but param_groups' capturable is False.",))
def _optimizer_graph_offload(c: Ctx) -> str | None:
    if c.flag("optimizer.optimizer_cuda_graph") and c.flag("optimizer.optimizer_cpu_offload"):
        return ("Attempting CUDA graph capture of step() for an instance of AdamW but param_groups' capturable is "
                "False.")
    return None


def _graph_holds_dispatcher(c: Ctx) -> bool:
    """The MoE token dispatcher runs inside a graph: a full iteration, a whole layer, or the moe module."""
    return c.g.graphs_on and (c.g.effective == "full_iteration" or not c.g.modules or "moe" in c.g.modules)


@rule("ncclep_zero_copy_warmup",
      "MCore 0.19.2 transformer/moe/token_dispatcher.py L1625-1637 _NCCLEPManager: the zero-copy symmetric buffers are "
      "allocated at the dispatcher's first call, asserted outside a capture; with cuda_graph_warmup_steps=0 the first "
      "call is captured", "ncclep zero-copy dispatch inside a graph needs cuda_graph_warmup_steps > 0",
      at=CAPTURE, needles=("zero-copy symm buffers must be allocated before CUDA-graph capture",))
def _ncclep_zero_copy(c: Ctx) -> str | None:
    if c.core_before((0, 19)) or not _graph_holds_dispatcher(c):
        return None
    ncclep = str(c.get("model.moe_token_dispatcher_type", "allgather")) == "flex" and str(
        c.get("model.moe_flex_dispatcher_backend", "deepep")) == "ncclep"
    warmup = number(c.get("model.cuda_graph_warmup_steps"), 3.0)  # MCore's default is 3
    if ncclep and c.flag("model.moe_ncclep_zero_copy") and warmup is not None and warmup <= 0:
        return "zero-copy symm buffers must be allocated before CUDA-graph capture"
    return None


# MCore 0.19.2 transformer_config.py L546-560: these recompute with normal checkpointing (tensor_parallel/random.py
# CheckpointFunction.backward L627-631 refuses .grad()); moe_act, layernorm, mla_up_proj and gdn_norm_out discard the
# output instead and are exempt while a graph is captured (L778-782). The graph module each sits in.
_CHECKPOINTED = {"core_attn": "attn", "mlp": "mlp", "moe": "moe", "shared_experts": "moe"}


@rule("te_graph_recompute_before_te_2_12",
      "MCore 0.19.2 tensor_parallel/random.py L627-631 (CheckpointFunction.backward: `Checkpointing is not compatible "
      "with .grad(), please use .backward() if possible`); TE < 2.12 pytorch/graph.py warms up and captures with "
      "torch.autograd.grad, TE PR #2518 (v2.12) with torch.autograd.backward; MLM #2758",
      "selective recompute of a module inside a transformer_engine graph needs Transformer Engine >= 2.12",
      at=CAPTURE, needles=("Checkpointing is not compatible with .grad()",))
def _te_recompute(c: Ctx) -> str | None:
    if c.g.effective != "transformer_engine" or not c.g.graphs_on or c.get("model.recompute_granularity") != "selective":
        return None
    if not c.te_version or version_tuple(c.te_version) >= (2, 12):
        return None
    recomputed = as_list(c.get("model.recompute_modules")) or ["core_attn"]  # MCore's default (L1763-1764)
    inside = [m for m in recomputed if m in _CHECKPOINTED and (not c.g.modules or _CHECKPOINTED[m] in c.g.modules)]
    if inside:
        return "Checkpointing is not compatible with .grad(), please use .backward() if possible"
    return None


def _padding_mask(c: Ctx) -> bool:
    """Bridge main gives a packed batch a padding mask: every offline-packed batch (data/packing/gpt_sft.py L292-296),
    in-batch packing padded to a multiple above 1 (data/collators/sft.py L137)."""
    if c.flag("dataset.enable_offline_packing", "packed_sequence", "dataset.packed_sequence"):
        return True
    return c.flag("dataset.enable_in_batch_packing") and (
        number(c.get("dataset.in_batch_packing_pad_to_multiple_of"), 1.0) or 1.0) > 1


@rule("packed_moe_router_te_graph",
      "Bridge main 0.7.0 training/gpt_step.py L184-198 _validate_packed_moe_cuda_graph (Bridge PR #5470), at the "
      "first forward of a packed batch; not in Bridge 0.6.2",
      "packed MoE batches (with their padding mask) cannot go through transformer_engine graphs of the router",
      needles=("Packed MoE padding masks do not support router-scoped Transformer Engine CUDA graphs",), at=CONFIG)
def _packed_moe_router(c: Ctx) -> str | None:
    if not c.bridge_version or c.older_than(c.bridge_version, (0, 7)):
        return None  # the packing keys are Bridge 0.6.2's too: only a Bridge known to be >= 0.7 refuses this
    if not c.get("model.num_moe_experts") or str(c.get("model.cuda_graph_impl", "none")) != "transformer_engine":
        return None
    modules = set(c.g.modules)
    if (not modules or modules & {"moe", "moe_router", "moe_preprocess"}) and _padding_mask(c):
        return ("Packed MoE padding masks do not support router-scoped Transformer Engine CUDA graphs in the pinned "
                "MCore. Use an attention-only CUDA graph scope or disable scoped CUDA graphs.")
    return None


CAPTURE_RULES: tuple[Constraint, ...] = tuple(r for r in PREFLIGHT if r.check in (
    _whole_layer_ep_overlap, _offload_versions, _optimizer_graph_skip, _optimizer_graph_offload, _ncclep_zero_copy,
    _te_recompute, _packed_moe_router))


def capture_table() -> str:
    """CAPTURE_RULES as the Markdown table docs/failures.md shows (a test keeps the two equal)."""
    rows = ["| rule | what it refuses | the text a run prints | source |", "|---|---|---|---|"]
    rows += [f"| `{r.id}` | {r.summary} | " + " / ".join(f"`{n}`" for n in r.needles) + f" | {r.source} |"
             for r in CAPTURE_RULES]
    return "\n".join(rows)
