"""The megatron_bridge workload: exact commands (golden), fairness between arms, launch shape, cost, entry module.

Regenerate the golden files after a deliberate change:
  GRAPHSWEEP_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/workloads/test_megatron.py
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from graphsweep.resources import SOURCE_ROOT
from graphsweep.workloads import megatron_bridge as megatron
from graphsweep.parse.run import parse_run
from graphsweep.workloads.registry import launch_plan, preflight
from graphsweep.sweepspec.load import load_spec, validate_spec
from graphsweep.records import SpecError
from tests.support import LOGS, ROOT

EXAMPLES = sorted((ROOT / "configs" / "examples").glob("megatron-*.yaml"))
EXAMPLE = {p.stem: p for p in EXAMPLES}
# What preflight blocks in the examples on purpose: the dropless MoE's full-iteration cell (it failed at capture on
# an H200: docs/results-h200.md, section 3)
EXPECTED_BLOCKS = {"megatron-tiny-moe": {"full_iteration": ["full_iteration_dropless_moe"]},
                   "megatron-tiny-moe-paired": {"full_iteration": ["full_iteration_dropless_moe"]},
                   "megatron-moe-128e": {"full_iteration": ["full_iteration_dropless_moe"]}}
GOLDEN = ROOT / "tests" / "golden"


def golden_text(spec_path: Path) -> str:
    spec = load_spec(spec_path)
    lines = [f"# {spec.name}: one run per line, run_id then the exact command ({{REPO}} = repository root)"]
    for run in spec.runs():
        if run.repeat <= spec.repeats:  # the first look's runs (the loop's later repeats differ in the repeat only)
            lines.append(f"{run.run_id}\n  {launch_plan(run).shell().replace(str(SOURCE_ROOT), '{REPO}')}")
    return "\n".join(lines) + "\n"


def test_the_example_sweeps_validate():
    names = {load_spec(p).name for p in EXAMPLES}
    assert names == {"megatron-llama3-8b-dense", "megatron-1b-dense", "megatron-qwen3-30b-a3b-moe", "megatron-tiny-vanilla-gpt",
                     "megatron-tiny-moe", "megatron-tiny-moe-paired", "megatron-tiny-2gpu", "megatron-moe-128e",
                     "megatron-moe-128e-padded", "megatron-moe-128e-paired"}


@pytest.mark.parametrize("spec_path", EXAMPLES, ids=lambda p: p.stem)
def test_golden_command_lines(spec_path):
    path = GOLDEN / f"{spec_path.stem}.txt"
    text = golden_text(spec_path)
    if os.environ.get("GRAPHSWEEP_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("spec_path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_pass_preflight(spec_path):
    blocked: dict[str, list[str]] = {}
    for r in load_spec(spec_path).runs():
        if rules := [v.rule for v in preflight(r)]:
            blocked[r.variant.name] = rules
    assert blocked == EXPECTED_BLOCKS.get(spec_path.stem, {})


@pytest.mark.parametrize("spec_path", EXAMPLES, ids=lambda p: p.stem)
def test_arms_of_a_shape_differ_only_in_the_graph_switch(spec_path):
    switch = set(megatron.GRAPH_KEYS) | set(megatron.RNG_KEYS)
    by_shape: dict[str, list] = {}
    for run in load_spec(spec_path).runs():
        by_shape.setdefault(run.shape_id, []).append(run)
    for runs in by_shape.values():
        plans = [launch_plan(r) for r in runs]
        common = [{k: v for k, v in p.overrides.items() if k not in switch} for p in plans]
        assert all(c == common[0] for c in common)
        assert all(p.env == plans[0].env for p in plans)
        assert all((p.nodes, p.gpus_per_node, p.srun_args) == (plans[0].nodes, plans[0].gpus_per_node, plans[0].srun_args)
                   for p in plans)


def test_full_iteration_sweep_turns_nan_checks_off_in_every_arm_including_eager():
    spec = load_spec(ROOT / "configs/examples/megatron-llama3-8b-dense.yaml")
    for run in spec.runs():
        o = megatron.run_overrides(run)
        assert o["rerun_state_machine.check_for_nan_in_loss"] is False and o["ddp.check_for_nan_in_grad"] is False


def test_without_full_iteration_variant_nan_checks_keep_recipe_values():
    spec = load_spec(ROOT / "configs/examples/megatron-qwen3-30b-a3b-moe.yaml")
    for run in spec.runs():
        assert not set(megatron.NAN_KEYS) & set(megatron.run_overrides(run))


def test_rng_tracker_only_on_graph_arms_and_window_from_spec():
    spec = load_spec(ROOT / "configs/examples/megatron-tiny-vanilla-gpt.yaml")
    for run in spec.runs():
        o = megatron.run_overrides(run)
        assert o["train.train_iters"] == run.warmup + 1 + run.iterations == 30
        assert o["logger.log_interval"] == 1 and o["model.cuda_graph_warmup_steps"] == 3
        assert (o.get("model.use_te_rng_tracker") is True) == run.variant.is_graph
        assert (o.get("rng.te_rng_tracker") is True) == run.variant.is_graph


def _runs(spec_path: str, **changes):
    raw = load_spec(ROOT / spec_path).raw
    raw = {**raw, **changes}
    return validate_spec(raw, "test").runs()


def test_api_generations_never_set_scope_and_modules_together():
    # <= 0.17 has only cuda_graph_scope; >= 0.18 cuda_graph_modules and the full_iteration impl (core_v0.18.0)
    for mcore in ("0.17", "0.17.1", "0.18", "0.18.2", "0.19", "auto"):
        for run in _runs("configs/examples/megatron-llama3-8b-dense.yaml",
                         workload={**load_spec(EXAMPLE["megatron-llama3-8b-dense"]).raw["workload"], "mcore_version": mcore}):
            o = megatron.run_overrides(run)
            assert o.get("model.cuda_graph_scope") is None or "model.cuda_graph_modules" not in o
            impl = o["model.cuda_graph_impl"]
            if mcore.startswith(("0.18", "0.19")):
                assert impl in ("none", "transformer_engine", "full_iteration")
                assert "model.cuda_graph_modules" in o
            else:
                assert impl in ("none", "transformer_engine", "local")
                if impl == "local":
                    assert o["model.cuda_graph_scope"] == ["full_iteration"]


def test_slurm_shape_two_nodes_one_task_per_gpu():
    run = next(r for r in load_spec(ROOT / "configs/examples/megatron-qwen3-30b-a3b-moe.yaml").runs() if r.arm == "graph")
    plan = launch_plan(run)
    assert (plan.nodes, plan.gpus_per_node, plan.tasks_per_node, plan.srun) == (2, 8, 8, True)
    assert plan.srun_args[:4] == ["--nodes=2", "--ntasks=16", "--ntasks-per-node=8", "--kill-on-bad-exit=1"]
    assert "--container-image=nvcr.io/nvidia/nemo:25.11" in plan.srun_args
    assert f"--container-mounts={SOURCE_ROOT}:{SOURCE_ROOT}" in plan.srun_args
    assert megatron.slurm_parameters(run) == {
        "nodes": 2, "tasks_per_node": 8, "gpus_per_node": 8, "slurm_use_srun": False, "timeout_min": 45}


def test_per_rank_logs_through_srun():
    run = load_spec(EXAMPLE["megatron-llama3-8b-dense"]).runs()[0]
    plan = megatron.launch_plan(run, rank_log_dir="/scratch/r1")
    assert "--output=/scratch/r1/rank-%t.log" in plan.srun_args


def test_gpus_that_do_not_fill_nodes_are_refused():
    """When the spec loads (one line naming the key), and by the run's own layout (a run made another way)."""
    raw = load_spec(EXAMPLE["megatron-qwen3-30b-a3b-moe"]).raw
    with pytest.raises(SpecError, match="key 'fixed.gpus' = 12: does not fill 2 nodes of 8 GPUs"):
        validate_spec({**raw, "fixed": {**raw["fixed"], "gpus": 12}}, "test")
    run = validate_spec(raw, "test").runs()[0]
    run = dataclasses.replace(run, gpus=12)
    with pytest.raises(megatron.MegatronSpecError, match="gpus_per_node"):
        launch_plan(run)
    assert preflight(run)[0].rule == "unlaunchable"


def test_local_cluster_uses_one_torchrun():
    run = load_spec(ROOT / "configs/examples/megatron-tiny-vanilla-gpt.yaml").runs()[0]
    plan = launch_plan(run)
    assert plan.argv[:6] == ["python", "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc-per-node=1"]
    assert plan.argv[6] == str(SOURCE_ROOT / megatron.ENTRY_RELPATH)


def test_run_recipe_and_perf_harness_launches():
    raw = load_spec(EXAMPLE["megatron-qwen3-30b-a3b-moe"]).raw
    wl = raw["workload"]
    run = next(r for r in validate_spec({**raw, "workload": {**wl, "launch": "run_recipe"}}, "t").runs() if r.arm == "graph")
    argv = launch_plan(run).argv
    assert argv[1:4] == ["/opt/Megatron-Bridge/scripts/training/run_recipe.py", "--recipe", "qwen3_30b_a3b_pretrain_config"]
    perf = {**wl, "launch": "perf_harness", "recipe": "qwen:qwen3_30b_a3b"}
    run = next(r for r in validate_spec({**raw, "workload": perf}, "t").runs() if r.arm == "graph")
    argv = launch_plan(run).argv
    i = argv.index("-g")
    assert argv[i + 1] == "h100"  # the harness has no h200 choice
    assert argv[argv.index("--cuda_graph_scope") + 1] == "attn,moe_router,moe_preprocess"
    assert not any(a.startswith(("model.cuda_graph_impl=", "model.cuda_graph_modules=")) for a in argv)
    with pytest.raises(SpecError, match="key 'workload.recipe' = 'qwen3_30b_a3b': the perf harness needs 'family:"):
        validate_spec({**raw, "workload": {**perf, "recipe": "qwen3_30b_a3b"}}, "t")  # when the spec loads


def test_values_reaching_the_shell_are_quoted():
    raw = load_spec(EXAMPLE["megatron-tiny-vanilla-gpt"]).raw
    wl = {**raw["workload"], "overrides": {**raw["workload"]["overrides"], "logger.wandb_exp_name": "it's a run; rm -rf"},
          "env": {"HF_HOME": "/data/hf cache"}}
    run = validate_spec({**raw, "workload": wl}, "t").runs()[0]
    words = shlex.split(launch_plan(run).shell())
    assert "HF_HOME=/data/hf cache" in words
    assert "logger.wandb_exp_name=\"it's a run; rm -rf\"" in words


def test_graph_switch_in_settings_is_refused():
    raw = load_spec(EXAMPLE["megatron-tiny-vanilla-gpt"]).raw
    # when the spec loads: no job, no plan
    with pytest.raises(SpecError, match=r"fixed\.model\.cuda_graph_impl.*variants"):
        validate_spec({**raw, "fixed": {**raw["fixed"], "model.cuda_graph_impl": "none"}}, "t")
    # and for a run made by hand from such settings
    run = dataclasses.replace(load_spec(EXAMPLE["megatron-tiny-vanilla-gpt"]).runs()[0],
                              settings={**raw["fixed"], "model.cuda_graph_impl": "none"})
    with pytest.raises(megatron.MegatronSpecError, match="variants"):
        megatron.run_overrides(run)


def test_unsafe_environment_blocks_graph_arms_only():
    raw = load_spec(EXAMPLE["megatron-tiny-vanilla-gpt"]).raw
    runs = validate_spec({**raw, "workload": {**raw["workload"], "env": {"NCCL_GRAPH_REGISTER": 1}}}, "t").runs()
    blocked = {r.variant.name: {v.rule for v in preflight(r)} for r in runs if preflight(r)}
    # TE arms assert (Megatron's TE graph helper); a full iteration hangs the same way though Megatron does not check
    # (field row 29: its own rule); eager is free
    assert blocked == {"attn": {"expandable_segments_nccl_graph_register"},
                       "attn+mlp": {"expandable_segments_nccl_graph_register"},
                       "full_iteration": {"full_iteration_expandable_segments"}}


def test_gpu_seconds_estimate():
    run = load_spec(EXAMPLE["megatron-tiny-vanilla-gpt"]).runs()[0]
    given = dataclasses.replace(run, settings={**run.settings, "est_step_s": 0.5})
    c = megatron.COST  # an eager run: no capture
    assert run.arm == "eager" and megatron.estimate(given) == pytest.approx(30 * 0.5 + c.startup_s + c.teardown_s)
    assert "est_step_s" not in megatron.run_overrides(given)
    big = load_spec(EXAMPLE["megatron-llama3-8b-dense"]).runs()[0]
    assert megatron.estimate(big) > 8 * (c.startup_s + c.teardown_s)


# --------------------------------------------------------------------------------------------------
# The entry module (runs in the container; here only its pure parts)


def test_entry_module_imports_without_megatron_or_torch():
    code = ("import sys, graphsweep.entry.megatron_entry as m; "
            "bad = [k for k in sys.modules if k.split('.')[0] in ('megatron', 'torch', 'transformer_engine')]; "
            "assert not bad, bad; print(m.MARK)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[graphsweep]"


def test_entry_script_runs_by_path_without_graphsweep_installed(tmp_path):
    # -I: isolated mode, the repository is not on sys.path (as inside the user's container)
    out = subprocess.run([sys.executable, "-I", str(ROOT / megatron.ENTRY_RELPATH), "--help"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "--recipe" in out.stdout and "--graph-api" in out.stdout


def test_entry_translates_the_graph_switch_for_the_detected_api():
    from graphsweep.entry.megatron_entry import translate_graph_overrides as t

    old = ["train.micro_batch_size=1", "model.cuda_graph_impl=local", "model.cuda_graph_scope=[full_iteration]", "x=1"]
    assert t(old, has_modules=True) == ["train.micro_batch_size=1", "model.cuda_graph_impl=full_iteration",
                                        "model.cuda_graph_modules=[]", "model.cuda_graph_scope=null", "x=1"]
    assert t(old, has_modules=False) == ["train.micro_batch_size=1", "model.cuda_graph_impl=local",
                                         "model.cuda_graph_scope=[full_iteration]", "x=1"]
    new = ["model.cuda_graph_impl=transformer_engine", "model.cuda_graph_modules=[attn,mlp]", "model.cuda_graph_scope=null"]
    assert t(new, has_modules=False) == ["model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[attn,mlp]"]
    assert t(["model.cuda_graph_impl=none"], has_modules=True) == [
        "model.cuda_graph_impl=none", "model.cuda_graph_modules=[]", "model.cuda_graph_scope=null"]


def test_entry_graph_api_is_a_core_version_split_at_0_18():
    # core_v0.17.1 has only cuda_graph_scope; core_v0.18.0 adds cuda_graph_modules (MLM PR #4292)
    from graphsweep.entry.megatron_entry import graph_api_has_modules, parse_args

    assert [graph_api_has_modules(v) for v in ("0.17", "0.17.1", "0.18", "0.18.2", "0.19", "auto")] == [
        False, False, True, True, True, None]
    with pytest.raises(SystemExit):
        parse_args(["--recipe", "r", "--graph-api", "modules"])


def test_entry_memory_line_is_the_bridge_format():
    from graphsweep.entry.megatron_entry import memory_line

    stats = {"allocated_bytes.all.current": 2918700000, "active_bytes.all.current": 2918700000,
             "inactive_split_bytes.all.current": 67612000, "reserved_bytes.all.current": 2998900000,
             "allocated_bytes.all.peak": 2918700000, "active_bytes.all.peak": 2918700000,
             "inactive_split_bytes.all.peak": 140100000, "reserved_bytes.all.peak": 2998900000,
             "num_alloc_retries": 0, "allocation.all.current": 166}
    real = LOGS / "megatron-h200" / "te_attn.log"  # a real H200 log (tests/fixtures/README.md)
    line = memory_line(0, 1, stats)
    expected = ("[Rank 0] (after 1 iterations) memory (GB) | mem-allocated-gigabytes: 2.9187 | mem-active-gigabytes: "
                "2.9187 | mem-inactive-gigabytes: 0.067612 | mem-reserved-gigabytes: 2.9989 | mem-max-allocated-gigabytes: "
                "2.9187 | mem-max-active-gigabytes: 2.9187 | mem-max-inactive-gigabytes: 0.1401 | "
                "mem-max-reserved-gigabytes: 2.9989 | mem-alloc-retires: 0 | mem-allocated-count: 166")
    assert line == expected
    assert expected in real.read_text()  # the same line Bridge printed on the H200


def test_entry_markers_need_evidence_of_a_graph():
    from graphsweep.entry.megatron_entry import ReplayTracker

    tr = ReplayTracker(warmup=3, graph_arm=True)
    out = []
    for i, graphs in enumerate([0, 0, 0, 8, 8, 8], start=1):
        out += tr.observe(i, graphs)
    assert out == ["[graphsweep] cuda graphs detected: 8 at iteration 4",
                   "[graphsweep] cuda graph replay: iteration 5", "[graphsweep] cuda graph replay: iteration 6"]
    none = ReplayTracker(warmup=3, graph_arm=True)
    for i in range(1, 7):
        assert none.observe(i, 0) == []
    assert none.finish(6) == ["[graphsweep] no cuda graph detected after 6 iterations"]


def test_entry_capture_iteration_excess_is_that_iteration_over_the_eager_median():
    from graphsweep.entry.megatron_entry import ReplayTracker

    # Megatron's elapsed ms / 1000 of results/examples/megatron-tiny-vanilla-gpt attn+mlp r1's iterations 1-5; that
    # log's own line, from the callback's end-to-end walls, says 1.651
    walls, graphs = [1.5489, 0.0583, 0.0564, 1.7096, 0.0213], [0, 0, 0, 8, 8]
    tr = ReplayTracker(warmup=3, graph_arm=True)
    out = [line for i, (w, g) in enumerate(zip(walls, graphs), start=1) for line in tr.observe(i, g, w)]
    # 1.7096 - median(0.0583, 0.0564): iteration 1's setup is not the base
    assert out[:2] == ["[graphsweep] cuda graphs detected: 8 at iteration 4",
                       "[graphsweep] capture iteration excess seconds: 1.652"]
    # no eager iteration after the first to compare with (warmup 1): no figure rather than a wrong one
    tr = ReplayTracker(warmup=1, graph_arm=True)
    assert tr.observe(1, 0, 1.2) == [] and tr.observe(2, 8, 1.5) == ["[graphsweep] cuda graphs detected: 8 at iteration 2"]


def test_entry_sets_avoid_record_streams_only_for_a_torch_that_needs_it():
    from graphsweep.entry.megatron_entry import needs_avoid_record_streams

    assert needs_avoid_record_streams("2.7.1+cu126") and needs_avoid_record_streams("2.5.1")
    assert not needs_avoid_record_streams("2.8.0") and not needs_avoid_record_streams("2.11.0+cu130")
    assert not needs_avoid_record_streams(None)


def test_avoid_record_streams_reaches_only_an_old_torch_s_training_process():
    from graphsweep.entry.megatron_entry import set_torch_env

    # the controller never sets it: it cannot know the container's torch (2.11 warns it is deprecated)
    for path in EXAMPLES:
        for run in load_spec(path).runs():
            assert "TORCH_NCCL_AVOID_RECORD_STREAMS" not in launch_plan(run).env
    env: dict[str, str] = {}
    set_torch_env(env, "2.7.1+cu126")
    assert env == {"TORCH_NCCL_AVOID_RECORD_STREAMS": "1"}
    env = {}
    set_torch_env(env, "2.11.0+cu130")  # the H200's torch, which warned
    assert env == {}
    env = {"TORCH_NCCL_AVOID_RECORD_STREAMS": "0"}  # the user's workload.env wins
    set_torch_env(env, "2.5.1")
    assert env == {"TORCH_NCCL_AVOID_RECORD_STREAMS": "0"}


LIVE_CALLBACK = r'''
import sys, types
sys.path.insert(0, sys.argv[1])
from megatron.bridge.training.callbacks import CallbackContext, CallbackManager
from megatron.core.full_cuda_graph import FullCudaGraphWrapper
from graphsweep.entry import megatron_entry

manager = CallbackManager()
manager.add([megatron_entry.make_callback(warmup=3, graph_arm=True)])
print("events", sorted(e for e in manager.events if manager.has_callbacks(e)))
state = types.SimpleNamespace(train_state=types.SimpleNamespace(step=0))
context = CallbackContext(state=state, model=[])
for iteration in range(1, 7):  # as Bridge train.py: start, step, end, then train_state.step += 1
    manager.fire("on_train_step_start", context)
    if iteration == 4:
        FullCudaGraphWrapper.cuda_graph["training"] = object()  # what MCore's capture leaves behind
    manager.fire("on_train_step_end", context)
    state.train_state.step += 1
manager.fire("on_train_end", context)
'''


@pytest.mark.megatron
@pytest.mark.skipif(not os.environ.get("GRAPHSWEEP_MEGATRON_PYTHON"),
                    reason="GRAPHSWEEP_MEGATRON_PYTHON is not set (build: tools/megatron-venv.sh)")
def test_entry_callback_runs_in_bridge_s_own_callback_manager(tmp_path):
    # Bridge 0.6.2's CallbackManager registers the callback's three events and calls them as train.py does; MCore
    # 0.19.2's FullCudaGraphWrapper is where the callback finds a full-iteration graph. No GPU: memory reads 0.
    proc = subprocess.run([os.environ["GRAPHSWEEP_MEGATRON_PYTHON"], "-c", LIVE_CALLBACK, str(ROOT)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "events ['on_train_end', 'on_train_step_end', 'on_train_step_start']" in out
    assert [n for n in range(1, 7) if f"(after {n} iterations) memory (GB)" in out] == [4, 5, 6]  # after warmup 3
    assert "[graphsweep] cuda graphs detected: 1 at iteration 4" in out
    assert "[graphsweep] cuda graph replay: iteration 5" in out and "[graphsweep] cuda graph replay: iteration 6" in out
    log = tmp_path / "rank0.log"
    log.write_text(out)
    summary = parse_run([log], arm="graph", warmup=3).summary
    assert summary.capture_seen and summary.replay_seen
