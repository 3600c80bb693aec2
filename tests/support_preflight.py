"""The preflight cases every truth check shares (tests/constraints/test_preflight.py,
tests/constraints/test_bridge_agreement.py, tests/constraints/test_preflight_releases.py): per constraint a bad and a
good setting, the context Bridge's validator needs, and how the rule engine is asked about a case."""

from __future__ import annotations

import json
import os
from typing import Any

from graphsweep.constraints import catalogue

RNG = {"model.use_te_rng_tracker": True}
TE = {"model.cuda_graph_impl": "transformer_engine", **RNG}
FULL = {"model.cuda_graph_impl": "local", "model.cuda_graph_scope": ["full_iteration"], **RNG,
        "rerun_state_machine.check_for_nan_in_loss": False}
MOE = {"model.num_moe_experts": 8}
ES = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
# add_bias_linear defaults to True in MCore, which the attention-bias rule would catch: the delay rules' cases turn it off
DELAY = {"comm_overlap.delay_wgrad_compute": True, "comm_overlap.overlap_moe_expert_parallel_comm": True,
         "model.add_bias_linear": False}
PACKED = {"dataset.enable_offline_packing": True}  # Bridge 0.6.2 (GPTSFTDatasetConfig)
PAD_MAX = {"dataset.dataset_kwargs.pad_to_max_length": True}
PAD_CU = {"dataset.offline_packing_specs.pad_cu_seqlens": True}
FSDP = {"ddp.use_megatron_fsdp": True}
MFSDP_V2 = {"ddp.megatron_fsdp_version": 2}  # MCore main 0.20.0 DDP config L93 / Bridge main 0.7.0 config.py L1071
# fine-grained activation offloading (Bridge 0.6.2 wants NVTE_CPU_OFFLOAD_V1=1 with TE >= 2.10)
OFFLOAD = {"model.fine_grained_activation_offloading": True}
OFFLOAD_ENV = {"NVTE_CPU_OFFLOAD_V1": "1"}
DROP_PAD = {"model.moe_expert_capacity_factor": 1.0, "model.moe_pad_expert_input_to_capacity": True}
LOCAL = {"model.cuda_graph_impl": "local", **RNG}  # per-layer local graphs (Bridge 0.6 refuses them: Core does not)
FULL_IMPL = {"model.cuda_graph_impl": "full_iteration", "model.cuda_graph_modules": [], **RNG,
             "rerun_state_machine.check_for_nan_in_loss": False}
# MoE with the ncclep flex dispatcher, zero-copy, static shapes (so a full-iteration graph can hold it)
NCCLEP = {**MOE, "model.moe_token_dispatcher_type": "flex", "model.moe_flex_dispatcher_backend": "ncclep",
          "model.moe_ncclep_zero_copy": True, "model.moe_ncclep_static_shape": True}
GTP = {"model.gtp_weight_remat_size": 2, "model.fp8": "hybrid", "model.moe_shared_expert_intermediate_size": 256,
       "model.recompute_granularity": "selective", "model.recompute_modules": ["shared_experts"], **MOE}


# variable sequence lengths need a non-allgather dispatcher on every model (MCore 0.19.2 transformer_config.py L2644-2649)
VLM = {"model.cuda_graph_scope": ["attn"], "model.moe_token_dispatcher_type": "alltoall"}


def case(settings, env=None, gpus=8, mcore="auto", te=None, torch=None, recipe=None, bridge=None):
    """mcore: the Megatron Core version the engine is told ("auto": the newest API, release unknown); bridge: the
    Megatron Bridge release it is told (None: unknown)."""
    return dict(settings=settings, env=env or {}, gpus=gpus, mcore=mcore, te_version=te, torch_version=torch,
                recipe=recipe, bridge_version=bridge)


# rule id -> (bad case, good case). Every good case is fully valid: no rule at all may fire on it.
CASES = {
    "cuda_graph_impl_invalid": (case({"model.cuda_graph_impl": "cudagraph"}),
                                case({**TE, "model.cuda_graph_scope": ["attn"]})),
    "cuda_graph_scope_unknown": (case({**TE, "model.cuda_graph_scope": ["attn", "mlpp"]}),
                                 case({**TE, "model.cuda_graph_scope": ["attn", "mlp"]})),
    "cuda_graph_modules_before_0_18": (case({**TE, "model.cuda_graph_modules": ["attn"]}, mcore="0.17"),
                                       case({**TE, "model.cuda_graph_scope": ["attn"]}, mcore="0.17")),
    "cuda_graph_scope_and_modules": (
        case({**TE, "model.cuda_graph_scope": ["attn"], "model.cuda_graph_modules": ["attn"]}),
        case({**TE, "model.cuda_graph_scope": None, "model.cuda_graph_modules": ["attn"]})),
    "local_only_full_iteration": (case({"model.cuda_graph_impl": "local", "model.cuda_graph_scope": ["attn"], **RNG}),
                                  case(FULL)),
    "full_iteration_with_te": (case({**TE, "model.cuda_graph_scope": ["full_iteration"]}), case(FULL)),
    "full_iteration_exclusive": (
        case({"model.cuda_graph_impl": "full_iteration", "model.cuda_graph_modules": ["attn"], **RNG,
              "rerun_state_machine.check_for_nan_in_loss": False}),
        case({"model.cuda_graph_impl": "full_iteration", "model.cuda_graph_modules": [], **RNG,
              "rerun_state_machine.check_for_nan_in_loss": False})),
    "full_iteration_nan_check": (case({**FULL, "rerun_state_machine.check_for_nan_in_loss": True}), case(FULL)),
    "te_rng_tracker": (case({"model.cuda_graph_impl": "transformer_engine", "model.cuda_graph_scope": ["attn"]}),
                       case({"model.cuda_graph_impl": "transformer_engine", "model.cuda_graph_scope": ["attn"],
                             "rng.te_rng_tracker": True})),
    "moe_and_moe_router": (case({**TE, **MOE, "model.cuda_graph_scope": ["moe", "moe_router"]}),
                           case({**TE, **MOE, "model.cuda_graph_scope": ["moe_router", "moe_preprocess"]})),
    "moe_preprocess_needs_router": (case({**TE, **MOE, "model.cuda_graph_scope": ["moe_preprocess"]}),
                                    case({**TE, **MOE, "model.cuda_graph_scope": ["moe_router", "moe_preprocess"]})),
    "moe_preprocess_dtoh": (
        case({**TE, **MOE, "model.cuda_graph_scope": ["moe_router", "moe_preprocess"],
              "model.moe_token_dispatcher_type": "alltoall", "model.moe_expert_capacity_factor": 1.0}),
        case({**TE, **MOE, "model.cuda_graph_scope": ["moe_router", "moe_preprocess"],
              "model.moe_token_dispatcher_type": "alltoall"})),
    "moe_scope_dense_model": (case({**TE, "model.num_moe_experts": 1, "model.cuda_graph_scope": ["moe_router"]}),
                              case({**TE, **MOE, "model.cuda_graph_scope": ["moe_router"]})),
    "moe_scope_dropless": (
        case({**TE, **MOE, "model.cuda_graph_scope": ["moe"]}),
        case({**TE, **MOE, "model.cuda_graph_scope": ["moe"], "model.moe_expert_capacity_factor": 1.0,
              "model.moe_pad_expert_input_to_capacity": True})),
    # the H200 MoE fixture: alltoall, no capacity factor; drop-and-pad (capacity factor + padding) is static
    "full_iteration_dropless_moe": (
        case({**FULL, **MOE, "model.moe_token_dispatcher_type": "alltoall"}),
        case({**FULL, **MOE, "model.moe_token_dispatcher_type": "alltoall", "model.moe_expert_capacity_factor": 1.0,
              "model.moe_pad_expert_input_to_capacity": True})),
    # MCore also needs a non-empty offload_modules (transformer_config.py L1852) and, with TE >= 2.10,
    # NVTE_CPU_OFFLOAD_V1=1 in the environment (Bridge 0.6.2 says so when it is missing)
    "fine_grained_offload_warmup": (
        case({**TE, "model.cuda_graph_scope": ["attn"], "model.fine_grained_activation_offloading": True,
              "model.offload_modules": ["core_attn"], "model.cuda_graph_warmup_steps": 0},
             env={"NVTE_CPU_OFFLOAD_V1": "1"}),
        case({**TE, "model.cuda_graph_scope": ["attn"], "model.fine_grained_activation_offloading": True,
              "model.offload_modules": ["core_attn"], "model.cuda_graph_warmup_steps": 3},
             env={"NVTE_CPU_OFFLOAD_V1": "1"})),
    # MLM PR #7407: the optimizer graph's count_zeros_fp32 calls .item() inside the capture
    "optimizer_graph_num_zeros": (
        case({"optimizer.optimizer_cuda_graph": True, "optimizer.log_num_zeros_in_grad": True}),
        case({"optimizer.optimizer_cuda_graph": True, "optimizer.log_num_zeros_in_grad": False})),
    # what fails when the graph is built or captured (graphsweep/constraints/capture.py, issue 36 item 4)
    "te_whole_layer_ep_overlap": (
        case({**TE, **MOE, "model.cuda_graph_modules": [], "comm_overlap.overlap_moe_expert_parallel_comm": True}),
        case({**TE, **MOE, "model.cuda_graph_modules": ["attn", "moe_router"],
              "comm_overlap.overlap_moe_expert_parallel_comm": True})),
    "te_graph_offload_versions": (
        case({**TE, "model.cuda_graph_modules": ["attn"], **OFFLOAD, "model.offload_modules": ["core_attn"]},
             env=OFFLOAD_ENV, torch="2.8.0", te="2.20.2"),
        case({**TE, "model.cuda_graph_modules": ["attn"], **OFFLOAD, "model.offload_modules": ["core_attn"]},
             env=OFFLOAD_ENV, torch="2.11.0", te="2.20.2")),
    "optimizer_graph_grad_norm_skip": (
        case({"optimizer.optimizer_cuda_graph": True, "optimizer.grad_norm_skip_threshold": 100.0}),
        case({"optimizer.optimizer_cuda_graph": True})),
    "optimizer_graph_cpu_offload": (
        case({"optimizer.optimizer_cuda_graph": True, "optimizer.optimizer_cpu_offload": True}),
        case({"optimizer.optimizer_cuda_graph": False, "optimizer.optimizer_cpu_offload": True})),
    "ncclep_zero_copy_warmup": (
        case({**FULL_IMPL, **NCCLEP, "model.cuda_graph_warmup_steps": 0}),
        case({**FULL_IMPL, **NCCLEP, "model.cuda_graph_warmup_steps": 3})),
    # MCore refuses attention dropout with graphed attention recompute at config time (runtime.py
    # attn_dropout_graphed_recompute, transformer_config.py L2550): both cases turn it off
    "te_graph_recompute_before_te_2_12": (
        case({**TE, "model.cuda_graph_modules": ["attn"], "model.recompute_granularity": "selective",
              "model.attention_dropout": 0.0}, te="2.11.0"),
        case({**TE, "model.cuda_graph_modules": ["attn"], "model.recompute_granularity": "selective",
              "model.attention_dropout": 0.0}, te="2.12.0")),
    "packed_moe_router_te_graph": (
        case({**TE, **MOE, "model.cuda_graph_modules": ["moe_router"], **PACKED, **PAD_MAX}, bridge="0.7.0"),
        case({**TE, **MOE, "model.cuda_graph_modules": ["moe_router"], **PACKED, **PAD_MAX}, bridge="0.6.2")),
    "mlp_scope_all_moe": (case({**TE, **MOE, "model.cuda_graph_scope": ["mlp"]}),
                          case({**TE, **MOE, "model.cuda_graph_scope": ["mlp"], "model.moe_layer_freq": [0, 1]})),
    "full_recompute_te_scope": (
        case({**TE, "model.cuda_graph_scope": ["attn"], "model.recompute_granularity": "full"}),
        case({**FULL, "model.recompute_granularity": "full"})),
    "moe_recompute_moe_router": (
        case({**TE, **MOE, "model.cuda_graph_scope": ["moe_router"], "model.recompute_granularity": "selective",
              "model.recompute_modules": ["moe"]}),
        case({**TE, **MOE, "model.cuda_graph_scope": ["moe_router"], "model.recompute_granularity": "selective",
              "model.recompute_modules": ["core_attn"]})),
    "cpu_offloading": (case({**TE, "model.cuda_graph_scope": ["mlp"], "model.cpu_offloading": True}),
                       case({"model.cuda_graph_impl": "full_iteration", **RNG, "model.cpu_offloading": True,
                             "rerun_state_machine.check_for_nan_in_loss": False})),
    # Bridge 0.6.2 keys; NVIDIA's packed SFT perf recipes pair TE scope ["mlp"] with pad_to_max_length (the good case)
    "packed_sequence_te_scope": (
        case({**TE, "model.cuda_graph_scope": ["attn"], **PACKED, **PAD_MAX, **PAD_CU}),
        case({**TE, "model.cuda_graph_scope": ["mlp"], **PACKED, **PAD_MAX})),
    "packed_pad_to_max_length": (
        case({**TE, "model.cuda_graph_scope": ["mlp"], **PACKED}),
        case({**TE, "model.cuda_graph_scope": ["mlp"], **PACKED, **PAD_MAX})),
    "packed_pad_cu_seqlens": (
        case({**FULL, **PACKED, **PAD_MAX}),
        case({**FULL, **PACKED, **PAD_MAX, **PAD_CU})),
    "delay_wgrad_te_version": (case({**TE, **DELAY, "model.cuda_graph_scope": ["attn"]}, te="2.10.0"),
                               case({**TE, **DELAY, "model.cuda_graph_scope": ["attn"]}, te="2.12.0")),
    "delay_wgrad_grad_accum_fusion": (
        case({**TE, **DELAY, "model.cuda_graph_scope": ["attn"], "model.gradient_accumulation_fusion": False}),
        case({**TE, **DELAY, "model.cuda_graph_scope": ["attn"], "model.gradient_accumulation_fusion": True})),
    "delay_wgrad_attn_bias": (
        case({**TE, **DELAY, "model.cuda_graph_scope": ["attn"], "model.add_qkv_bias": True}),
        case({**TE, **DELAY, "model.cuda_graph_scope": ["attn"], "model.add_qkv_bias": False,
              "model.add_bias_linear": False})),
    "delay_wgrad_needs_ep_overlap": (case({**TE, "model.cuda_graph_scope": ["attn"], "comm_overlap.delay_wgrad_compute": True,
                                           "model.add_bias_linear": False}),
                                     case({**TE, "model.cuda_graph_scope": ["attn"], **DELAY})),
    "expandable_segments_nccl_graph_register": (
        case({**TE, "model.cuda_graph_scope": ["attn"]}, env=ES),
        case({**TE, "model.cuda_graph_scope": ["attn"]}, env={**ES, "NCCL_GRAPH_REGISTER": "0"})),
    # field row 29: the full-iteration wrapper asserts nothing, the hang is the same (pytorch #158029)
    "full_iteration_expandable_segments": (case(FULL, env=ES), case(FULL, env={**ES, "NCCL_GRAPH_REGISTER": "0"})),
    # field row 20 (Bridge #1688, PR #5788): overlap_param_gather itself stays on
    "full_iteration_param_gather_with_optimizer_step": (
        case({**FULL, "comm_overlap.overlap_param_gather_with_optimizer_step": True}),
        case({**FULL, "comm_overlap.overlap_param_gather_with_optimizer_step": False})),
    # field row 23 (MLM PR #4232): per-layer TE graphs with Megatron-FSDP v1; the full-iteration form is the fix
    "fsdp_te_scoped_graphs": (
        case({**TE, "model.cuda_graph_scope": ["attn"], **FSDP}),
        case({**FULL, **FSDP, "ddp.megatron_fsdp_cuda_graph_mode": True,
              "ddp.fsdp_all_gather_in_start_param_sync": False})),
    # field row 24 (pytorch PR #176753, MLM PR #7348): gated on a known torch version
    "torch_register_generator_state_flood": (case({**TE, "model.cuda_graph_scope": ["attn"]}, torch="2.14.0"),
                                             case({**TE, "model.cuda_graph_scope": ["attn"]}, torch="2.13.0")),
    # field row 30 (Bridge r0.6.0 Qwen3VLModel / Exaone45Model): needs the recipe's name
    "vlm_graphs_fixed_seq_lengths": (
        case({**TE, **VLM, "model.variable_seq_lengths": True}, recipe="qwen3_vl_8b_pretrain_config"),
        case({**TE, **VLM, "model.variable_seq_lengths": False}, recipe="qwen3_vl_8b_pretrain_config")),
    # Core 0.19.2 transformer_config.py L2596-2642 (0.18.2 L2351-2372): fine-grained offloading under graphs. Bridge
    # 0.6 allows the local impl only for full iteration, so the good cases show the TE form
    "fine_grained_offload_local_modules": (
        case({**LOCAL, **MOE, "model.cuda_graph_modules": ["moe_router"], **OFFLOAD,
              "model.offload_modules": ["core_attn"]}, env=OFFLOAD_ENV),
        case({**TE, **MOE, "model.cuda_graph_modules": ["moe_router"], **OFFLOAD,
              "model.offload_modules": ["core_attn"]}, env=OFFLOAD_ENV)),
    "fine_grained_offload_local_whole_layer": (
        case({**LOCAL, **MOE, "model.cuda_graph_modules": [], **OFFLOAD, "model.offload_modules": ["expert_fc1"]},
             env=OFFLOAD_ENV),
        case({**TE, **MOE, "model.cuda_graph_modules": ["attn"], **OFFLOAD, "model.offload_modules": ["expert_fc1"]},
             env=OFFLOAD_ENV)),
    "fine_grained_offload_impl": (
        case({**LOCAL, **MOE, **DROP_PAD, "model.cuda_graph_modules": ["moe"], **OFFLOAD,
              "model.offload_modules": ["expert_fc1"]}, env=OFFLOAD_ENV),
        case({**TE, "model.cuda_graph_modules": ["attn"], **OFFLOAD, "model.offload_modules": ["core_attn"]},
             env=OFFLOAD_ENV)),
    "token_drop_offload": (
        case({**TE, **MOE, **DROP_PAD, "model.cuda_graph_modules": ["moe"], **OFFLOAD,
              "model.offload_modules": ["core_attn"]}, env=OFFLOAD_ENV),
        case({**TE, **MOE, **DROP_PAD, "model.cuda_graph_modules": ["attn"], **OFFLOAD,
              "model.offload_modules": ["core_attn"]}, env=OFFLOAD_ENV)),
    "fine_grained_offload_max_inflight": (
        case({**FULL_IMPL, **OFFLOAD, "model.offload_modules": ["core_attn"]}, env=OFFLOAD_ENV),
        case({**FULL_IMPL, **OFFLOAD, "model.offload_modules": ["core_attn"],
              "model.fine_grained_offloading_max_inflight_offloads": 0}, env=OFFLOAD_ENV)),
    # Core 0.19.2 transformer_config.py L2575-2594
    "gtp_local_graph_shared_experts_recompute": (
        case({**LOCAL, **GTP, "model.cuda_graph_modules": ["moe_router"]}),
        case({**TE, **GTP, "model.cuda_graph_modules": ["moe_router"]})),
    # field row 5 (MLM PR #7282): Megatron-FSDP v1 runs graphs; full iteration needs the two settings MLM sets itself
    "fsdp_full_iteration_graph_safe": (
        case({**FULL, **FSDP}),
        case({**FULL, **FSDP, "ddp.megatron_fsdp_cuda_graph_mode": True,
              "ddp.fsdp_all_gather_in_start_param_sync": False})),
    # field row 18 (Bridge main 0.7.0 config.py L1182/L1188/L1339) and row 17 (MCore main 0.20.0 L1414): keys that
    # Bridge 0.6.2 / Core 0.19.2 do not have (tests/constraints/test_bridge_agreement.py NOT_COMPARABLE)
    "mfsdp_v2_graphs": (case({**TE, "model.cuda_graph_scope": ["attn"], **FSDP, **MFSDP_V2}),
                        case({"model.cuda_graph_impl": "none", **FSDP, **MFSDP_V2})),
    "mfsdp_v2_optimizer_graph": (case({"model.cuda_graph_impl": "none", **FSDP, **MFSDP_V2,
                                       "optimizer.optimizer_cuda_graph": True}),
                                 case({"model.cuda_graph_impl": "none", **FSDP, **MFSDP_V2,
                                       "optimizer.optimizer_cuda_graph": False})),
    "energon_packing_graphs": (case({**TE, "model.cuda_graph_scope": ["attn"], "dataset.packing_buffer_size": 64}),
                               case({"model.cuda_graph_impl": "none", "dataset.packing_buffer_size": 64})),
    "moe_grouped_tensor_needs_grouped_gemm": (case({**MOE, "model.moe_use_grouped_tensor": True}),
                                              case({**MOE, "model.moe_use_grouped_tensor": True,
                                                    "model.moe_grouped_gemm": True})),
    "moe_a2a_overlap_with_graphs": (
        case({**TE, **MOE, "model.cuda_graph_scope": ["attn", "moe"], "model.moe_expert_capacity_factor": 1.0,
              "model.moe_pad_expert_input_to_capacity": True, "comm_overlap.overlap_moe_expert_parallel_comm": True}),
        case({**TE, **MOE, "model.cuda_graph_scope": ["attn", "moe_router"],
              "comm_overlap.overlap_moe_expert_parallel_comm": True})),
    "parallel_sizes_divide_gpus": (case({"model.tensor_model_parallel_size": 3}),
                                   case({"model.tensor_model_parallel_size": 2, "model.context_parallel_size": 2})),
    "expert_parallel_sizes_divide_gpus": (
        case({"model.expert_model_parallel_size": 4, "model.pipeline_model_parallel_size": 4}),
        case({"model.expert_model_parallel_size": 4, "model.pipeline_model_parallel_size": 2})),
    "global_batch_divisible": (case({"train.global_batch_size": 12, "train.micro_batch_size": 2}),
                               case({"train.global_batch_size": 32, "train.micro_batch_size": 2})),
}


GATED = {"mfsdp_v2_graphs": (0, 7), "mfsdp_v2_optimizer_graph": (0, 7), "energon_packing_graphs": (0, 7),
         "moe_grouped_tensor_needs_grouped_gemm": (0, 20)}


EP_A2A = {"model.num_moe_experts": 8, "model.expert_model_parallel_size": 2, "model.moe_token_dispatcher_type": "alltoall"}
CONTEXT: dict[str, dict[str, Any]] = {
    "delay_wgrad_te_version": EP_A2A,
    "delay_wgrad_grad_accum_fusion": EP_A2A,
    "delay_wgrad_attn_bias": EP_A2A,
    "delay_wgrad_needs_ep_overlap": EP_A2A,
    "moe_a2a_overlap_with_graphs": EP_A2A,
    # MCore: "num_moe_experts must be non None to use expert-parallel."
    "expert_parallel_sizes_divide_gpus": {"model.num_moe_experts": 8},
    # Bridge: "Megatron-FSDP requires the fsdp_dtensor checkpointing format!"
    "fsdp_full_iteration_graph_safe": {"checkpoint.ckpt_format": "fsdp_dtensor"},
    "fsdp_te_scoped_graphs": {"checkpoint.ckpt_format": "fsdp_dtensor"},
    "te_whole_layer_ep_overlap": EP_A2A,
    "ncclep_zero_copy_warmup": {"model.expert_model_parallel_size": 2},
    # MCore: 'Using recompute_granularity: full so recompute_method must be "block" or "uniform"'
    "full_recompute_te_scope": {"model.recompute_method": "uniform", "model.recompute_num_layers": 1},
}


EXTRA_CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    # the Bridge 0.6 full-iteration spelling (what mcore_version auto emits): MCore migrates it to
    # cuda_graph_impl=full_iteration before its CPU-offloading check, so this is valid on 0.19
    "cpu_offloading/good-local-full-iteration": ("cpu_offloading", "good", case(
        {"model.cuda_graph_impl": "local", "model.cuda_graph_scope": ["full_iteration"], "model.use_te_rng_tracker": True,
         "rerun_state_machine.check_for_nan_in_loss": False, "model.cpu_offloading": True})),
    # a2a overlap with a full-iteration graph: Core >= 0.18 checks only TE moe/mlp scopes (core_v0.18.0 L2443-2451),
    # 0.17.1 refuses every non-TE impl (L2143-2151); drop-and-pad so the MoE dispatcher is capturable
    "moe_a2a_overlap_with_graphs/good-full-iteration": ("moe_a2a_overlap_with_graphs", "good", case(
        {"model.cuda_graph_impl": "full_iteration", "model.cuda_graph_modules": [], "model.use_te_rng_tracker": True,
         "rerun_state_machine.check_for_nan_in_loss": False, "comm_overlap.overlap_moe_expert_parallel_comm": True,
         "model.moe_expert_capacity_factor": 1.0, "model.moe_pad_expert_input_to_capacity": True})),
}


def cases() -> list[dict[str, Any]]:
    listed = [(f"{rule_id}/{kind}", rule_id, kind, c)
              for rule_id in sorted(CASES) for kind, c in zip(("bad", "good"), CASES[rule_id])]
    listed += [(cid, rule_id, kind, c) for cid, (rule_id, kind, c) in EXTRA_CASES.items()]
    out = []
    for cid, rule_id, kind, c in listed:
        settings = {**CONTEXT.get(rule_id, {}), **c["settings"]}  # the case's own values win
        out.append({"id": cid, "rule": rule_id, "kind": kind, "settings": settings, "env": c["env"], "gpus": c["gpus"],
                    **{k: c[k] for k in INPUT_KEYS[3:]}})
    return out


INPUT_KEYS = ("settings", "env", "gpus", "mcore", "te_version", "torch_version", "recipe", "bridge_version")


def _inputs(c: dict[str, Any]) -> dict[str, Any]:
    # through JSON, as the fixture holds them (tuples become lists)
    return json.loads(json.dumps({k: c.get(k) for k in INPUT_KEYS}))


def message_matches(ours: str, exc_type: str | None, theirs: str | None) -> bool:
    """Our rule's message is Megatron's (or, for a bare KeyError, names Megatron's KeyError)."""
    theirs = (theirs or "").strip()
    if exc_type == "KeyError":
        return f"KeyError: {theirs}" in ours  # MCore raises KeyError('<name>'): ours says which names are valid
    # MCore's moe-recompute message ends in "with: " and the rest is another statement (see the rule's comment)
    return bool(theirs) and (ours.strip() == theirs or theirs.startswith(ours.strip()))


def engine(c: dict[str, Any], **given: Any) -> list[Any]:
    """The rule engine on a case (or record); `given` overrides what it is told (mcore=<release>)."""
    told = {k: c.get(k) for k in INPUT_KEYS[3:]}
    return catalogue.check(c["settings"], c["env"], gpus=c["gpus"], **{**told, **given})


def _log_live_count(check: str, release: str, n: int) -> None:
    """CI counts the live checks per release (.ci/run reads GRAPHSWEEP_LIVE_CHECK_LOG)."""
    if path := os.environ.get("GRAPHSWEEP_LIVE_CHECK_LOG"):
        with open(path, "a") as fh:
            fh.write(json.dumps({"check": check, "release": release, "cases": n}) + "\n")
