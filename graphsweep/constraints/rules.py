"""The constraints graphsweep checks before a job: one predicate per constraint, with Megatron's own message.

Each rule reads the graph view of a run's settings (graphsweep/constraints/graph.py) and returns the message Megatron
would print (or ours where Megatron has none, e.g. an unknown scope only raises ``KeyError``), with where it comes
from and the texts a run prints when it hits the same constraint. Facts and line numbers:
docs/megatron-facts.md §3.1-3.5 (Megatron Core ``core_r0.19.0``, Megatron Bridge ``r0.6.0``
unless noted), re-read in Megatron-LM's tags ``core_v0.17.1``, ``core_v0.18.0``/``core_v0.18.2`` and the 0.19.2 wheel
(whose transformer_config.py is core_r0.19.0's). The API generations (graph.py SCOPE_API / MODULES_API) split at 0.18,
not 0.19 (docs/megatron.md "The graph switch per Megatron Core API", checked in those tags).
tests/constraints/test_bridge_agreement.py checks them against Bridge 0.6.2 itself,
tests/constraints/test_preflight_releases.py against Core 0.17.1, 0.18.2 and 0.19.2's own TransformerConfig.
"""

from __future__ import annotations

from typing import Callable, Mapping

from graphsweep.constraints.graph import KNOWN_SCOPES, TE_MODULES, UNKNOWN_IMPL, Ctx, as_list, number, version_tuple
from graphsweep.constraints.model import CAPTURE, CONFIG, LAUNCH, NEVER, Constraint

PREFLIGHT: list[Constraint] = []


def rule(id: str, source: str, summary: str, *, needles: tuple[str, ...] = (), at: str = CONFIG,
         requires: str | None = None, frame: str | None = None,
         advice: str = "") -> Callable[[Callable[[Ctx], str | None]], Callable[[Ctx], str | None]]:
    """Register the decorated predicate as the preflight check of a constraint."""
    def deco(fn: Callable[[Ctx], str | None]) -> Callable[[Ctx], str | None]:
        PREFLIGHT.append(Constraint(id, summary, source, fn, needles, at, requires, frame, advice=advice))
        return fn

    return deco


@rule("cuda_graph_impl_invalid", "MCore transformer_config.py L2445-2450 (core_r0.19.0), L2221-2226 (core_v0.18.0); "
      "core_v0.17.1 L1959-1962 knows transformer_engine and local only (no full_iteration impl before 0.18)",
      "cuda_graph_impl must be a known implementation for this Megatron Core",
      needles=("Invalid cuda graph implementation: ", "Invalid value for cuda_graph_impl: "))
def _impl_invalid(c: Ctx) -> str | None:
    if c.g.effective == UNKNOWN_IMPL:
        return f"Invalid cuda graph implementation: {c.g.impl}"
    return None


@rule("cuda_graph_scope_unknown", "graphsweep (MCore only raises KeyError: '<name>': cuda_graph_config.py L57 "
      "CudaGraphModule[scope] in core_v0.18.0-0.19.2, transformer_config.py L1953 CudaGraphScope[scope] in core_v0.17.1)",
      "every scope/module name must be one Megatron knows",
      needles=("Invalid cuda graph scope: ", "Invalid value for cuda_graph_scope: "))
def _scope_unknown(c: Ctx) -> str | None:
    bad = [n for n in c.g.names if n not in KNOWN_SCOPES]
    if bad:
        return (
            f"Unknown CUDA graph scope '{bad[0]}' in {c.g.scope_key}; valid names are {', '.join(TE_MODULES)} "
            f"(and full_iteration with cuda_graph_impl=local). Megatron Core itself only raises KeyError: '{bad[0]}'."
        )
    return None


@rule("cuda_graph_modules_before_0_18", "graphsweep (core_v0.17.1 TransformerConfig has no cuda_graph_modules field, "
      "it arrived in core_v0.18.0 L942, MLM PR #4292; Bridge's OmegaConf struct mode rejects an unknown key, docs/megatron-facts.md §4.1)",
      "cuda_graph_modules exists only from Megatron Core 0.18",
      at=LAUNCH)
def _modules_old(c: Ctx) -> str | None:
    if c.scope_api and c.get("model.cuda_graph_modules") is not None:
        return (
            "model.cuda_graph_modules does not exist before Megatron Core 0.18 (the override fails as an unknown key); "
            "use model.cuda_graph_scope, or set workload.mcore_version to the container's Megatron Core (0.18 or later)"
        )
    return None


@rule("cuda_graph_scope_and_modules", "MCore transformer_config.py L2383-2388 (core_r0.19.0), L2159-2164 (core_v0.18.0)",
      "never set both cuda_graph_scope and cuda_graph_modules",
      needles=("cuda_graph_scope and cuda_graph_modules cannot be set together.",))
def _scope_and_modules(c: Ctx) -> str | None:
    if not c.scope_api and c.get("model.cuda_graph_scope") is not None and c.get("model.cuda_graph_modules") is not None:
        return "cuda_graph_scope and cuda_graph_modules cannot be set together."
    return None


@rule("local_only_full_iteration", "Bridge utils/cuda_graph.py validate_cuda_graph_configuration (r0.6.0)",
      "Bridge 0.6 accepts cuda_graph_impl=local only for full-iteration graphs",
      needles=('Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs',))
def _local_only_full(c: Ctx) -> str | None:
    if c.g.impl == "local" and "full_iteration" not in c.g.names:
        shown = f" with scopes {list(c.g.names)!r}" if c.g.names else ""
        return (
            f'Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs{shown}. '
            'Use model.cuda_graph_impl="transformer_engine" for scoped CUDA graph capture such as "attn" or "mlp".'
        )
    return None


@rule("full_iteration_with_te", "MCore cuda_graph_config.py L107-111 (core_v0.18.0-0.19.2, the scope's migration); "
      "core_v0.17.1 transformer_config.py L1980-1984",
      "full_iteration is not a transformer_engine scope",
      needles=("cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl='transformer_engine'.", 'full_iteration CUDA graph scope cannot use cuda_graph_impl=transformer_engine.', 'full_iteration cuda graph is not supported for cuda_graph_impl=transformer_engine.', 'To use full iteration cuda graph, please use cuda_graph_impl=local instead of cuda_graph_impl=transformer_engine.'))
def _full_with_te(c: Ctx) -> str | None:
    if c.g.impl == "transformer_engine" and "full_iteration" in c.g.names:
        if c.scope_api:  # core_v0.17.1 transformer_config.py L1981-1984
            return ("To use full iteration cuda graph, please use cuda_graph_impl=local instead of "
                    "cuda_graph_impl=transformer_engine.")
        return "cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl='transformer_engine'."
    return None


@rule("full_iteration_exclusive",
      "MCore transformer_config.py L2461-2463 (core_r0.19.0), L2237-2239 (core_v0.18.0; local + [full_iteration, ...] "
      "migrates to the full_iteration impl first); core_v0.17.1 has no such check: Bridge scripts/performance/utils/"
      "overrides.py L117-160",
      "a full-iteration graph captures everything: no other scope alongside",
      needles=('cuda_graph_modules must be empty when cuda_graph_impl="full_iteration".', "full_iteration CUDA graph scope cannot be combined with other scopes.", "full scope cannot be used with other scopes."))
def _full_exclusive(c: Ctx) -> str | None:
    if c.g.effective != "full_iteration" or not c.g.modules:
        return None
    if not c.scope_api:  # MCore migrates the deprecated scope to the impl before this check (cuda_graph_config.py L11)
        return 'cuda_graph_modules must be empty when cuda_graph_impl="full_iteration".'
    return "full_iteration CUDA graph scope cannot be combined with other scopes."


@rule("full_iteration_nan_check", "Bridge training/config.py L1364-1369 ConfigContainer.validate (r0.6.0)",
      "a full-iteration graph needs rerun_state_machine.check_for_nan_in_loss=False (default True)",
      needles=("check_for_nan_in_loss must be disabled when using full_iteration CUDA graph",))
def _full_nan(c: Ctx) -> str | None:
    if c.g.effective == "full_iteration" and c.flag("rerun_state_machine.check_for_nan_in_loss", default=True):
        return ("check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. "
                "Set rerun_state_machine.check_for_nan_in_loss=False.")
    return None


@rule("te_rng_tracker", "Bridge models/gpt_provider.py L232-237 provide() (r0.6.0); synced by config.py L1270-1272",
      "any CUDA graph needs the TE RNG tracker (model.use_te_rng_tracker or rng.te_rng_tracker)",
      needles=("Transformer engine's RNG tracker is required for cudagraphs",))
def _rng(c: Ctx) -> str | None:
    # ConfigContainer.validate sets both flags when either is True, so one of them is enough.
    if c.g.graphs_on and not c.flag("model.use_te_rng_tracker") and not c.flag("rng.te_rng_tracker"):
        return ("Transformer engine's RNG tracker is required for cudagraphs, it can be enabled with "
                "use_te_rng_tracker=True'.")  # the stray quote is Megatron's
    return None


@rule("moe_and_moe_router", "MCore transformer_config.py L2487 (core_r0.19.0), L2263 (core_v0.18.0); core_v0.17.1 "
      "L1988 says cuda_graph_scope",
      "moe and moe_router scopes are mutually exclusive",
      needles=("must not contain both moe and moe_router.",))
def _moe_router(c: Ctx) -> str | None:
    if c.g.graphs_on and "moe" in c.g.modules and "moe_router" in c.g.modules:
        field = "cuda_graph_scope" if c.scope_api else "cuda_graph_modules"
        return f"{field} must not contain both moe and moe_router."
    return None


@rule("moe_preprocess_needs_router", "MCore transformer_config.py L2491 (core_r0.19.0), L2267 (core_v0.18.0), L1992 "
      "(core_v0.17.1)",
      "moe_preprocess needs moe_router in the same scope",
      needles=("moe_preprocess cuda graph is only supported with moe_router cuda graph.",))
def _preprocess_router(c: Ctx) -> str | None:
    # the local impl silently adds both (L2475-2482), so only transformer_engine can get this wrong
    if c.g.effective == "transformer_engine" and "moe_preprocess" in c.g.modules and "moe_router" not in c.g.modules:
        return "moe_preprocess cuda graph is only supported with moe_router cuda graph."
    return None


@rule("moe_preprocess_dtoh", "MCore transformer_config.py L2518 (core_r0.19.0), L2294 (core_v0.18.0), L2019 "
      "(core_v0.17.1)",
      "moe_preprocess is not graphable with the alltoall dispatcher plus a capacity factor or FP8 router padding",
      needles=("moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations in the preprocess step.",))
def _preprocess_dtoh(c: Ctx) -> str | None:
    if not (c.g.graphs_on and "moe_preprocess" in c.g.modules):
        return None
    # dispatcher default is allgather (MCore L862); only an explicit alltoall can trip this
    if str(c.get("model.moe_token_dispatcher_type", "allgather")) != "alltoall":
        return None
    if c.get("model.moe_expert_capacity_factor") is not None or c.flag("model.moe_router_padding_for_fp8"):
        return ("moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations "
                "in the preprocess step.")
    return None


@rule("moe_scope_dense_model", "MCore transformer_config.py L2496 (core_r0.19.0), L2272 (core_v0.18.0), L1997 "
      "(core_v0.17.1)",
      "moe / moe_router scopes need an MoE model (num_moe_experts > 1)",
      needles=("moe cuda graph is only supported for MoE.",))
def _moe_dense(c: Ctx) -> str | None:
    if not (c.g.graphs_on and ({"moe", "moe_router"} & set(c.g.modules))) or "model.num_moe_experts" not in c.s:
        return None  # expert count unknown (recipe default): cannot tell
    n = number(c.get("model.num_moe_experts"), 0.0) or 0.0
    if n <= 1:
        return "moe cuda graph is only supported for MoE."
    return None


@rule("moe_scope_dropless", "MCore transformer_config.py L2511 (core_r0.19.0), L2287 (core_v0.18.0), L2012 "
      "(core_v0.17.1)",
      "the moe scope needs drop-and-pad MoE (capacity factor + pad to capacity)",
      needles=("moe cuda graph is only supported with drop-padding MoE.",))
def _moe_dropless(c: Ctx) -> str | None:
    # MCore defaults: moe_expert_capacity_factor=None, moe_pad_expert_input_to_capacity=False (dropless)
    if c.g.graphs_on and "moe" in c.g.modules:
        if c.get("model.moe_expert_capacity_factor") is None or not c.flag("model.moe_pad_expert_input_to_capacity"):
            return "moe cuda graph is only supported with drop-padding MoE."
    return None


def _static_moe_shapes(c: Ctx) -> bool:
    """True when the MoE dispatcher never waits on the host for token counts (MCore 0.19.2, token_dispatcher.py)."""
    dispatcher = str(c.get("model.moe_token_dispatcher_type", "allgather"))  # MCore default (transformer_config L862)
    capacity = c.get("model.moe_expert_capacity_factor")
    pad = c.flag("model.moe_pad_expert_input_to_capacity")
    if dispatcher == "alltoall":
        # drop_and_pad = moe_pad_expert_input_to_capacity (L443); the d2h copy and d2h_event.synchronize() are
        # skipped only then (L919-950), and padding needs a capacity factor (transformer_config L1686-1690)
        return pad and capacity is not None
    if dispatcher == "flex":
        backend = str(c.get("model.moe_flex_dispatcher_backend", "deepep"))  # transformer_config L869
        if backend == "hybridep":  # num_permuted_tokens known on the host: L1090-1120; uneven padding .item(): L1065
            return (pad or c.get("model.moe_expert_rank_capacity_factor") is not None) and not c.flag(
                "model.moe_hybridep_pad_uneven_dispatch_inputs")
        if backend == "ncclep":  # `if self.static_shape: return`, else .item(): L1695-1698
            return c.flag("model.moe_ncclep_static_shape")
        return False  # deepep: "the CPU will wait for GPU's signal to arrive" (fused_a2a.py L105-107)
    return False  # allgather: tokens_per_expert = self.local_map.sum(dim=0).long().cpu() (L317), always


@rule("full_iteration_dropless_moe",
      "MCore 0.14-0.19.2 transformer/moe/token_dispatcher.py _maybe_dtoh_and_synchronize L919-950 "
      "(self.d2h_event.synchronize() unless drop_and_pad; allgather .cpu() L317); not checked by Megatron at "
      "config time; failed at capture on an H200 (MoE fixture, full_iteration)",
      "a full-iteration graph cannot capture an MoE dispatcher that waits on the host for token counts (dropless)",
      # torch's text for cudaErrorCapturedEvent, raised by d2h_event.synchronize() inside the capture (H200 MoE
      # fixture, log line 622); the frame tells it from any other capturing-stream event error
      needles=("operation not permitted on an event last recorded in a capturing stream",),
      at=CAPTURE, frame="_maybe_dtoh_and_synchronize",
      advice="{variant} is blocked on this dropless MoE; what could reach {reach}: a drop-and-pad MoE "
             "(`model.moe_expert_capacity_factor` with `model.moe_pad_expert_input_to_capacity=true`) captured whole "
             "with full_iteration takes every region off the host, but dropping tokens changes the model: its loss "
             "parity must be established again against a drop-and-pad eager baseline, not this one")
def _full_iteration_dropless_moe(c: Ctx) -> str | None:
    if c.g.effective != "full_iteration" or c.get("model.num_moe_experts") in (None, 0, 1):
        return None  # num_moe_experts defaults to None: a dense model
    if _static_moe_shapes(c):
        return None
    return ("full-iteration CUDA graph on a dropless MoE: the token dispatcher synchronises with the host inside "
            "the capture (token_dispatcher.py _maybe_dtoh_and_synchronize: self.d2h_event.synchronize()), which "
            "fails with 'CUDA error: operation not permitted on an event last recorded in a capturing stream'. "
            "Make the MoE drop-and-pad (alltoall with model.moe_expert_capacity_factor and "
            "model.moe_pad_expert_input_to_capacity=true) or graph the moe_router/moe_preprocess scopes with "
            "transformer_engine instead.")




@rule("mlp_scope_all_moe", "MCore transformer_config.py L2501-2504 (core_r0.19.0), L2278 (core_v0.18.0), L2003 "
      "(core_v0.17.1)",
      "the mlp scope needs dense layers; an all-MoE model has none",
      needles=("mlp cuda graph is only supported for dense layers, but not found in the model.",))
def _mlp_all_moe(c: Ctx) -> str | None:
    if not (c.g.graphs_on and "mlp" in c.g.modules):
        return None
    n = number(c.get("model.num_moe_experts"), 0.0) or 0.0
    freq = c.get("model.moe_layer_freq", 1)
    all_moe = freq == 1 or (isinstance(freq, list) and 0 not in freq)
    if n > 1 and all_moe:
        return "mlp cuda graph is only supported for dense layers, but not found in the model."
    return None


@rule("optimizer_graph_num_zeros",
      "MCore 0.19.2 optimizer/clip_grads.py L275 count_zeros_fp32 (.item() inside the optimizer graph capture, "
      "optimizer_cuda_graph.py L32); MLM PR #7407; not checked at config time",
      "an optimizer CUDA graph cannot count the zeros in the gradients (a host sync inside the capture)",
      at=CAPTURE, needles=("operation not permitted when stream is capturing",), frame="count_zeros_fp32")
def _optimizer_graph_zeros(c: Ctx) -> str | None:
    if c.flag("optimizer.optimizer_cuda_graph") and c.flag("optimizer.log_num_zeros_in_grad"):
        return ("optimizer.optimizer_cuda_graph with optimizer.log_num_zeros_in_grad: counting the zeros calls "
                ".item() inside the optimizer graph capture (clip_grads.py count_zeros_fp32), which fails with "
                "'CUDA error: operation not permitted when stream is capturing'; turn log_num_zeros_in_grad off")
    return None


@rule("full_recompute_te_scope", "MCore transformer_config.py L2525 (core_r0.19.0), L2301 (core_v0.18.0), L2026 "
      "(core_v0.17.1: scope must be exactly [full_iteration])",
      "full (layer) recompute works only with a full-iteration graph",
      needles=("full recompute is only supported with full iteration CUDA graph.",))
def _full_recompute(c: Ctx) -> str | None:
    gran = c.get("model.recompute_granularity")
    if c.g.graphs_on and gran and gran != "selective" and c.g.effective != "full_iteration":
        return "full recompute is only supported with full iteration CUDA graph."
    return None


@rule("moe_recompute_moe_router", "MCore transformer_config.py L2535 (core_r0.19.0), L2311 (core_v0.18.0), L2036 "
      "(core_v0.17.1)",
      "selective moe recompute cannot be combined with a transformer_engine moe_router graph",
      needles=("moe recompute is not supported with moe_router CUDA graph with: ",))
def _moe_recompute(c: Ctx) -> str | None:
    mods = as_list(c.get("model.recompute_modules")) or []
    if (c.g.effective == "transformer_engine" and c.get("model.recompute_granularity") == "selective"
            and "moe" in mods and "moe_router" in c.g.modules):
        # the "--cuda-graph-impl transformer_engine." suffix is a separate statement in MCore, not in the message
        return "moe recompute is not supported with moe_router CUDA graph with: "
    return None


@rule("cpu_offloading", "MCore transformer_config.py L2467-2468 (core_r0.19.0), L2243-2244 (core_v0.18.0: except the "
      "full_iteration impl); core_v0.17.1 L1964-1965 rejects every graph impl",
      "CUDA graphs and CPU offloading do not mix (>= 0.18: except the full_iteration impl)",
      needles=("CUDA graphs not supported with CPU offloading.",))
def _cpu_offload(c: Ctx) -> str | None:
    if not (c.g.graphs_on and c.flag("model.cpu_offloading")):
        return None
    # MCore >= 0.18 turns local + [full_iteration] into the full_iteration impl before this check (Bridge 0.6.2 accepts it)
    allowed = ("full_iteration",) if not c.scope_api and c.g.effective == "full_iteration" else ()
    if c.g.effective not in allowed:
        return "CUDA graphs not supported with CPU offloading."
    return None


# Packed sequences. Bridge 0.6.2 spells them dataset.enable_offline_packing + dataset.offline_packing_specs.*
# (GPTSFTDatasetConfig, data/builders/gpt_sft.py) or dataset.enable_in_batch_packing; older Bridge and NeMo 2
# wrote dataset.packed_sequence_specs.* and the skill cards `packed_sequence=True`: all are read.
# A recipe that packs by default (the SQuAD SFT recipes) is invisible to these rules unless the override says so;
# `preflight: megatron` sees it.
def _offline_packed(c: Ctx) -> bool:
    """Offline (pre-packed) sequences: the padding rules of Bridge training/config.py apply."""
    if c.flag("dataset.enable_offline_packing", "packed_sequence", "dataset.packed_sequence"):
        return True
    specs = c.get("dataset.packed_sequence_specs")
    size = number(c.get("dataset.packed_sequence_specs.packed_sequence_size"), 0.0) or 0.0
    return size > 0 or (isinstance(specs, Mapping) and (number(specs.get("packed_sequence_size"), 0.0) or 0.0) > 0)


def _thd(c: Ctx) -> bool:
    """Any packing (offline or in-batch): the model gets packed_seq_params (THD layout)."""
    return _offline_packed(c) or c.flag("dataset.enable_in_batch_packing")


def _attn_captured(c: Ctx) -> bool:
    """The graph holds attention: full iteration, a whole layer (no modules named) or the attn module."""
    return c.g.effective == "full_iteration" or not c.g.modules or "attn" in c.g.modules


@rule("packed_sequence_te_scope", "MCore transformer_layer.py _te_cuda_graph_replay L1209-1231 (core 0.19.2), at "
      "the first TE graph replay", "transformer_engine graphs that hold attention cannot take packed sequences "
      "(packed_seq_params is not a Tensor); an mlp/moe-only scope runs attention eagerly and is fine",
      at=CAPTURE, needles=("CUDA graph accepts only Tensor inputs.",))
def _packed_te(c: Ctx) -> str | None:
    # NVIDIA's own packed SFT perf recipes use TE with scope ["mlp"] (Bridge perf_recipes/llama/gb200/llama3.py)
    if c.g.effective == "transformer_engine" and _attn_captured(c) and _thd(c):
        return ("CUDA graph accepts only Tensor inputs. inference_context and packed_seq_params are excluded from "
                "input list. For inference cuda graph, please use cuda_graph_impl=local instead.")
    return None


def _pad_to_max_length(c: Ctx) -> bool:
    return c.flag("dataset.dataset_kwargs.pad_to_max_length", "dataset.pad_to_max_length")


@rule("packed_pad_to_max_length", "Bridge training/config.py ConfigContainer.validate L1162-1179 (0.6.2)", "offline packing with graphs needs the dataset padded to max length",
      needles=("Offline packing with CUDA graphs requires dataset pad_to_max_length=True.",))
def _packed_pad(c: Ctx) -> str | None:
    if c.g.graphs_on and _offline_packed(c) and not _pad_to_max_length(c):
        return "Offline packing with CUDA graphs requires dataset pad_to_max_length=True."
    return None


@rule("packed_pad_cu_seqlens", "Bridge training/config.py ConfigContainer.validate L1181-1188 (0.6.2)",
      "packed attention in a graph needs padded cu_seqlens",
      needles=("Packed attention CUDA graphs require offline_packing_specs.pad_cu_seqlens=True.",))
def _packed_cu(c: Ctx) -> str | None:
    if c.g.graphs_on and _offline_packed(c) and _attn_captured(c) and not c.flag(
        "dataset.offline_packing_specs.pad_cu_seqlens", "dataset.packed_sequence_specs.pad_cu_seqlens"
    ):
        return ("Packed attention CUDA graphs require offline_packing_specs.pad_cu_seqlens=True. "
                "Enable it for full-iteration, whole-layer, or attention-scoped capture.")
    return None


def _delay_wgrad_graph(c: Ctx) -> bool:
    """Bridge comm_overlap.py L535-541 (r0.6.0) wgrad_in_graph_scope: an attn graph, or a moe_router graph whose
    shared expert runs inside it (moe_shared_expert_intermediate_size set, moe_shared_expert_overlap off)."""
    delay = c.flag("comm_overlap.delay_wgrad_compute", "model.delay_wgrad_compute")
    router = "moe_router" in c.g.modules and c.get("model.moe_shared_expert_intermediate_size") is not None \
        and not c.flag("model.moe_shared_expert_overlap")
    return delay and c.g.graphs_on and ("attn" in c.g.modules or router)


@rule("delay_wgrad_te_version", "Bridge training/comm_overlap.py L520-557 (r0.6.0); Core's own TE >= 2.10.0 check for TE "
      "graphs: transformer_config.py L2753-2758 (core_r0.19.0), L2458-2463 (core_v0.18.0), L2158-2163 (core_v0.17.1)",
      "delayed wgrad with attn/moe_router graphs needs Transformer Engine >= 2.12.0",
      needles=("CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0.", "TE version >= 2.10.0 is required for delay_wgrad_compute with partial cuda graph"))
def _delay_te(c: Ctx) -> str | None:
    if _delay_wgrad_graph(c) and c.te_version and version_tuple(c.te_version) < (2, 12, 0):
        return "CUDA graph with delay_wgrad_compute requires TE version >= 2.12.0."
    return None


@rule("delay_wgrad_grad_accum_fusion", "Bridge training/comm_overlap.py L520-557 (r0.6.0)",
      "delayed wgrad with attn/moe_router graphs needs gradient_accumulation_fusion (MCore default True)",
      needles=("CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion to be enabled.",))
def _delay_fusion(c: Ctx) -> str | None:
    if _delay_wgrad_graph(c) and not c.flag("model.gradient_accumulation_fusion", default=True):
        return ("CUDA graph with delay_wgrad_compute requires gradient_accumulation_fusion to be enabled. This is "
                "because default gradient accumulation does not use static memory addresses, which breaks CUDA "
                "graph requirements.")
    return None


@rule("delay_wgrad_attn_bias", "Bridge training/comm_overlap.py L520-557 (r0.6.0)",
      "delayed wgrad with an attn graph cannot have attention bias (add_bias_linear defaults to True in MCore)",
      needles=("CUDA graph with delay_wgrad_compute does not support attention bias for now.",))
def _delay_bias(c: Ctx) -> str | None:
    # a missing add_bias_linear is MCore's default, True (checked against Bridge 0.6.2's validator)
    bias = c.flag("model.add_bias_linear", default=True) or c.flag("model.add_qkv_bias")
    if _delay_wgrad_graph(c) and "attn" in c.g.modules and bias:
        return "CUDA graph with delay_wgrad_compute does not support attention bias for now."
    return None


@rule("delay_wgrad_needs_ep_overlap", "Bridge training/comm_overlap.py L520-557 (r0.6.0); MCore transformer_config.py "
      "L2750-2752 (core_r0.19.0), L2455-2457 (core_v0.18.0), L2155-2157 (core_v0.17.1)",
      "delay_wgrad_compute needs overlap_moe_expert_parallel_comm",
      needles=("overlap_moe_expert_parallel_comm is required for delay_wgrad_compute", "overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute"))
def _delay_overlap(c: Ctx) -> str | None:
    if c.flag("comm_overlap.delay_wgrad_compute", "model.delay_wgrad_compute") and not c.flag(
        "comm_overlap.overlap_moe_expert_parallel_comm", "model.overlap_moe_expert_parallel_comm"
    ):
        return "overlap_moe_expert_parallel_comm is required for delay_wgrad_compute"
    return None


@rule("expandable_segments_nccl_graph_register",
      "MCore cuda_graphs.py TECudaGraphHelper.__init__ (0.19.2 L2102-2108, 0.18.2 L1776-1782, 0.17.1 L1709-1715; any "
      "arch); CudaGraphManager.__init__ for per-layer local graphs up to 0.18.2 (L1502-1510, 0.17.1 L1437-1446; "
      "sm < 100 only), gone in 0.19; the full-iteration wrapper never checks (full_iteration_expandable_segments)",
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True needs NCCL_GRAPH_REGISTER=0",
      needles=("Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph "
               "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",), requires="rror")
def _expandable(c: Ctx) -> str | None:
    if "expandable_segments:True" not in c.env.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        return None
    if c.env.get("NCCL_GRAPH_REGISTER") == "0":  # must be exactly the string 0
        return None
    # TE impl asserts on every arch; the local manager only up to 0.18.2 and only below sm_100 (H100/H200 are sm_90).
    # MCore 0.19 dropped the local check. A full iteration makes no CudaGraphManager (0.17.1 module.py L172-181:
    # not with [full_iteration]; >= 0.18 only for cuda_graph_impl == "local") and FullCudaGraphWrapper never checked.
    if c.g.effective == "transformer_engine" or (c.core_before((0, 19)) and c.g.effective == "local"):
        return ("Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph with "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.")
    return None


def _megatron_fsdp(c: Ctx) -> bool:
    # Bridge ConfigContainer.validate runs its Megatron-FSDP checks when either flag is set (0.6.2 config.py L1345)
    return c.flag("ddp.use_megatron_fsdp", "dist.use_megatron_fsdp")


def _mfsdp_v2(c: Ctx) -> bool:
    """Megatron-FSDP v2: ddp.megatron_fsdp_version exists from MCore 0.20 (main distributed_data_parallel_config.py
    L93, default 1) and Bridge 0.7 (main config.py L1071-1077; Bridge 0.6.2 / Core 0.19.2 have no such key)."""
    if c.older_than(c.bridge_version, (0, 7)) or c.older_than(c.mcore_release, (0, 20)):
        return False
    return _megatron_fsdp(c) and number(c.get("ddp.megatron_fsdp_version"), 1.0) == 2


@rule("fsdp_full_iteration_graph_safe",
      "MCore 0.19.2 training/training.py L2003-2012 (MLM sets both itself; MLM PR #7282), distributed_data_parallel_"
      "config.py L152-159 and megatron_fsdp param_and_grad_buffer.py L3184-3198; Bridge 0.6.2 sets neither (its "
      "DeepSeek-V3 GB300 perf recipe sets both by hand, perf_recipes/deepseek/gb300/deepseek_v3.py L333-334)",
      "a full-iteration graph with Megatron-FSDP v1 needs ddp.megatron_fsdp_cuda_graph_mode=True and, with "
      "overlapped parameter gathers, ddp.fsdp_all_gather_in_start_param_sync=False (per-layer graphs: fsdp_te_scoped_graphs)",
      at=NEVER)
def _fsdp_full_iteration(c: Ctx) -> str | None:
    # not a Megatron check: the run hangs in param_gather_event.wait() (MLM PR #7282) or the optimizer loses the
    # gradient references the graph writes. Bridge turns overlap_param_gather on with data parallel > 1
    # (comm_overlap.py L576-579) unless an override turns it off.
    if c.g.effective != "full_iteration" or not _megatron_fsdp(c) or _mfsdp_v2(c):
        return None
    tp, pp, cp = _model_parallel(c)
    overlap = c.flag("comm_overlap.overlap_param_gather", "ddp.overlap_param_gather",
                     default=c.gpus // max(1, tp * pp * cp) > 1)
    missing = [] if c.flag("ddp.megatron_fsdp_cuda_graph_mode") else ["ddp.megatron_fsdp_cuda_graph_mode=True"]
    if overlap and c.flag("ddp.fsdp_all_gather_in_start_param_sync", default=True):
        missing.append("ddp.fsdp_all_gather_in_start_param_sync=False")
    if missing:
        return (f"full-iteration CUDA graph with Megatron-FSDP v1 needs {' and '.join(missing)} (what Megatron-LM "
                "sets itself, training.py L2003-2012): start_param_sync() all-gathers in the optimizer step and the "
                "captured forward waits on it (hang in param_gather_event.wait(), MLM PR #7282), and without the "
                "graph-safe mode the optimizer drops the gradient references the graph writes on replay")
    return None


@rule("mfsdp_v2_graphs", "Bridge main 0.7.0 training/config.py L1187-1188 _validate_and_apply_megatron_fsdp_v2_configs "
      "(Bridge PR #5395); not in Bridge 0.6.2", "Megatron-FSDP v2 (ddp.megatron_fsdp_version=2) runs no CUDA graphs",
      needles=("MFSDP V2 does not support CUDA graphs.",))
def _mfsdp_v2_graphs(c: Ctx) -> str | None:
    if _mfsdp_v2(c) and (c.g.impl != "none" or c.flag("ddp.megatron_fsdp_cuda_graph_mode")):
        return "MFSDP V2 does not support CUDA graphs."
    return None


@rule("mfsdp_v2_optimizer_graph", "Bridge main 0.7.0 training/config.py L1181-1182 (Bridge PR #5395); not in Bridge 0.6.2",
      "Megatron-FSDP v2 runs no optimizer CUDA graph", needles=("MFSDP V2 does not support optimizer CUDA graphs.",))
def _mfsdp_v2_optimizer(c: Ctx) -> str | None:
    if _mfsdp_v2(c) and c.flag("optimizer.optimizer_cuda_graph"):
        return "MFSDP V2 does not support optimizer CUDA graphs."
    return None


@rule("energon_packing_graphs", "Bridge main 0.7.0 training/config.py L1336-1339 ConfigContainer.validate (Bridge PR "
      "#5285); not in Bridge 0.6.2", "Energon native sequence packing (dataset.packing_buffer_size) runs no CUDA graphs "
      "(Bridge checks it for an EnergonDatasetConfig; the diffusion datamodules' key of that name are not checked)",
      needles=("Energon native sequence packing does not support CUDA graphs.",))
def _energon_packing(c: Ctx) -> str | None:
    if c.older_than(c.bridge_version, (0, 7)) or c.get("dataset.packing_buffer_size") is None:
        return None
    if c.g.impl != "none" or str(c.get("model.vision_cuda_graph_impl", "none")) not in ("none", "None"):
        return "Energon native sequence packing does not support CUDA graphs."
    return None


@rule("moe_grouped_tensor_needs_grouped_gemm", "MCore main 0.20.0 transformer_config.py L1413-1414 __post_init__ "
      "(MLM PR #6000); not in Core 0.19.2", "model.moe_use_grouped_tensor needs model.moe_grouped_gemm (MCore default False)",
      needles=("moe_use_grouped_tensor=True requires moe_grouped_gemm=True.",))
def _grouped_tensor(c: Ctx) -> str | None:
    if c.older_than(c.mcore_release, (0, 20)):
        return None
    # L1410-1411: use_transformer_engine_op_fuser sets moe_use_grouped_tensor only together with moe_grouped_gemm
    if c.flag("model.moe_use_grouped_tensor") and not c.flag("model.moe_grouped_gemm"):
        return "moe_use_grouped_tensor=True requires moe_grouped_gemm=True."
    return None


@rule("moe_a2a_overlap_with_graphs",
      "MCore transformer_config.py L2738-2746 (core_r0.19.0), L2443-2451 (core_v0.18.0: TE moe/mlp scope only); "
      "core_v0.17.1 L2143-2151 refuses every non-TE impl too",
      "overlap_moe_expert_parallel_comm (moe_a2a_overlap) and moe/mlp graphs do not mix",
      needles=("CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm",))
def _a2a_overlap(c: Ctx) -> str | None:
    if not (c.g.graphs_on and c.flag("comm_overlap.overlap_moe_expert_parallel_comm", "model.overlap_moe_expert_parallel_comm")):
        return None
    te_hit = c.g.effective == "transformer_engine" and bool({"moe", "mlp"} & set(c.g.modules))
    old_hit = c.scope_api and c.g.effective != "transformer_engine"
    if te_hit or old_hit:
        return "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm"
    return None


def _model_parallel(c: Ctx) -> tuple[int, int, int]:
    return (c.size("model.tensor_model_parallel_size"), c.size("model.pipeline_model_parallel_size"),
            c.size("model.context_parallel_size"))


@rule("parallel_sizes_divide_gpus", "MCore parallel_state.py initialize_model_parallel",
      "tensor x pipeline x context parallel must divide the GPU count")
def _divide(c: Ctx) -> str | None:
    tp, pp, cp = _model_parallel(c)
    if c.gpus % (tp * pp * cp):
        return (f"world_size ({c.gpus}) is not divisible by tensor_model_parallel_size ({tp}) x "
                f"pipeline_model_parallel_size ({pp}) x context_parallel_size ({cp})")
    return None


@rule("expert_parallel_sizes_divide_gpus", "MCore parallel_state.py initialize_model_parallel (expert rank generator)",
      "expert tensor x expert x pipeline parallel must divide the GPU count")
def _divide_expert(c: Ctx) -> str | None:
    tp, pp, _ = _model_parallel(c)
    etp = c.size("model.expert_tensor_parallel_size", tp)
    ep = c.size("model.expert_model_parallel_size")
    n = etp * ep * pp
    if c.gpus % n:
        return f"world_size ({c.gpus}) is not divisible by expert_tensor_model_pipeline_parallel size ({n})"
    return None


@rule("global_batch_divisible", "MCore num_microbatches_calculator.py ConstantNumMicroBatches",
      "global batch must be a multiple of micro batch x data parallel")
def _gbs(c: Ctx) -> str | None:
    tp, pp, cp = _model_parallel(c)
    gbs, mbs = number(c.get("train.global_batch_size")), number(c.get("train.micro_batch_size"))
    if gbs is None or mbs is None or c.gpus % (tp * pp * cp):
        return None  # unknown batch (recipe default), or the parallel rule already fired
    dp = c.gpus // (tp * pp * cp)
    if int(gbs) % (int(mbs) * dp):
        return (f"global batch size ({int(gbs)}) is not divisible by micro batch size ({int(mbs)}) times data "
                f"parallel size ({dp})")
    return None
