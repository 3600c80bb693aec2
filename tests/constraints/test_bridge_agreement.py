"""Truth check: graphsweep's preflight rules against Megatron Bridge's own validator.

Every rule's bad and good case (tests/constraints/test_preflight.py CASES, imported) is given to Bridge 0.6.2 /
Megatron Core 0.19.2's ``runtime_config_update`` (graphsweep/bridge_check.py, no GPU) and to the rule engine.
Where Bridge checks a rule at config time the two must agree: Bridge refuses exactly the configs the engine
blocks with a config-time rule, with the message the rule carries. Rules Bridge only checks later (model build,
capture, process-group setup) or not at all are listed with the reason, and their bad case must pass Bridge's
config-time validator (so a Bridge that starts checking one fails this test until the list is updated).

Two layers:
- LIVE (marker ``megatron``): needs the venv of tools/megatron-venv.sh, named by GRAPHSWEEP_MEGATRON_PYTHON
  (its python). It validates every case with Bridge, rewrites tests/fixtures/bridge_validator.json and asserts.
- RECORDED (always, also in CI): the committed JSON from a live run; the rule engine is re-run now against
  Bridge's recorded outcomes.

Re-record after changing a rule or a case:
  GRAPHSWEEP_MEGATRON_PYTHON=~/mbvenv/venv/bin/python .venv/bin/python -m pytest tests/constraints/test_bridge_agreement.py -m megatron
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from graphsweep.constraints import catalogue, hydra
from graphsweep.plan.planner import plan_sweep
from graphsweep.sweepspec.load import load_spec
from graphsweep.workloads import bridge_check
from tests.support import ROOT
from tests.support_preflight import INPUT_KEYS, _inputs, cases, engine, message_matches

FIXTURE = ROOT / "tests" / "fixtures" / "bridge_validator.json"
STACK = {"megatron-bridge": "0.6.2", "megatron-core": "0.19.2", "transformer-engine": "2.20.2", "torch": "2.11.0"}
# vanilla_gpt_pretrain_config + an empty CommOverlapConfig: builds offline (the Llama/Qwen recipes fetch HF configs)
RECIPE = bridge_check.TRUTH_CHECK_RECIPE
# The recipe leaves the model size at 0 (MCore divides by num_attention_heads); no rule looks at these keys.
BASE_OVERRIDES = ["model.num_layers=4", "model.hidden_size=256", "model.num_attention_heads=4"]

# Rules Bridge 0.6.2 / Core 0.19.2 check inside runtime_config_update (ConfigContainer.validate, which also
# finalises MCore's TransformerConfig; comm_overlap.setup; set_data_parallel_size). Their message must be Bridge's
# unless MESSAGE_DIFFERS says why not.
CONFIG_TIME = {
    "cuda_graph_impl_invalid", "cuda_graph_scope_unknown", "cuda_graph_scope_and_modules", "local_only_full_iteration",
    "full_iteration_with_te", "full_iteration_exclusive", "full_iteration_nan_check", "moe_and_moe_router",
    "moe_preprocess_needs_router", "moe_preprocess_dtoh", "moe_scope_dense_model", "moe_scope_dropless",
    "mlp_scope_all_moe", "full_recompute_te_scope", "moe_recompute_moe_router", "cpu_offloading",
    "delay_wgrad_grad_accum_fusion", "delay_wgrad_attn_bias", "delay_wgrad_needs_ep_overlap", "moe_a2a_overlap_with_graphs",
    "parallel_sizes_divide_gpus", "global_batch_divisible", "packed_pad_to_max_length", "packed_pad_cu_seqlens",
    "fine_grained_offload_warmup", "fine_grained_offload_local_modules", "fine_grained_offload_local_whole_layer",
    "fine_grained_offload_impl", "token_drop_offload", "fine_grained_offload_max_inflight",
    "gtp_local_graph_shared_experts_recompute",
}

# Config-time rules whose bad case Bridge refuses with another rule's message, checked first: Bridge 0.6 allows
# cuda_graph_impl=local only for full iteration, so Core's local-impl checks are never reached through Bridge
# (tests/constraints/test_preflight_releases.py holds them against Core's own TransformerConfig).
# rule -> the rule Bridge says.
REFUSED_FIRST_BY = {rule: "local_only_full_iteration" for rule in (
    "fine_grained_offload_local_modules", "fine_grained_offload_local_whole_layer", "fine_grained_offload_impl",
    "gtp_local_graph_shared_experts_recompute")}

# Rules Bridge does not check at config time: where Megatron does check them (or why nobody does).
NOT_AT_CONFIG_TIME = {
    "te_rng_tracker": "Bridge gpt_provider.py provide(): asserted when the model is built, not by runtime_config_update",
    "expandable_segments_nccl_graph_register": "MCore TECudaGraphHelper.__init__: asserted at capture, from the process environment",
    "fsdp_full_iteration_graph_safe": "graphsweep's rule (Megatron-LM training.py L2003-2012 sets both settings itself, "
                                      "Bridge 0.6.2 neither): Bridge accepts the pair at config time and the run hangs "
                                      "in param_gather_event.wait() (MLM PR #7282)",
    "expert_parallel_sizes_divide_gpus": "MCore initialize_model_parallel: checked when the expert process groups are built",
    "packed_sequence_te_scope": "MCore transformer_layer.py _te_cuda_graph_replay: asserted at the first TE graph replay "
                                "(Bridge accepts attention capture of packed sequences once pad_cu_seqlens is on)",
    "optimizer_graph_num_zeros": "MCore optimizer/clip_grads.py count_zeros_fp32: .item() inside the optimizer graph "
                                 "capture (MLM PR #7407); nothing checks the pair at config time",
    "full_iteration_param_gather_with_optimizer_step": "field row 20: fails at capture (cudaErrorStreamCaptureIsolation, "
                                                       "Bridge #1688); nothing checks the pair at config time",
    "fsdp_te_scoped_graphs": "field row 23: diverges, then an illegal memory access at replay (MLM PR #4232); "
                             "Bridge and Core accept the config",
    "full_iteration_expandable_segments": "field row 29: a hang (pytorch #158029); Megatron asserts only the TE form, at "
                                          "capture, from the process environment",
    "vlm_graphs_fixed_seq_lengths": "Bridge's Qwen3VLModel / Exaone45Model assert it when the model is built; the truth "
                                    "check builds the vanilla recipe (those recipes read a Hugging Face config)",
    "full_iteration_dropless_moe": "MCore token_dispatcher.py _maybe_dtoh_and_synchronize: fails inside the capture "
                                   "(H200: 'operation not permitted on an event last recorded in a capturing stream'); "
                                   "neither Bridge nor Core checks it at config time",
    # graphsweep/constraints/capture.py: what fails when the graph is built or captured (issue 36 item 4)
    "te_whole_layer_ep_overlap": "MCore transformer_layer.py _te_cuda_graph_replay L1255-1265: asserted at the first "
                                 "replay of a whole-layer TE graph; the config check (L2738-2746) sees moe/mlp modules",
    "optimizer_graph_grad_norm_skip": "MCore optimizer.py ChainedOptimizer.step L1923-1927: a host sync inside the "
                                      "optimizer graph capture (MLM #5889); nothing checks the pair at config time",
    "optimizer_graph_cpu_offload": "torch optimizer.py _cuda_graph_capture_health_check: raised inside the optimizer "
                                   "graph capture; nothing checks the pair at config time",
}

# Rules this stack cannot judge: Bridge runs, but not on what the rule is about.
NOT_COMPARABLE = {
    "cuda_graph_modules_before_0_18": "its cases are for Megatron Core <= 0.17 (cuda_graph_scope API); the venv has 0.19.2 "
                                      "(tests/constraints/test_preflight_releases.py checks it against Core 0.17.1)",
    "torch_register_generator_state_flood": "its bad case is torch 2.14.0; the venv runs torch 2.11.0, and the flood is "
                                            "a run-time log, not a config check",
    "delay_wgrad_te_version": "its bad case is Transformer Engine 2.10.0; Bridge checks the TE it runs with (2.20.2)",
    "te_graph_offload_versions": "its bad case is torch 2.8.0; the venv runs torch 2.11.0, and MCore asserts the versions "
                                 "when the model is built (transformer_layer.py L1503-1509), not at config time",
    "te_graph_recompute_before_te_2_12": "its bad case is Transformer Engine 2.11.0; the venv runs 2.20.2, and the "
                                         "failure comes inside the TE capture (make_graphed_callables' .grad())",
    "packed_moe_router_te_graph": "Bridge main 0.7.0 gpt_step.py L184-198 raises it at the first forward of a packed "
                                  "batch; Bridge 0.6.2 gives packed batches no padding mask",
    "ncclep_zero_copy_warmup": "MCore token_dispatcher.py _NCCLEPManager L1635-1637 asserts it at the dispatcher's "
                               "first call (inside the capture when cuda_graph_warmup_steps is 0); Bridge's config "
                               "validation of the ncclep dispatcher needs a CUDA device (`Found no NVIDIA driver`), "
                               "and the truth check runs without one",
    # field rows 17-18: texts of Bridge main 0.7.0 / MCore main 0.20.0, whose keys Bridge 0.6.2 / Core 0.19.2 lack
    # (the override fails as an unknown key); tests/constraints/test_preflight.py checks the gate on the pinned releases
    "mfsdp_v2_graphs": "ddp.megatron_fsdp_version exists from MCore 0.20 / Bridge 0.7 (Bridge main config.py L1188)",
    "mfsdp_v2_optimizer_graph": "ddp.megatron_fsdp_version exists from MCore 0.20 / Bridge 0.7 (Bridge main config.py L1182)",
    "energon_packing_graphs": "the EnergonDatasetConfig packing_buffer_size check exists from Bridge 0.7 (main config.py L1339)",
    "moe_grouped_tensor_needs_grouped_gemm": "model.moe_use_grouped_tensor exists from MCore 0.20 (main transformer_config.py L1414)",
}

# The recipe a rule's cases are validated with, where the default one lacks the fields the rule is about.
RULE_RECIPE = {rule: bridge_check.PACKED_TRUTH_CHECK_RECIPE
               for rule in ("packed_sequence_te_scope", "packed_pad_to_max_length", "packed_pad_cu_seqlens")}

# Agreement on the verdict, not on the words: (case id -> why). The test fails when one of these starts to match,
# so the list cannot go stale.
MESSAGE_DIFFERS = {
    "parallel_sizes_divide_gpus/bad": "Bridge config.py get_data_parallel_size asserts with a multi-line f-string "
                                      "(\"world size (8) is not divisible by total_model_size (model_cfg."
                                      "tensor_model_parallel_size=3 * ...)\"); ours is MCore parallel_state's wording",
    "global_batch_divisible/bad": "Bridge checks the eval batch (eval_global_batch_size defaults to train.global_batch_size): "
                                  "\"eval_global_batch_size (12) must be divisible by eval_micro_batch_size * "
                                  "eval_data_parallel_size (2 * 8 = 16)\"; ours is about the training batch",
}

# Real disagreements the rule engine has with Bridge (case id -> what is wrong and the fix, for the rule owner).
# Each must still disagree: fixing the rule makes this test fail until the entry is removed.
KNOWN_DISAGREEMENTS: dict[str, str] = {}  # none left (2026-11-30: attention-bias default and cpu_offloading fixed)

# Cases Bridge is not asked about at all (the venv's Core is 0.19.2).
SKIP_MCORE = {"0.17"}

# Settings a rule's cases leave to the recipe but Bridge needs before it reaches the rule: non-graph prerequisites
# (Bridge comm_overlap.py checks overlap_moe_expert_parallel_comm first: expert parallel > 1, an MoE model, the
# alltoall/flex dispatcher). Added to both the Bridge cell and the engine's input, so both judge the same config.
def test_every_rule_is_classified_once():
    ids = {r.id for r in catalogue.PREFLIGHT}
    groups = [CONFIG_TIME, set(NOT_AT_CONFIG_TIME), set(NOT_COMPARABLE)]
    assert set().union(*groups) == ids
    assert sum(len(g) for g in groups) == len(ids)
    assert set(REFUSED_FIRST_BY) <= CONFIG_TIME and set(REFUSED_FIRST_BY.values()) <= CONFIG_TIME


# --------------------------------------------------------------------------------------------------
# The cases and the agreement rule (shared by both layers)


# Cases the truth check added (id -> rule, kind, case), each from a disagreement Bridge showed.
def disagreements(records: list[dict[str, Any]]) -> dict[str, str]:
    """Case id -> how the rule engine and Bridge's recorded verdict disagree (verdict or message), in words."""
    problems: dict[str, str] = {}
    for r in records:
        rid, rule = r["id"], r["rule"]
        if rule in NOT_COMPARABLE or r["outcome"] == "not_run":
            continue
        fired = {v.rule: v.message for v in engine(r)}
        config_fired = {k: m for k, m in fired.items() if k in CONFIG_TIME}
        what = f"Bridge {r['outcome']}" + (f" ({r['exc_type']}: {r['message']})" if r["exc_type"] else "")
        if r["outcome"] in ("override_error", "recipe_error"):
            problems[rid] = f"{what}: the case's settings do not apply to Bridge {r['versions'].get('megatron-bridge')}"
        elif r["outcome"] == "rejected" and not config_fired:
            problems[rid] = f"{what}, but no config-time rule fires (engine: {sorted(fired) or 'nothing'})"
        elif r["outcome"] == "ok" and config_fired:
            problems[rid] = f"{what}, but the engine blocks it with config-time rules {sorted(config_fired)}"
        elif r["kind"] == "bad" and rule in NOT_AT_CONFIG_TIME and r["outcome"] != "ok":
            # a rule listed as checked later must pass Bridge's config-time validator on its bad case
            problems[rid] = f"{what}: {rule} is listed as not checked at config time; move it to CONFIG_TIME"
        elif r["kind"] == "bad" and rule in CONFIG_TIME and rule not in config_fired:
            problems[rid] = f"the engine does not fire {rule} on its own bad case"
        elif r["outcome"] == "rejected" and not any(
                message_matches(m, r["exc_type"], r["message"]) for m in config_fired.values()):
            problems[rid] = f"message: {what}, but the engine says {config_fired}"
    return problems


def assert_agreement(records: list[dict[str, Any]]) -> None:
    problems = disagreements(records)
    unexpected = {k: v for k, v in problems.items() if k not in KNOWN_DISAGREEMENTS
                  and not (k in MESSAGE_DIFFERS and v.startswith("message: "))}
    assert unexpected == {}
    # the lists of known differences are still true (fixing a rule makes its entry fail here)
    assert {k for k in KNOWN_DISAGREEMENTS if k not in problems} == set(), "fixed: remove from KNOWN_DISAGREEMENTS"
    assert {k for k in MESSAGE_DIFFERS if not problems.get(k, "").startswith("message: ")} == set(), (
        "messages now match: remove from MESSAGE_DIFFERS")


# --------------------------------------------------------------------------------------------------
# LIVE: Bridge itself


def _bridge_python() -> str | None:
    return os.environ.get("GRAPHSWEEP_MEGATRON_PYTHON") or None


def run_live(worker: bridge_check.BridgeWorker) -> dict[str, Any]:
    """Validate every case with Bridge; the fixture's content."""
    all_cases = cases()
    to_run = [c for c in all_cases if c["mcore"] not in SKIP_MCORE]
    cells = [bridge_check.cell_from_settings(c["id"], c["settings"], c["env"], gpus=c["gpus"],
                                             recipe=RULE_RECIPE.get(c["rule"], RECIPE), base_overrides=BASE_OVERRIDES)
             for c in to_run]
    report = bridge_check.validate_cells(cells, worker.interpreter, timeout=1200, worker=worker)
    got = report.by_id()
    records = []
    for c in all_cases:
        v = got.get(c["id"])
        rec = {"id": c["id"], "rule": c["rule"], "kind": c["kind"], **_inputs(c),
               "bridge_recipe": RULE_RECIPE.get(c["rule"], RECIPE),
               "overrides": next((cell.overrides for cell in cells if cell.id == c["id"]), []),
               "versions": report.versions}
        if v is None:
            rec.update(outcome="not_run", exc_type=None, message=f"mcore {c['mcore']} case; the venv has Core "
                       f"{report.versions.get('megatron-core')}", stage=None)
        else:
            rec.update(outcome=v.outcome, exc_type=v.exc_type, message=v.message, stage=v.stage)
        records.append(rec)
    return {"about": "Megatron Bridge runtime_config_update on every preflight case "
                     "(tests/constraints/test_bridge_agreement.py)",
            "versions": report.versions, "python": report.python, "recipe": RECIPE,
            "environment": "RANK=0 LOCAL_RANK=0 WORLD_SIZE=<gpus>, no GPU", "records": records}


@pytest.mark.megatron
@pytest.mark.slow
@pytest.mark.skipif(not _bridge_python(), reason="GRAPHSWEEP_MEGATRON_PYTHON is not set (build: tools/megatron-venv.sh)")
def test_live_bridge_validator_agrees_with_the_rule_engine(bridge_worker):
    data = run_live(bridge_worker)
    FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    assert {k: data["versions"].get(k) for k in STACK} == STACK, "the venv is not the pinned stack"
    from tests.support_preflight import _log_live_count

    _log_live_count("bridge", f"Bridge {STACK['megatron-bridge']} / Core {STACK['megatron-core']}",
                    sum(r["outcome"] != "not_run" for r in data["records"]))
    assert_agreement(data["records"])


# --------------------------------------------------------------------------------------------------
# RECORDED: the committed live run


def _recorded() -> dict[str, Any]:
    if not FIXTURE.exists():
        pytest.fail(f"{FIXTURE} is missing: record it with the live test (see this file's docstring)")
    return json.loads(FIXTURE.read_text())


def test_recorded_run_is_of_the_pinned_stack_and_covers_every_case():
    data = _recorded()
    assert {k: data["versions"].get(k) for k in STACK} == STACK
    recorded = {r["id"]: r for r in data["records"]}
    stale = [c["id"] for c in cases() if c["id"] not in recorded
             or {k: recorded[c["id"]].get(k) for k in INPUT_KEYS} != _inputs(c)]
    assert not stale, f"cases changed since the recording: {stale}; re-record with the live test (docstring)"


def test_recorded_bridge_verdicts_agree_with_the_rule_engine():
    assert_agreement(_recorded()["records"])


def test_recorded_config_time_rules_were_really_refused_by_bridge_with_their_message():
    # the strong direction, spelled out: each config-time rule's bad case raised in Bridge with that rule's
    # message, and its good case passed (except the listed known disagreements)
    recorded = {r["id"]: r for r in _recorded()["records"]}
    for rule in sorted(CONFIG_TIME):
        bad = recorded[f"{rule}/bad"]
        assert bad["outcome"] == "rejected", rule
        ours = {v.rule: v.message for v in engine(bad)}[REFUSED_FIRST_BY.get(rule, rule)]
        assert message_matches(ours, bad["exc_type"], bad["message"]) or f"{rule}/bad" in MESSAGE_DIFFERS, rule
        if f"{rule}/good" not in KNOWN_DISAGREEMENTS:
            assert recorded[f"{rule}/good"]["outcome"] == "ok", rule


def test_recorded_later_rules_pass_bridge_config_validation():
    recorded = {r["id"]: r for r in _recorded()["records"]}
    assert {rule: recorded[f"{rule}/bad"]["outcome"] for rule in NOT_AT_CONFIG_TIME} == {
        rule: "ok" for rule in NOT_AT_CONFIG_TIME}


def test_recorded_gated_rules_keys_do_not_exist_on_the_pinned_stack():
    # why the field rows 17-18 rules are gated on Bridge >= 0.7 / Core >= 0.20: Bridge 0.6.2 refuses their keys
    from tests.support_preflight import GATED

    recorded = {r["id"]: r for r in _recorded()["records"]}
    for rule in GATED:
        for kind in ("bad", "good"):
            r = recorded[f"{rule}/{kind}"]
            assert (r["outcome"], r["exc_type"]) == ("override_error", "OverridesError"), r["id"]
            assert "Could not override" in r["message"], r["id"]


def test_recorded_packed_cases_ran_on_bridge_s_packed_sft_dataset():
    recorded = {r["id"]: r for r in _recorded()["records"]}
    for rule, recipe in RULE_RECIPE.items():
        for kind in ("bad", "good"):
            r = recorded[f"{rule}/{kind}"]
            assert r["bridge_recipe"] == recipe and r["outcome"] in ("ok", "rejected"), r["id"]


# --------------------------------------------------------------------------------------------------
# The controller side of bridge_check without Megatron


def test_cells_carry_hydra_overrides_that_read_back_as_the_settings():
    settings = {"model.cuda_graph_impl": "transformer_engine", "model.cuda_graph_scope": ["attn", "mlp"],
                "model.cuda_graph_modules": None, "model.use_te_rng_tracker": True, "train.micro_batch_size": 2}
    cell = bridge_check.cell_from_settings("x", settings, {"NCCL_GRAPH_REGISTER": 0}, gpus=8, base_overrides=["a.b=1"])
    assert cell.overrides[0] == "a.b=1" and cell.gpus == 8 and cell.env == {"NCCL_GRAPH_REGISTER": "0"}
    assert dict(hydra.parse_override(o)[:2] for o in cell.overrides[1:]) == settings


def test_a_python_without_bridge_is_reported_with_what_to_do():
    cell = bridge_check.cell_from_settings("x", {"model.cuda_graph_impl": "none"})
    with pytest.raises(bridge_check.BridgeCheckError, match="could not import Megatron Bridge"):
        bridge_check.validate_cells([cell], sys.executable, timeout=300)


def test_a_missing_interpreter_is_reported():
    with pytest.raises(bridge_check.BridgeCheckError, match="megatron-venv.sh"):
        bridge_check.validate_cells([], Path("/nonexistent/python3.12"))


# --------------------------------------------------------------------------------------------------
# LIVE: the worker's command line, and the example sweep's exact runs


@pytest.mark.megatron
@pytest.mark.skipif(not _bridge_python(), reason="GRAPHSWEEP_MEGATRON_PYTHON is not set (build: tools/megatron-venv.sh)")
def test_live_command_line_reports_bridges_assertion(tmp_path):
    import subprocess

    argv = [_bridge_python(), str(ROOT / "graphsweep" / "workloads" / "bridge_check.py"), "--gpus", "1", *BASE_OVERRIDES,
            "model.cuda_graph_impl=local", "model.cuda_graph_scope=[full_iteration]", "model.use_te_rng_tracker=true"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = json.loads(proc.stdout)  # stdout carries the verdict only; Megatron's prints go to stderr
    assert proc.returncode == 1 and out["outcome"] == "rejected" and out["exc_type"] == "AssertionError"
    assert out["message"].startswith("check_for_nan_in_loss must be disabled when using full_iteration CUDA graph.")


@pytest.mark.megatron
@pytest.mark.skipif(not _bridge_python(), reason="GRAPHSWEEP_MEGATRON_PYTHON is not set (build: tools/megatron-venv.sh)")
def test_live_tiny_example_sweep_runs_pass_bridges_validator(bridge_worker):
    planned = plan_sweep(load_spec(ROOT / "configs" / "examples" / "megatron-tiny-vanilla-gpt.yaml"))
    one_per_arm = {p.run.run_id.rsplit(".", 1)[0]: p for p in planned}  # repeats have the same overrides
    cells = bridge_check.cells_from_plans((p.run.run_id, p.launch, p.run.workload["recipe"]) for p in one_per_arm.values())
    report = bridge_check.validate_cells(cells, _bridge_python(), worker=bridge_worker)
    assert {v.id: (v.outcome, v.message) for v in report.verdicts} == {
        v.id: (bridge_check.OK, None) for v in report.verdicts}


@pytest.mark.megatron
@pytest.mark.skipif(not _bridge_python(), reason="GRAPHSWEEP_MEGATRON_PYTHON is not set (build: tools/megatron-venv.sh)")
def test_live_preflight_runs_blocks_each_run_with_bridges_words(bridge_worker):
    import dataclasses

    from graphsweep.workloads.registry import launch_plan

    runs = load_spec(ROOT / "configs" / "examples" / "megatron-tiny-vanilla-gpt.yaml").runs()
    # CPU offloading on every arm
    settings = dict(runs[0].settings)
    runs = [dataclasses.replace(r, settings={**settings, "model.cpu_offloading": True}) for r in runs]
    got = bridge_check.preflight_plans([(r.run_id, launch_plan(r), r.workload["recipe"]) for r in runs],
                                       _bridge_python(), worker=bridge_worker)
    assert set(got) == {r.run_id for r in runs}  # every repeat answered (each distinct cell validated once)
    by_variant = {r.variant.name: got[r.run_id] for r in runs}
    assert by_variant["eager"] == []
    for name in ("attn", "attn+mlp"):
        (v,) = by_variant[name]
        assert v.rule == "bridge_rejected" and v.message == "ValueError: CUDA graphs not supported with CPU offloading."
        assert v.source.startswith("Megatron Bridge 0.6.2 / Core 0.19.2 runtime_config_update")
    assert by_variant["full_iteration"] == []  # local + [full_iteration] becomes the full_iteration impl: allowed
