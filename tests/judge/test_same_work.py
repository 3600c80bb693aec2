"""Same work (issue 36 item 1): the arms of a cell are judged against each other only when they train the same thing,
and a speedup no graph of the step can reach is no result.

Held-out cases, rebuilt from the committed real H200 runs (results/examples), each log edited as the named tool or
user would have written it:
- a drop-and-pad MoE's full_iteration run judged against the dropless eager baseline (read "speedup 3.24x, parity
  ok": only Bridge's configuration summary shows the difference);
- a graph arm that ran half the global batch, printed on every iteration line (read "use attn: 1.98x faster" on a
  compute-bound shape whose ceiling is 1.054x).
Both paths are checked: the workflow's compare step (judge/compare.py compare on the sweep's tables, the runs parsed
again from the edited logs as the parse rule does) and `graphsweep compare` on the logs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from graphsweep.cli import main as graphsweep
from graphsweep.judge import compare as jc
from graphsweep.judge import verdict as vd
from graphsweep.judge import work as jw
from graphsweep.judge.verdict import ArmRun, judge_cell
from graphsweep.report.data import load_tables
from graphsweep.report.write import markdown_of
from graphsweep.records import SpecError
from graphsweep.store.tables import read_table, table_info, write_table
from graphsweep.sweepspec.load import load_spec
from graphsweep.vocab import INCONCLUSIVE, INVALID, NOT_COMPARABLE, SPEEDUP
from tests.support import ROOT, reparsed_sweep

MOE = ROOT / "benchmarks/data/h200-moe-128e-sweep-a"  # the 2026-12-02 sweep (its logs, as committed)
PADDED = ROOT / "results/examples/megatron-moe-128e-padded/runs/s4096-88b711.full_iteration.r1/log.txt"
BUILTIN = ROOT / "results/examples/h200-builtin"
CB = "h4096-nh32-l4-s2048-mb4-cfca67"  # the builtin's compute-bound shape: GPU busy 95 % of the eager step


def compare_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert graphsweep(["compare", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def moe_log(run: str) -> Path:
    return MOE / "runs" / run / "log.txt"


def with_plan_spec(sweep: Path, dest: Path, **spec: object) -> Path:
    """The sweep's plan.parquet as a plan made from its spec with these keys set (the compare step reads the spec from
    the plan's metadata)."""
    extra = table_info(sweep / "plan.parquet")["extra"]
    extra["spec"] = {**extra["spec"], **spec}
    write_table(read_table(sweep / "plan.parquet", "plan"), dest / "plan.parquet", "plan", extra=extra)
    return dest / "plan.parquet"


# --- the drop-and-pad MoE ---------------------------------------------------------------------------------------------
def test_a_drop_and_pad_graph_run_is_not_compared_with_the_dropless_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    """`graphsweep compare` on the dropless sweep's three eager logs and the padded twin's full_iteration log, as they
    ran. Before: 'speedup 3.23x [1.75, 5.96] ... losses agree'."""
    eager = [str(moe_log(f"s4096-f2da0d.eager.r{k}")) for k in (1, 2, 3)]
    out = compare_json(capsys, "--warmup", "4", "--eager", *eager, "--graph", str(PADDED))
    assert out["verdict"] == NOT_COMPARABLE and out["speedup"] is None
    assert {d["key"]: (d["eager"], d["graph"]) for d in out["work_differences"]} == {
        "model.moe_expert_capacity_factor": (["null"], ["1"]),
        "model.moe_pad_expert_input_to_capacity": (["false"], ["true"])}
    assert ("model.moe_pad_expert_input_to_capacity: eager false vs graph true" in out["reason"]
            and "arms_may_differ" in out["reason"])
    # the graph settings differ too (cuda_graph_impl, use_te_rng_tracker, te_rng_tracker): never a difference
    assert not any("cuda_graph" in k or "rng" in k for k in out["not_comparable_fields"])
    # the user who means it says so: the cell is judged
    allowed = compare_json(capsys, "--warmup", "4", "--may-differ", "model.moe_*", "--eager", *eager, "--graph",
                           str(PADDED))
    assert allowed["verdict"] == SPEEDUP and not allowed["work_differences"]


def _padded(src: Path, dst: Path) -> Path:
    """A dropless attn run's log as the same run with drop-and-pad would print Bridge's summary: the two [model] lines
    the padded twin prints (moe_expert_capacity_factor, moe_pad_expert_input_to_capacity), in their sorted places."""
    out = []
    for line in src.read_text().splitlines(True):
        out.append(line)
        if line.startswith("  moe_aux_loss_coeff: "):
            out.append("  moe_expert_capacity_factor: 1.0  (Mcore default: None)\n")
        if line.startswith("  moe_grouped_gemm: "):
            out.append("  moe_pad_expert_input_to_capacity: True  (Mcore default: False)\n")
    dst.write_text("".join(out))
    return dst


def test_the_workflow_refuses_a_cell_whose_graph_runs_trained_another_moe(tmp_path: Path) -> None:
    """The dropless sweep's attn runs edited into drop-and-pad runs (their summary only: mock data's 25 iterations of
    loss cannot tell the two apart), every run of the shape parsed again as the parse rule does."""
    logs = {f"s4096-f2da0d.eager.r{k}": moe_log(f"s4096-f2da0d.eager.r{k}") for k in (1, 2, 3)}
    logs |= {f"s4096-f2da0d.attn.r{k}": _padded(moe_log(f"s4096-f2da0d.attn.r{k}"), tmp_path / f"attn{k}.log")
             for k in (1, 2, 3)}
    logs |= {f"s4096-f2da0d.router+pre.r{k}": moe_log(f"s4096-f2da0d.router+pre.r{k}") for k in (1, 2, 3)}
    runs, its = reparsed_sweep(MOE, tmp_path / "t", logs)
    cmp = jc.compare(MOE / "plan.parquet", runs, its, tmp_path / "comparison.parquet").set_index("cell_id")
    attn = cmp.loc["s4096-f2da0d.attn"]
    assert attn.verdict == NOT_COMPARABLE and pd.isna(attn.speedup)
    assert [d["key"] for d in attn.work_differences] == ["model.moe_expert_capacity_factor",
                                                         "model.moe_pad_expert_input_to_capacity"]
    assert "model.moe_pad_expert_input_to_capacity: eager false vs graph true" in attn.reason
    assert attn.paired_outcome == "not-comparable (both-completed)"
    # the untouched variant's runs did the same work: its verdict is the committed one
    committed = read_table(MOE / "comparison.parquet", "comparison").set_index("cell_id")
    assert cmp.loc["s4096-f2da0d.router+pre", "verdict"] == committed.loc["s4096-f2da0d.router+pre", "verdict"]
    # the spec's arms_may_differ names the keys that may differ: judged again as before
    plan = with_plan_spec(MOE, tmp_path / "allowed", arms_may_differ=["model.moe_*"])
    again = jc.compare(plan, runs, its, tmp_path / "again.parquet").set_index("cell_id")
    assert again.loc["s4096-f2da0d.attn", "verdict"] == committed.loc["s4096-f2da0d.attn", "verdict"] == INCONCLUSIVE


# --- half the global batch ----------------------------------------------------------------------------------------------
def _half_batch(src: Path, dst: Path) -> Path:
    """The run as one with half the global batch would print it: every iteration line's `global batch size` 2 (from
    4), `consumed samples` halved, and its elapsed time halved (half the tokens)."""
    out = []
    for line in src.read_text().splitlines(True):
        el = re.search(r"elapsed time per iteration \(ms\): ([0-9.]+) \|", line)
        if el and "global batch size" in line:
            line = line.replace(el.group(0), f"elapsed time per iteration (ms): {float(el.group(1)) / 2:.1f} |")
            line = re.sub(r"global batch size: +\d+ \|", "global batch size:     2 |", line)
            line = re.sub(r"consumed samples: +(\d+) \|", lambda m: f"consumed samples: {int(m.group(1)) // 2:12d} |",
                          line)
        out.append(line)
    dst.write_text("".join(out))
    return dst


def test_a_graph_arm_that_ran_half_the_global_batch_is_never_recommended(tmp_path: Path) -> None:
    """The compute-bound shape's attn runs with half the global batch. Before: 'use attn: 1.98x faster'."""
    logs = {f"{CB}.eager.r{k}": BUILTIN / "runs" / f"{CB}.eager.r{k}" / "log.txt" for k in (1, 2, 3)}
    logs |= {f"{CB}.attn.r{k}": _half_batch(BUILTIN / "runs" / f"{CB}.attn.r{k}" / "log.txt", tmp_path / f"a{k}.log")
             for k in (1, 2, 3)}
    runs, its = reparsed_sweep(BUILTIN, tmp_path / "t", logs)
    out = tmp_path / "comparison.parquet"
    cell = jc.compare(BUILTIN / "plan.parquet", runs, its, out).set_index("cell_id").loc[f"{CB}.attn"]
    assert cell.verdict == NOT_COMPARABLE and list(cell.not_comparable_fields) == [jw.GLOBAL_BATCH]
    assert "global batch size (its iteration lines): eager 4 vs graph 2" in cell.reason
    t = load_tables(BUILTIN / "plan.parquet", runs, its, out)
    md = markdown_of(t)
    assert "use attn" not in md
    # allowed to differ, the batch is not a difference: the speedup is still beyond what any graph of this step can win
    plan = with_plan_spec(BUILTIN, tmp_path / "allowed", arms_may_differ=[jw.GLOBAL_BATCH])
    cell = jc.compare(plan, runs, its, out).set_index("cell_id").loc[f"{CB}.attn"]
    assert (cell.verdict, cell.paired_outcome, bool(cell.beyond_ceiling)) == (INVALID, vd.BEYOND_CEILING, True)
    assert cell.ci_low > cell.graph_ceiling and round(cell.graph_ceiling, 3) == 1.054
    assert cell.reason.startswith("impossible: 1.98× [") and "a graph can win up to 1.05x" in cell.reason
    t = load_tables(plan, runs, its, out)
    assert "use attn" not in markdown_of(t)


def test_graphsweep_compare_says_the_same_of_the_half_batch_logs(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    eager = [str(BUILTIN / "runs" / f"{CB}.eager.r{k}" / "log.txt") for k in (1, 2, 3)]
    graph = [str(_half_batch(BUILTIN / "runs" / f"{CB}.attn.r{k}" / "log.txt", tmp_path / f"a{k}.log"))
             for k in (1, 2, 3)]
    out = compare_json(capsys, "--warmup", "3", "--eager", *eager, "--graph", *graph)
    assert out["verdict"] == NOT_COMPARABLE and out["work_differences"] == [
        {"key": jw.GLOBAL_BATCH, "eager": ["4"], "graph": ["2"]}]
    out = compare_json(capsys, "--warmup", "3", "--may-differ", jw.GLOBAL_BATCH, "--eager", *eager, "--graph", *graph)
    assert (out["verdict"], out["paired_outcome"], out["beyond_ceiling"]) == (INVALID, vd.BEYOND_CEILING, True)


# --- the ceiling, and what may differ ------------------------------------------------------------------------------------
def _arm(name: str, ms: float, n: int = 3, busy: float | None = None) -> list[ArmRun]:
    return [ArmRun(f"{name}{k}", "completed", [ms * (1 + 0.002 * ((k + i) % 5)) for i in range(20)], 0.1, seed=1,
                   loss={i: 9.0 - 0.01 * i for i in range(1, 21)}, gpu_busy_ms=busy) for k in range(n)]


def test_a_speedup_is_impossible_only_when_its_whole_interval_lies_beyond_the_ceiling() -> None:
    """Eager 86.5 ms with 82.1 ms of GPU work (ceiling 1.054x, the compute-bound shape's): a graph at 43.6 ms is
    impossible; one at 84 ms (1.03x) is within it; an A/A cell is never judged against a graph's ceiling."""
    eager = _arm("e", 86.5, busy=82.1)
    v = judge_cell(eager, _arm("g", 43.6), margin=0.02)
    assert (v.verdict, v.paired_outcome, v.beyond_ceiling) == (INVALID, vd.BEYOND_CEILING, True)
    assert v.speedup > 1.9 and 1.05 < v.graph_ceiling < 1.07
    v = judge_cell(eager, _arm("g", 84.0), margin=0.02)
    assert v.verdict == SPEEDUP and not v.beyond_ceiling and v.ci_low < v.graph_ceiling
    assert not judge_cell(eager, _arm("c", 43.6), margin=0.02, control=True).beyond_ceiling


def test_only_graph_settings_seeds_paths_and_allowed_keys_may_differ() -> None:
    assert jw.allowed("model.cuda_graph_impl") and jw.allowed("rng.te_rng_tracker") and jw.allowed("cuda_graph_scope")
    assert jw.allowed("ddp.check_for_nan_in_grad") and jw.allowed("rng.seed") and jw.allowed("checkpoint.save")
    assert not jw.allowed("train.global_batch_size") and not jw.allowed("model.moe_pad_expert_input_to_capacity")
    assert jw.allowed("train.train_iters", ["train.*"])
    assert jw.graph_override_keys({"paste": ["model.cuda_graph_impl=local", "--variant", "full_iteration"],
                                   "shared": ["model.cuda_graph_warmup_steps=4"]}) == [
        "model.cuda_graph_impl", "model.cuda_graph_warmup_steps"]


def test_a_key_a_summary_leaves_out_holds_its_default() -> None:
    """Bridge lists a Megatron Core field only where it differs from the default (given beside it), another config's
    field only where it is set: a run whose summary leaves a key out ran with the default, or None."""
    summary = {"sections": ["model", "checkpoint"], "mcore_sections": ["model"]}
    eager = {"train_config": {**summary, "values": {"model.num_layers": "4"}, "defaults": {"model.num_layers": "0"}}}
    graph = {"train_config": {**summary, "values": {"model.num_layers": "4", "model.moe_pad_expert_input_to_capacity":
                                                    "true", "checkpoint.load_optim": "false"},
                              "defaults": {"model.num_layers": "0", "model.moe_pad_expert_input_to_capacity": "false"}}}
    found = {d.key: (d.eager, d.graph) for d in jw.differences([eager], [graph])}
    assert found == {"model.moe_pad_expert_input_to_capacity": (("false",), ("true",)),
                     "checkpoint.load_optim": (("null",), ("false",))}
    # a run without a summary (no sections) is unknown there: never a difference
    assert jw.differences([{"train_config": None}], [graph]) == []


def test_the_spec_says_which_keys_may_differ_with_its_default(tmp_path: Path) -> None:
    base = (ROOT / "configs/examples/h200-builtin.yaml").read_text()
    assert load_spec(str(ROOT / "configs/examples/h200-builtin.yaml")).raw["arms_may_differ"] == []
    good = tmp_path / "good.yaml"
    good.write_text(base + "\narms_may_differ: [global_batch, 'logger.*']\n")
    assert load_spec(str(good)).raw["arms_may_differ"] == ["global_batch", "logger.*"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(base + "\narms_may_differ: train.train_iters\n")
    with pytest.raises(SpecError, match="arms_may_differ"):
        load_spec(str(bad))
