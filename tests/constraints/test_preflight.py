"""Preflight rules: each fires on its bad case and stays silent on a good one; Hydra values; `graphsweep check`."""

from __future__ import annotations

import argparse
import json

import pytest

from graphsweep.constraints import catalogue, hydra
from graphsweep.commands import check as check_cmd

from tests.support_preflight import (  # the case table every truth check shares
    CASES, DROP_PAD, ES, FSDP, FULL, GATED, LOCAL, MFSDP_V2, MOE, PAD_CU, PAD_MAX, RNG, TE,
)


def check_case(c: dict, **kw) -> list:
    given = {k: c[k] for k in ("mcore", "te_version", "torch_version", "recipe", "bridge_version")}
    return catalogue.check(c["settings"], c["env"], gpus=c["gpus"], **{**given, **kw})


def fired(c: dict) -> list[str]:
    return [v.rule for v in check_case(c)]


def test_every_rule_has_a_bad_and_a_good_case():
    assert set(CASES) == {r.id for r in catalogue.PREFLIGHT}


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires_on_its_bad_case(rule_id):
    assert rule_id in fired(CASES[rule_id][0])


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_no_rule_fires_on_the_good_case(rule_id):
    assert fired(CASES[rule_id][1]) == []


def test_every_violation_carries_rule_message_and_source():
    for bad, _ in CASES.values():
        for v in check_case(bad):
            assert v.rule and v.message and v.source


def _messages(settings, **kw):
    return {v.rule: v.message for v in catalogue.check(settings, kw.pop("env", {}), gpus=kw.pop("gpus", 1), **kw)}


def test_messages_are_those_bridge_raised_on_the_cpu_validator():
    # docs/megatron-facts.md §8.3: runtime_config_update on Bridge 0.6.2 / Core 0.19.2
    assert _messages({**TE, **MOE, "model.cuda_graph_scope": ["moe", "moe_router"]})["moe_and_moe_router"] == (
        "cuda_graph_modules must not contain both moe and moe_router.")
    assert _messages({**TE, **MOE, "model.cuda_graph_scope": ["moe_preprocess"]})["moe_preprocess_needs_router"] == (
        "moe_preprocess cuda graph is only supported with moe_router cuda graph.")
    assert _messages({"model.cuda_graph_impl": "local", "model.cuda_graph_scope": ["attn"], **RNG})[
        "local_only_full_iteration"].startswith(
        "Megatron Bridge supports model.cuda_graph_impl=\"local\" only for full-iteration CUDA graphs with scopes "
        "['attn']. Use model.cuda_graph_impl=\"transformer_engine\"")
    assert _messages({**FULL, "rerun_state_machine.check_for_nan_in_loss": True})["full_iteration_nan_check"] == (
        "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. "
        "Set rerun_state_machine.check_for_nan_in_loss=False.")
    assert _messages({**TE, "model.cuda_graph_scope": ["attn"], "model.recompute_granularity": "full"})[
        "full_recompute_te_scope"] == "full recompute is only supported with full iteration CUDA graph."
    assert _messages({**TE, "model.cuda_graph_scope": ["mlp"], "model.cpu_offloading": True})["cpu_offloading"] == (
        "CUDA graphs not supported with CPU offloading.")


def test_unknown_scope_names_the_valid_ones():
    msg = _messages({**TE, "model.cuda_graph_scope": ["atn"]})["cuda_graph_scope_unknown"]
    assert "'atn'" in msg and "attn, mlp, moe, moe_router, moe_preprocess, mamba" in msg


def test_old_api_generation_uses_its_own_wording_and_checks():
    # core_v0.17.1 transformer_config.py L1988, L1959-1965, L1981-1984
    m = _messages({**TE, **MOE, "model.cuda_graph_scope": ["moe", "moe_router"]}, mcore="0.17")
    assert m["moe_and_moe_router"] == "cuda_graph_scope must not contain both moe and moe_router."
    # full_iteration is not an impl before 0.18; CPU offloading rejects every impl there
    assert "cuda_graph_impl_invalid" in _messages({"model.cuda_graph_impl": "full_iteration"}, mcore="0.17.1")
    assert "cpu_offloading" in _messages({**FULL, "model.cpu_offloading": True}, mcore="0.17")
    assert _messages({**TE, "model.cuda_graph_scope": ["full_iteration"]}, mcore="0.17")["full_iteration_with_te"] == (
        "To use full iteration cuda graph, please use cuda_graph_impl=local instead of cuda_graph_impl=transformer_engine.")
    # a2a overlap: <= 0.17 refuses every non-TE impl (L2143-2151); >= 0.18 only TE moe/mlp scopes (0.18.0 L2443-2451)
    a2a = {**FULL, **MOE, "comm_overlap.overlap_moe_expert_parallel_comm": True}
    assert "moe_a2a_overlap_with_graphs" in _messages(a2a, mcore="0.17")
    assert "moe_a2a_overlap_with_graphs" not in _messages(a2a, mcore="0.18")


def test_nccl_graph_register_checks_follow_megatron_per_release():
    # TE helper asserts on every release; CudaGraphManager (per-layer local graphs) up to 0.18.2 only; a full
    # iteration makes no CudaGraphManager (0.17.1 module.py L172-181) and the wrapper never checked: its own rule
    local = {**LOCAL, "model.cuda_graph_modules": ["attn"]}
    assert "expandable_segments_nccl_graph_register" in _messages(local, env=ES, mcore="0.18.2")
    assert "expandable_segments_nccl_graph_register" not in _messages(local, env=ES, mcore="0.19.2")
    assert "full_iteration_expandable_segments" in _messages(local, env=ES, mcore="0.19.2")
    for mcore in ("0.17", "0.18", "0.19"):
        fired_ = _messages(FULL, env=ES, mcore=mcore)
        assert "expandable_segments_nccl_graph_register" not in fired_ and "full_iteration_expandable_segments" in fired_


def test_check_for_core_0_18_accepts_what_core_0_18_accepts(capsys):
    # core_v0.18.0: the full_iteration impl (L2221-2239), cuda_graph_modules (L942), CPU offloading with
    # full_iteration (L2243), a2a overlap with non-TE impls (L2443-2451)
    ok = [["model.cuda_graph_impl=full_iteration", "model.cuda_graph_modules=[]", "model.use_te_rng_tracker=true",
           "rerun_state_machine.check_for_nan_in_loss=false", "model.cpu_offloading=true"],
          ["model.cuda_graph_impl=transformer_engine", "model.cuda_graph_modules=[attn,mlp]", "model.use_te_rng_tracker=true"],
          ["model.cuda_graph_impl=full_iteration", "model.use_te_rng_tracker=true", "model.num_moe_experts=8",
           "rerun_state_machine.check_for_nan_in_loss=false", "comm_overlap.overlap_moe_expert_parallel_comm=true",
           *[f"{k}={hydra.format_value(v)}" for k, v in DROP_PAD.items()], "model.moe_token_dispatcher_type=alltoall"]]
    for args in ok:
        rc, out = run_check(capsys, "--json", "--mcore", "0.18", "--gpus", "8", *args)
        assert (rc, json.loads(out)["violations"]) == (0, []), args
        rc, out = run_check(capsys, "--json", "--mcore", "0.17", "--gpus", "8", *args)
        assert rc == 1, args  # and Core 0.17 refuses each of them
    # what 0.18 refuses: CPU offloading with TE graphs, TE graphs of moe with a2a overlap
    rc, out = run_check(capsys, "--json", "--mcore", "0.18", "model.cuda_graph_impl=transformer_engine",
                        "model.cuda_graph_modules=[attn]", "model.use_te_rng_tracker=true", "model.cpu_offloading=true")
    assert rc == 1 and [v["rule"] for v in json.loads(out)["violations"]] == ["cpu_offloading"]


def test_mcore_versions_map_to_their_api_generation():
    from graphsweep.constraints.graph import MODULES_API, SCOPE_API, normalise_mcore

    assert [normalise_mcore(v) for v in ("0.16", "0.17", "0.17.1", "0.18", "0.18.2", "0.19.2", "auto", None)] == [
        SCOPE_API, SCOPE_API, SCOPE_API, MODULES_API, MODULES_API, MODULES_API, MODULES_API, MODULES_API]


def test_nccl_graph_register_must_be_exactly_zero():
    bad = _messages({**TE, "model.cuda_graph_scope": ["attn"]}, env={**ES, "NCCL_GRAPH_REGISTER": "false"})
    assert "expandable_segments_nccl_graph_register" in bad


# rules of newer releases than the pinned stack (field rows 17, 18): gated on the release that has them


@pytest.mark.parametrize("rule_id", sorted(GATED))
def test_rules_of_newer_releases_do_not_apply_to_the_pinned_stack(rule_id):
    bad = CASES[rule_id][0]
    pinned = check_case(bad, bridge_version="0.6.2", mcore_release="0.19.2")
    assert rule_id not in {v.rule for v in pinned}
    newer = check_case(bad, bridge_version="0.7.0", mcore_release="0.20.0")
    assert rule_id in {v.rule for v in newer}  # and the release that has the rule fires it, as does an unknown one


def test_gated_messages_are_bridge_mains_and_mcore_mains():
    # Bridge main 0.7.0 training/config.py L1182, L1188, L1339; MCore main 0.20.0 transformer_config.py L1414
    assert _messages(CASES["mfsdp_v2_graphs"][0]["settings"])["mfsdp_v2_graphs"] == "MFSDP V2 does not support CUDA graphs."
    assert _messages(CASES["mfsdp_v2_optimizer_graph"][0]["settings"])["mfsdp_v2_optimizer_graph"] == (
        "MFSDP V2 does not support optimizer CUDA graphs.")
    assert _messages(CASES["energon_packing_graphs"][0]["settings"])["energon_packing_graphs"] == (
        "Energon native sequence packing does not support CUDA graphs.")
    assert _messages(CASES["moe_grouped_tensor_needs_grouped_gemm"][0]["settings"])[
        "moe_grouped_tensor_needs_grouped_gemm"] == "moe_use_grouped_tensor=True requires moe_grouped_gemm=True."


def test_megatron_fsdp_v1_runs_full_iteration_graphs_and_v2_refuses_graphs():
    # CloudAI's "FSDP excludes graphs" is out of date: v1 has megatron_fsdp_cuda_graph_mode; only v2 refuses graphs.
    # Per-layer TE graphs with v1 diverge and fault at replay (field row 23, MLM PR #4232): their own rule
    scoped = {**TE, "model.cuda_graph_scope": ["attn"], **FSDP}
    assert set(_messages(scoped, gpus=8)) == {"fsdp_te_scoped_graphs"}
    assert set(_messages({**scoped, **MFSDP_V2}, gpus=8)) == {"mfsdp_v2_graphs"}
    assert "mfsdp_v2_graphs" in _messages({"model.cuda_graph_impl": "none", **FSDP, **MFSDP_V2,
                                           "ddp.megatron_fsdp_cuda_graph_mode": True})
    # full iteration on v1: the all-gather in start_param_sync matters only with overlapped param gathers (DP > 1)
    safe_mode = {**FULL, **FSDP, "ddp.megatron_fsdp_cuda_graph_mode": True}
    assert "fsdp_full_iteration_graph_safe" in _messages(safe_mode, gpus=8)
    assert _messages(safe_mode, gpus=1) == {}
    assert _messages({**safe_mode, "comm_overlap.overlap_param_gather": False}, gpus=8) == {}
    msg = _messages({**FULL, **FSDP}, gpus=1)["fsdp_full_iteration_graph_safe"]
    assert "ddp.megatron_fsdp_cuda_graph_mode=True" in msg and "fsdp_all_gather_in_start_param_sync" not in msg


@pytest.mark.parametrize("packing", [{"dataset.enable_in_batch_packing": True}, {"packed_sequence": True},
                                     {"dataset.packed_sequence_specs.packed_sequence_size": 4096}])
def test_every_spelling_of_packing_reaches_the_te_attention_rule(packing):
    # in-batch packing (Bridge 0.6.2) and the older spellings also hand packed_seq_params to the layer
    def fired(scope):
        return {v.rule for v in catalogue.check({**TE, "model.cuda_graph_scope": scope, **packing, **PAD_MAX, **PAD_CU}, {}, gpus=8)}
    assert "packed_sequence_te_scope" in fired(["attn", "mlp"]) and "packed_sequence_te_scope" in fired(None)
    assert "packed_sequence_te_scope" not in fired(["mlp"])  # attention runs eagerly outside the graph


def test_in_batch_packing_has_no_offline_padding_rules():
    # Bridge checks pad_to_max_length / pad_cu_seqlens on offline_packing_specs only
    fired = {v.rule for v in catalogue.check({**FULL, "dataset.enable_in_batch_packing": True}, {}, gpus=8)}
    assert not {"packed_pad_to_max_length", "packed_pad_cu_seqlens"} & fired


def test_eager_settings_pass_graph_rules():
    assert _messages({"model.cuda_graph_impl": "none", "model.cpu_offloading": True,
                      "model.recompute_granularity": "full"}, env=ES) == {}


def test_string_values_are_read_as_hydra_values():
    assert _messages({"model.cuda_graph_impl": "transformer_engine", "model.cuda_graph_scope": "[attn,mlp]",
                      "model.use_te_rng_tracker": "true"}) == {}


@pytest.mark.parametrize(
    "text, value",
    [("[attn,moe_router]", ["attn", "moe_router"]), ("[]", []), ("null", None), ("True", True), ("false", False),
     ("2", 2), ("1e-4", 1e-4), ("0.5", 0.5), ("'a b'", "a b"), ("expandable_segments:True", "expandable_segments:True"),
     ("{a:1,b:[x]}", {"a": 1, "b": ["x"]}), ("bf16_mixed", "bf16_mixed")],
)
def test_parse_value(text, value):
    assert hydra.parse_value(text) == value


@pytest.mark.parametrize("value", [["attn", "mlp"], [], None, True, 3, 0.0, "RMSNorm", "a b", "12", "null", "x'y"])
def test_format_value_round_trips(value):
    assert hydra.parse_value(hydra.format_value(value)) == value


def test_a_bare_comma_list_is_a_sweep_and_is_refused():
    with pytest.raises(hydra.OverrideError, match=r"\[attn,mlp\]"):
        hydra.parse_override("model.cuda_graph_scope=attn,mlp")


def test_parse_override_forms():
    assert hydra.parse_override("+model.x=1") == ("model.x", 1, False)
    assert hydra.parse_override("~model.x") == ("model.x", None, True)
    with pytest.raises(hydra.OverrideError, match="KEY=VALUE"):
        hydra.parse_override("model.cuda_graph_impl")


# --------------------------------------------------------------------------------------------------
# graphsweep check


def run_check(capsys, *argv: str) -> tuple[int, str]:
    p = argparse.ArgumentParser()
    check_cmd.add_arguments(p)
    rc = check_cmd.run(p.parse_args(list(argv)))
    return rc, capsys.readouterr().out


def test_check_json_blocked(capsys):
    rc, out = run_check(capsys, "--json", "model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[attn,mlp]",
                        "model.recompute_granularity=full", "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    data = json.loads(out)
    assert rc == 1 and data["ok"] is False
    assert {v["rule"] for v in data["violations"]} == {
        "te_rng_tracker", "full_recompute_te_scope", "expandable_segments_nccl_graph_register"}
    assert all(set(v) >= {"rule", "message"} for v in data["violations"])


def test_check_json_ok(capsys):
    rc, out = run_check(capsys, "--json", "model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[attn]",
                        "model.use_te_rng_tracker=true", "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                        "env.NCCL_GRAPH_REGISTER=0")
    assert rc == 0 and json.loads(out) == {"ok": True, "violations": [], "sweep_adds": ["rng.te_rng_tracker=true"],
                                           "ok_in_sweep": True, "sweep_violations": []}


def test_check_gpus_pair_and_human_output(capsys):
    rc, out = run_check(capsys, "gpus=8", "model.tensor_model_parallel_size=3")
    assert rc == 1 and "parallel_sizes_divide_gpus: world_size (8) is not divisible" in out


def test_check_reads_the_recipe_and_torch_version(capsys):
    graph = ["model.cuda_graph_impl=transformer_engine", "model.cuda_graph_modules=[attn]", "model.use_te_rng_tracker=true"]
    rc, out = run_check(capsys, "--json", "--recipe", "exaone45_vl_33b_sft_16gpu_h100_bf16_config",
                        *graph, "model.variable_seq_lengths=true")
    (v,) = json.loads(out)["violations"]
    assert rc == 1 and v["message"].startswith("EXAONE 4.5 with CUDA graph requires fixed sequence lengths")
    assert run_check(capsys, *graph, "model.variable_seq_lengths=true")[0] == 0  # no recipe: nothing to say
    rc, out = run_check(capsys, "--json", "--torch-version", "2.14.1", *graph)
    assert rc == 1 and [v["rule"] for v in json.loads(out)["violations"]] == ["torch_register_generator_state_flood"]
    assert run_check(capsys, "--torch-version", "two", *graph)[0] == 2


def test_check_bad_argument_exits_2(capsys):
    rc, _ = run_check(capsys, "model.cuda_graph_scope=attn,mlp")
    assert rc == 2


# ---- what fails at run time, refused before a job (graphsweep/constraints/capture.py, issue 36 item 4) -------------


def test_run_time_failures_carry_megatrons_own_text():
    # each message is the text the run would print (the rule's needle), so a blocked cell and a run that hit it read alike
    from graphsweep.constraints.capture import CAPTURE_RULES

    for r in CAPTURE_RULES:
        bad = CASES[r.id][0]
        message = {v.rule: v.message for v in check_case(bad)}[r.id]
        assert any(n in message for n in r.needles) or r.frame, (r.id, message)
    assert _messages({**TE, **MOE, "model.cuda_graph_modules": [], "comm_overlap.overlap_moe_expert_parallel_comm": True})[
        "te_whole_layer_ep_overlap"] == "EP overlap must be disabled when CUDA graph captures the whole MLP/MoE part."
    assert _messages({"optimizer.optimizer_cuda_graph": True, "optimizer.optimizer_cpu_offload": True})[
        "optimizer_graph_cpu_offload"] == ("Attempting CUDA graph capture of step() for an instance of AdamW but "
                                           "param_groups' capturable is False.")


def test_run_time_rules_fire_only_where_their_failure_is():
    attn = {**TE, "model.cuda_graph_modules": ["attn"], "model.recompute_granularity": "selective",
            "model.attention_dropout": 0.0}
    assert "te_graph_recompute_before_te_2_12" in _messages(attn, te_version="2.11.0")
    assert _messages(attn, te_version="2.12.0") == {} and _messages(attn) == {}  # an unknown TE: cannot tell
    # mlp recompute with only attention in the graph runs eagerly
    assert _messages({**attn, "model.recompute_modules": ["mlp"]}, te_version="2.11.0") == {}
    offload = {**TE, "model.cuda_graph_modules": ["attn"], "model.fine_grained_activation_offloading": True,
               "model.offload_modules": ["core_attn"]}
    assert _messages(offload, env={"NVTE_CPU_OFFLOAD_V1": "1"}, te_version="2.13.0")["te_graph_offload_versions"] == (
        "Offloading modules captured in cuda graph requires TE>=2.14.0.")
    assert "te_graph_offload_versions" not in _messages({**offload, "model.offload_modules": ["attn_norm"]},
                                                        env={"NVTE_CPU_OFFLOAD_V1": "1"}, torch_version="2.8.0")
    # the optimizer graph checks only a finite threshold (inf is MCore's default and short-circuits, L1926)
    assert _messages({"optimizer.optimizer_cuda_graph": True, "optimizer.grad_norm_skip_threshold": "inf"}) == {}
    # ncclep zero-copy: only when the dispatcher is inside the graph and nothing ran it before the capture
    ncclep = {"model.moe_token_dispatcher_type": "flex", "model.moe_flex_dispatcher_backend": "ncclep",
              "model.moe_ncclep_zero_copy": True, "model.cuda_graph_warmup_steps": 0, **MOE}
    assert "ncclep_zero_copy_warmup" in _messages({**TE, **ncclep, "model.cuda_graph_modules": []})
    assert "ncclep_zero_copy_warmup" not in _messages({**TE, **ncclep, "model.cuda_graph_modules": ["attn"]})


def test_packed_moe_router_graphs_are_refused_only_by_bridge_main():
    # Bridge 0.6.2 has the packing keys too but no padding mask: the rule needs a Bridge known to be >= 0.7
    bad = CASES["packed_moe_router_te_graph"][0]
    assert "packed_moe_router_te_graph" in {v.rule for v in check_case(bad)}
    for older in ("0.6.2", None):
        assert "packed_moe_router_te_graph" not in {v.rule for v in check_case(bad, bridge_version=older)}
    attn_only = {**bad["settings"], "model.cuda_graph_modules": ["attn"]}
    assert "packed_moe_router_te_graph" not in _messages(attn_only, bridge_version="0.7.0", gpus=8)


def test_check_lists_the_run_time_rules_and_takes_a_bridge_version(capsys):
    from graphsweep.constraints.capture import CAPTURE_RULES

    rc, out = run_check(capsys, "--rules")
    assert rc == 0 and all(f"{r.id}\n" in out and r.source in out for r in CAPTURE_RULES)
    settings = ["model.cuda_graph_impl=transformer_engine", "model.cuda_graph_modules=[moe_router]",
                "model.use_te_rng_tracker=true", "model.num_moe_experts=8", "dataset.enable_offline_packing=true",
                "dataset.dataset_kwargs.pad_to_max_length=true"]
    rc, out = run_check(capsys, "--json", "--bridge-version", "0.7.0", *settings)
    assert rc == 1 and [v["rule"] for v in json.loads(out)["violations"]] == ["packed_moe_router_te_graph"]
    assert run_check(capsys, "--json", *settings)[0] == 0


def test_docs_list_the_run_time_rules_with_their_sources():
    from graphsweep.constraints.capture import capture_table
    from tests.support import ROOT

    assert capture_table() in (ROOT / "docs" / "failures.md").read_text()
