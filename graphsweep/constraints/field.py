"""Rules for CUDA-graph failures users hit in the field (docs/megatron-facts.md §7.1, its row numbers below).

Megatron checks none of these at config time: the run fails at capture, at replay, diverges, or floods its log.
Each predicate fires only on the configuration that caused the failure, and is gated like the other release-bound
rules (graph.Ctx.core_before / older_than): a rule about a version range fires when the caller's version is in it,
or, for a version nobody passed (the container's torch), only when it was given. Bridge-model rules read the
recipe name (Ctx.recipe), since only the model class raises them.
"""

from __future__ import annotations

import re

from graphsweep.constraints.graph import Ctx, version_tuple
from graphsweep.constraints.model import CAPTURE, CONFIG, NEVER, Constraint
from graphsweep.constraints.rules import PREFLIGHT, rule

_OPT_STEP_KEYS = ("comm_overlap.overlap_param_gather_with_optimizer_step",
                  "optimizer.overlap_param_gather_with_optimizer_step", "ddp.overlap_param_gather_with_optimizer_step")


@rule("full_iteration_param_gather_with_optimizer_step",
      "field row 20: Bridge #1688 (comment 2026-08-25: cudaErrorStreamCaptureIsolation after iteration 3 on all 64 "
      "B200 ranks), Bridge PR #5788 (the perf overrides skip the flag for full-iteration graphs); MCore 0.19.2 "
      "optimizer/__init__.py L1049-1054 dispatches the gather from the optimizer step, outside the captured iteration",
      "a full-iteration graph cannot wait on the parameter all-gather the previous optimizer step started "
      "(overlap_param_gather_with_optimizer_step)", at=CAPTURE)
def _param_gather_opt_step(c: Ctx) -> str | None:
    if c.g.effective != "full_iteration":
        return None
    key = next((k for k in _OPT_STEP_KEYS if c.flag(k)), None)
    if key is None:
        return None
    return (f"full-iteration CUDA graph with {key}=true: the parameter all-gather is started by the previous "
            "optimizer step, outside the captured iteration, and the captured forward waits on it, so capture fails "
            "with cudaErrorStreamCaptureIsolation (Bridge #1688, fixed in Bridge's perf overrides by PR #5788). Keep "
            "overlap_param_gather and set the optimizer-step variant to false.")


def _megatron_fsdp_v1(c: Ctx) -> bool:
    fsdp = c.flag("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")
    v2 = not c.older_than(c.bridge_version, (0, 7)) and not c.older_than(c.mcore_release, (0, 20)) and \
        str(c.get("ddp.megatron_fsdp_version", 1)) == "2"
    return fsdp and not v2


@rule("fsdp_te_scoped_graphs",
      "field row 23: MLM PR #4232 (open; 'FSDP's forward hooks that wrap backward handlers were passed directly to "
      "TE's make_graphed_callables, which would capture them at the wrong phase, causing numerical divergence and "
      "illegal memory access during graph replay'), not in any Core release up to 0.19.2; Bridge #2427 closed: "
      "'full iter CG is the focus'",
      "Megatron-FSDP v1 with per-layer (transformer_engine) graphs diverges and then faults at replay: use a "
      "full-iteration graph", at=NEVER)
def _fsdp_te_scoped(c: Ctx) -> str | None:
    if c.g.effective != "transformer_engine" or not _megatron_fsdp_v1(c):
        return None
    return ("transformer_engine (per-layer) CUDA graphs with Megatron-FSDP: TE's make_graphed_callables captures "
            "FSDP's backward hooks in the wrong phase, so the run diverges numerically and then hits 'an illegal "
            "memory access' at graph replay (MLM PR #4232, open: not in Megatron Core <= 0.19.2). Use "
            "cuda_graph_impl=full_iteration with ddp.megatron_fsdp_cuda_graph_mode=True, or no Megatron-FSDP.")


def _torch_min(c: Ctx, minimum: tuple[int, ...]) -> bool:
    return bool(c.torch_version) and version_tuple(c.torch_version) >= minimum


@rule("torch_register_generator_state_flood",
      "field row 24: pytorch PR #176753 (torch 2.14: CUDAGraph.register_generator_state() a deprecated no-op that "
      "TORCH_WARN_DEPRECATIONs on every call, through the C++ handler: Python warning filters cannot silence it); "
      "called per capture by MCore 0.19.2 full_cuda_graph.py L222-223, transformer/cuda_graphs.py L1193/L1297/L1402 "
      "(0.17.1, 0.18.2 too) and TE 2.20.2 pytorch/graph.py L488-490; MLM PR #7348 (open) skips it on torch >= 2.14",
      "on torch >= 2.14 every graph capture floods the log with register_generator_state deprecation warnings "
      "(gated: fires only when the torch version is given)", at=NEVER)
def _generator_state_flood(c: Ctx) -> str | None:
    if not c.g.graphs_on or not _torch_min(c, (2, 14)):
        return None
    return (f"torch {c.torch_version} with CUDA graphs: every graph capture calls CUDAGraph.register_generator_state(), "
            "which torch >= 2.14 made a deprecated no-op that warns on every call through its C++ warning handler "
            "(no Python filter silences it; pytorch PR #176753). Megatron Core (<= 0.19.2 and main, MLM PR #7348 "
            "open) and TE 2.20.2 call it per captured graph and RNG state: Megatron-LM's CI logs grew ~25x and the "
            "launcher was OOM-killed (exit 137) on runs that had passed. Use a container with torch < 2.14, or a "
            "Megatron Core with MLM PR #7348.")


@rule("full_iteration_expandable_segments",
      "field row 29: pytorch #158029, torchtitan #3306 (hang: NCCL registers graph buffers as one contiguous "
      "allocation, expandable segments map them in pieces); Megatron asserts it for TE graphs only "
      "(expandable_segments_nccl_graph_register), its full-iteration wrapper and the 0.19 local manager never",
      "a full-iteration or local graph with expandable segments needs NCCL_GRAPH_REGISTER=0 (Megatron does not check)",
      at=NEVER)
def _full_expandable(c: Ctx) -> str | None:
    if "expandable_segments:True" not in c.env.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        return None
    if c.env.get("NCCL_GRAPH_REGISTER") == "0" or c.g.effective not in ("full_iteration", "local"):
        return None
    if c.g.effective == "local" and c.core_before((0, 19)):
        return None  # the CudaGraphManager assertion covers it there (expandable_segments_nccl_graph_register)
    return ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True with a captured "
            f"{'full-iteration' if c.g.effective == 'full_iteration' else 'local'} graph and NCCL graph buffer "
            "registration on: NCCL takes a graph's buffer for one contiguous allocation, expandable segments are not, "
            "and the run hangs (pytorch #158029, torchtitan #3306); Megatron asserts this only for TE graphs. Set "
            "NCCL_GRAPH_REGISTER=0 (graphsweep's default environment does).")


# Bridge r0.6.0 / 0.6.2 model classes that assert fixed sequence lengths once their language model has graphs on
# (_expose_language_model_for_cuda_graph_helper): Qwen3VLModel (qwen3_vl_provider.py, qwen35_vl_provider.py) and
# Exaone45Model (exaone45_provider.py); their recipes are named qwen3_vl_* / qwen35_vl_* / exaone45_*.
_VLM_TEXTS = (
    (re.compile(r"(^|[.:])qwen3(5)?_vl"),
     "Qwen3-VL MoE with CUDA graph requires fixed sequence lengths (variable_seq_lengths=False). Disable "
     "variable-length / packed pipelines (e.g. in-batch packing with PP, or other modes that set "
     "variable_seq_lengths) or turn off CUDA graph."),
    (re.compile(r"(^|[.:])exaone45"),
     "EXAONE 4.5 with CUDA graph requires fixed sequence lengths (variable_seq_lengths=False). Disable "
     "variable-length / packed pipelines or turn off CUDA graph."),
)


@rule("vlm_graphs_fixed_seq_lengths",
      "field row 30: Bridge r0.6.0 models/qwen_vl/modelling_qwen3_vl/model.py L388-392 (Qwen3VLModel) and "
      "models/exaone/exaone45/modelling_exaone45/model.py L195-198 (Exaone45Model), at model build",
      "Qwen3-VL / Qwen3.5-VL / EXAONE 4.5 with CUDA graphs need fixed sequence lengths (model.variable_seq_lengths "
      "false; seen only when the recipe and the key are given)",
      needles=("with CUDA graph requires fixed sequence lengths (variable_seq_lengths=False).",), at=CONFIG)
def _vlm_fixed(c: Ctx) -> str | None:
    if not c.g.graphs_on or not c.flag("model.variable_seq_lengths") or not c.recipe:
        return None
    return next((text for pattern, text in _VLM_TEXTS if pattern.search(c.recipe.split(":")[-1])), None)


FIELD_RULES: tuple[Constraint, ...] = tuple(r for r in PREFLIGHT if r.check in (
    _param_gather_opt_step, _fsdp_te_scoped, _generator_state_flood, _full_expandable, _vlm_fixed))
