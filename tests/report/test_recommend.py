"""The report's answer per shape (Recommendations), the shapes x variants grid, unset axes and cut reasons.

Constructed tables (tests/support.py build_sweep, named so), plus the overrides the workloads record in the plan,
held against the real commands of the committed Megatron Bridge example sweeps (results/examples/*/runs/*/config.yaml),
the builtin trainer's own command lines and the paired example's plan.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from graphsweep.report.data import load_tables
from graphsweep.report.recommend import recommend
from graphsweep.plan.planner import plan_frame, plan_sweep
from graphsweep.report.shapes import full_grid, graph_overrides, varying_axes
from graphsweep.report.words import cell_label, fmt_value, truncate
from graphsweep.report.write import markdown_of, write_reports
from graphsweep.store.tables import read_table, write_table
from graphsweep.sweepspec.load import load_spec, validate_spec
from graphsweep.records import GraphOverrides
from tests.support import ROOT, build_sweep

EXAMPLES = ROOT / "results" / "examples"
ENTRY = "python -m graphsweep.entry.builtin_gpt"
FLAGS = {"eager": "--variant eager", "full_iteration": "--variant full_iteration", "attn": "--variant scoped --scope attn",
         "aa": "--variant eager"}  # fmt: skip


def _builtin_commands(paths: dict[str, Path]) -> None:
    """Give the constructed plan the commands a builtin sweep has (the seed differs per repeat, as in a real plan) and
    the trainer flags the builtin workload records for each graph run."""
    plan = read_table(paths["plan"])
    plan["workload"] = "builtin"
    plan["command"] = [f"{ENTRY} --hidden {r.hidden} --micro-batch {r.micro_batch} --seed {r['repeat']} {FLAGS[r.variant]}"
                       for _, r in plan.iterrows()]  # fmt: skip
    plan["graph_overrides"] = [GraphOverrides("trainer flags", tuple(FLAGS[r.variant].split())).to_record()
                               if r.arm == "graph" else None for _, r in plan.iterrows()]
    write_table(plan, paths["plan"], "plan", extra={"spec": {"sweep": "h200-tiny-llama", "margin": 0.02}})


def _report(paths: dict[str, Path], out: Path) -> tuple[str, str]:
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], out / "r.md", out / "r.html")
    return (out / "r.md").read_text(), (out / "r.html").read_text()


def _markdown(paths: dict[str, Path]) -> str:
    """report.md alone (no plots drawn: fast)."""
    t = load_tables(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"])
    return markdown_of(t)


def _section(md: str) -> str:
    return md.split("### Recommendations", 1)[1].split("### Cells", 1)[0]


@pytest.fixture()
def sweep(tmp_path: Path) -> dict[str, Path]:
    paths = build_sweep(tmp_path / "t")
    _builtin_commands(paths)
    return paths


@pytest.mark.slow
def test_each_shape_gets_a_choice_or_stay_eager_with_why(sweep: dict[str, Path], tmp_path: Path) -> None:
    md, page = _report(sweep, tmp_path)
    rec = _section(md)
    lines = [line for line in rec.splitlines() if line.startswith("- ")]
    assert len(lines) == 4  # one per shape; the A/A control is no variant to recommend
    assert lines[0] == ("- **hidden=1024 micro_batch=1**: **use full_iteration**: 6.89× [6.71, 7.08] faster, "
                        "63.40 → 9.20 ms per step, for +1.70 GB memory (+16%)")  # fmt: skip
    assert "  - trainer flags to paste: `--variant full_iteration`" in rec  # the seed differs per repeat: not a flag
    assert "also faster, by less: attn 1.59× [1.52, 1.66]" in rec  # intervals apart: no 'not certain'
    assert "not certain" not in rec
    # undecided, never "stay eager": the leading variant with its interval, the repeats that would decide it and
    # their GPU-hours at what its runs cost (this table has no decision loop's estimate), and what continues
    assert lines[1] == ("- **hidden=1024 micro_batch=2**: **undecided**: full_iteration leads at 1.03× [0.86, 1.24]; "
                        "about 14 repeats per arm (≈0.62 GPU-hours) would decide it; `graphsweep more-repeats` plans "
                        "the repeats")  # fmt: skip
    assert ("undecided (`graphsweep more-repeats` plans the repeats): attn 1.00× [0.60, 1.70], about 4 repeats per arm "
            "would decide it") in rec
    # the graphs measured not faster (slower, out of memory): stay eager
    assert lines[2] == "- **hidden=2048 micro_batch=1**: **stay eager**: no graph variant measured faster than eager"
    assert "  - attn slower than eager: 0.95× [0.94, 0.96]" in rec
    assert "  - full_iteration ran out of memory where eager fit" in rec
    # the eager arm itself ran out of memory: nothing to stay with
    assert lines[3] == ("- **hidden=2048 micro_batch=2**: **no recommendation**: the eager baseline has no usable run: "
                        "nothing to compare against")  # fmt: skip
    assert "  - full_iteration blocked before running (preflight `full_iteration_nan_check`)" in rec
    # the HTML section says the same, one row per shape, the line to paste as code
    html_rec = page.split('<h2 id="recommendations">', 1)[1].split("</table>", 1)[0]
    assert len(re.findall(r"<tr data-shape=", html_rec)) == 4
    assert '<code class="paste">--variant full_iteration</code>' in html_rec
    assert html_rec.count('class="rec-eager">stay eager<') == 1 and ">no recommendation<" in html_rec
    assert 'class="rec-eager">undecided<' in html_rec and '<li class="rests-on">full_iteration leads at' in html_rec
    assert "<code>full_iteration_nan_check</code>" in html_rec


def test_overlapping_intervals_say_the_choice_is_not_certain(sweep: dict[str, Path], tmp_path: Path) -> None:
    comp = read_table(sweep["comparison"])
    attn = comp.cell_id == "h1024-mb1-3f9a.attn"
    comp.loc[attn, ["speedup", "ci_low", "ci_high"]] = [6.5, 6.0, 6.8]
    write_table(comp, sweep["comparison"], "comparison", extra={"margin": 0.02})
    rec = _section(_markdown(sweep))
    assert "**use full_iteration**: 6.89× [6.71, 7.08]" in rec  # the higher speedup
    assert ("not certain: full_iteration's interval overlaps that of attn 6.50× [6.00, 6.80]: the data do not rank "
            "them for certain") in rec
    # the higher speedup wins whichever variant it is, and brings its own flags
    comp.loc[attn, ["speedup", "ci_low", "ci_high"]] = [8.0, 7.5, 8.6]
    write_table(comp, sweep["comparison"], "comparison", extra={"margin": 0.02})
    rec = _section(_markdown(sweep))
    assert "**use attn**: 8.00× [7.50, 8.60] faster" in rec and "`--variant scoped --scope attn`" in rec
    assert "also faster, by less: full_iteration 6.89×" in rec


def test_a_plan_without_recorded_overrides_says_so(tmp_path: Path) -> None:
    """A plan written before plan.parquet had graph_overrides (or one whose workload recorded none) still reports:
    the choice and its figures, and where the line to paste would be, where to find the command instead."""
    paths = build_sweep(tmp_path / "t")
    plan = read_table(paths["plan"]).drop(columns=["graph_overrides"])  # as an older graphsweep wrote it
    write_table(plan, paths["plan"], "plan", extra={"spec": {"sweep": "h200-tiny-llama", "margin": 0.02}})
    rec = _section(_markdown(paths))
    assert "**use full_iteration**: 6.89× [6.71, 7.08] faster" in rec
    assert "the plan does not record this variant's overrides" in rec
    assert "flags to paste" not in rec and "overrides to paste" not in rec


def _committed(sweep: str) -> dict[str, dict]:
    """run_id -> config.yaml of a committed example sweep's real runs (what the GPU jobs ran)."""
    return {cfg.parent.name: yaml.safe_load(cfg.read_text()) for cfg in (EXAMPLES / sweep / "runs").glob("*/config.yaml")}


@pytest.mark.parametrize("sweep", ["megatron-tiny-vanilla-gpt", "megatron-tiny-moe"])
def test_bridge_overrides_are_what_the_graph_run_sets_and_eager_does_not(sweep: str) -> None:
    """The plan's record, held against the real runs: the keys a committed graph run's overrides set otherwise than
    the eager run of its repeat are the ones to paste (plus a full-iteration graph's NaN checks: Bridge refuses it
    with them on, config.py L1364-1369), and the graph fields both arms had are shown as shared."""
    planned = {p.run.run_id: p for p in plan_sweep(load_spec(ROOT / "configs" / "examples" / f"{sweep}.yaml"))}
    runs = _committed(sweep)
    nan_keys = {"rerun_state_machine.check_for_nan_in_loss", "ddp.check_for_nan_in_grad"}
    graph_runs = [c for c in runs.values() if c["run"]["arm"] == "graph"]
    assert graph_runs
    for c in graph_runs:
        o = planned[c["run"]["run_id"]].graph_switch
        assert o is not None and o.what == "Megatron Bridge overrides"
        eager = runs[f"{c['run']['shape_id']}.eager.r{c['run']['repeat']}"]["launch"]["overrides"]
        differ = {k for k, v in c["launch"]["overrides"].items() if eager.get(k, object()) != v}
        pasted = {tok.split("=", 1)[0] for tok in o.paste}
        assert pasted - nan_keys == differ, c["run"]["run_id"]
        assert "model.cuda_graph_impl" in differ and "model.use_te_rng_tracker" in differ
        if c["run"]["variant"] == "full_iteration":
            assert nan_keys <= pasted and o.shared == ("model.cuda_graph_warmup_steps=3",)
        else:
            assert not nan_keys & pasted and "model.cuda_graph_warmup_steps=3" in o.shared
    attn_mlp = [p for p in planned.values() if p.run.cell_id.endswith(".attn+mlp")]
    if attn_mlp:
        assert attn_mlp[0].graph_switch.line == (
            "model.cuda_graph_impl=transformer_engine 'model.cuda_graph_scope=[attn,mlp]' model.use_te_rng_tracker=true "
            "rng.te_rng_tracker=true"
        )


def test_the_plan_table_records_each_graph_runs_overrides_and_the_report_pastes_them() -> None:
    """plan.parquet's graph_overrides: one record per graph run (and pair job), none for eager runs and A/A pairs."""
    planned = plan_sweep(load_spec(ROOT / "configs" / "examples" / "megatron-tiny-moe-paired.yaml"))
    plan = plan_frame(planned)
    assert set(plan.arm) == {"pair"}
    graph_pairs = plan[plan.variant != "aa"]
    assert graph_pairs.graph_overrides.notna().all() and plan[plan.variant == "aa"].graph_overrides.isna().all()
    t = type("T", (), {"plan": plan, "axes": []})()
    attn = plan[plan.variant == "attn"].iloc[0]
    assert graph_overrides(t, attn).line == ("model.cuda_graph_impl=transformer_engine 'model.cuda_graph_scope=[attn]' "
                                             "model.use_te_rng_tracker=true rng.te_rng_tracker=true")  # fmt: skip
    unpaired = plan_frame(plan_sweep(load_spec(ROOT / "configs" / "examples" / "megatron-tiny-moe.yaml")))
    assert set(unpaired[unpaired.arm == "eager"].graph_overrides.isna()) == {True}
    same = unpaired[unpaired.variant == "attn"].graph_overrides.iloc[0]
    assert same == attn.graph_overrides  # a pair job's record is its graph arm's


def _specs_and_launchers() -> list[tuple[str, dict]]:
    examples = sorted((ROOT / "configs" / "examples").glob("*.yaml"))
    out = [(p.stem, raw) for p in examples if not (raw := yaml.safe_load(p.read_text())).get("pairing")]  # pairs: above
    dense = yaml.safe_load((ROOT / "configs" / "examples" / "megatron-llama3-8b-dense.yaml").read_text())
    out.append(("dense-run_recipe", {**dense, "workload": {**dense["workload"], "launch": "run_recipe"}}))
    out.append(("dense-perf_harness", {**dense, "workload": {**dense["workload"], "launch": "perf_harness",
                                                              "recipe": "llama:llama3_8b"}}))
    return out


@pytest.mark.parametrize(("name", "raw"), _specs_and_launchers(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_word_the_graph_command_adds_is_in_the_paste(name: str, raw: dict) -> None:
    """Whatever the launcher (graphsweep's entry, run_recipe.py, the perf harness's flags): the words a graph run's
    command has and its eager run's lacks are the record's paste, and every pasted word is in the graph command."""
    planned = plan_sweep(validate_spec(raw, f"{name}.yaml"))
    eager = {(p.run.shape_id, p.run.repeat): p.launch.argv for p in planned if p.run.arm == "eager"}
    graph = [p for p in planned if p.run.arm == "graph"]
    assert graph
    for p in graph:
        e, g, paste = eager[p.run.shape_id, p.run.repeat], p.launch.argv, p.graph_switch.paste
        assert [w for w in g if w not in e and w not in paste] == [] and set(paste) <= set(g), p.run.run_id


def test_builtin_flags_are_what_the_graph_command_adds_to_eager() -> None:
    """The builtin trainer's real command lines: a graph run's is its shape's eager command, but the graph switch."""
    planned = plan_sweep(load_spec(ROOT / "configs" / "sweep.yaml"))
    eager = {(p.run.shape_id, p.run.repeat): p.launch.argv for p in planned if p.run.arm == "eager"}
    for p in (p for p in planned if p.run.arm == "graph"):
        e, g, o = eager[p.run.shape_id, p.run.repeat], p.launch.argv, p.graph_switch
        assert o.what == "trainer flags" and e[-2:] == ["--variant", "eager"]
        assert g == e[:-2] + list(o.paste) and o.shared == ()


@pytest.mark.slow
def test_unset_axis_values_print_nothing(tmp_path: Path) -> None:
    """An include: shape that leaves an axis unset (NaN in the tables) prints no 'nan' anywhere."""
    assert fmt_value(float("nan")) == "" and fmt_value(None) == "" and fmt_value(2.0) == "2"
    assert cell_label({"hidden": 256, "mem_fraction": float("nan")}, ["hidden", "mem_fraction"]) == "hidden=256"
    paths = build_sweep(tmp_path / "t")
    for name in ("plan", "comparison"):
        df = read_table(paths[name])
        df["mem_fraction"] = [0.0113 if h == 2048 and m == 2 else float("nan") for h, m in zip(df.hidden, df.micro_batch)]
        write_table(df, paths[name], name, extra={"margin": 0.02})
    md, page = _report(paths, tmp_path)
    assert not re.search(r"\bnan\b", md, re.I) and not re.search(r"\bnan\b", page, re.I)
    assert "mem_fraction=0.0113" in md and "mem_fraction" in page


@pytest.mark.slow
def test_true_grids_keep_two_axis_heatmaps_and_other_shapes_get_one_grid(tmp_path: Path) -> None:
    paths = build_sweep(tmp_path / "t")  # hidden {1024, 2048} x micro_batch {1, 2}: all four shapes, a full grid
    t = load_tables(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"])
    assert varying_axes(t) == ["hidden", "micro_batch"] and full_grid(t, ["hidden", "micro_batch"])
    _, page = _report(paths, tmp_path)
    assert "Speedup by hidden × micro_batch" in page and 'id="shapes-by-variants"' not in page
    # three of the four shapes (as include: shapes would give): no grid of two axes, one grid of shapes x variants
    for name in ("plan", "comparison"):
        df = read_table(paths[name])
        write_table(df[df.shape_id != "h2048-mb2-3f9a"], paths[name], name, extra={"margin": 0.02})
    t = load_tables(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"])
    assert not full_grid(t, varying_axes(t))
    _, page = _report(paths, tmp_path)
    assert "Speedup by" not in page and "Speedup per shape and variant" in page
    grid = re.search(r'<table class="heatmap shape-grid" id="shapes-by-variants">(.*?)</table>', page, re.S).group(1)
    assert len(re.findall(r"<tr>", grid)) == 4  # the header and one row per shape
    assert len(re.findall(r'<td class="hm v-', grid)) == 6  # 3 shapes x 2 variants, the A/A control left out
    head = re.findall(r"<th>([^<]*)</th>", grid.split("</thead>")[0])
    assert head == ["full_iteration", "attn"]


def test_truncate_cuts_at_a_word_and_closes_no_code_span_open() -> None:
    text = "about 7 repeats per arm would decide it (80% power, `graphsweep more-repeats`); steady-state memory"
    for n in range(20, len(text)):
        cut = truncate(text, n)
        assert len(cut) <= n + 1 and cut.endswith(" …"), (n, cut)
        kept = cut[:-2]
        assert text.startswith(kept) and text[len(kept)] in " ;,:(`", (n, cut)  # the next character ends a word
        assert kept.count("`") % 2 == 0, (n, cut)
    assert truncate(text, len(text)) == text


def test_thin_cells_are_marked_once_not_in_every_reason(sweep: dict[str, Path], tmp_path: Path) -> None:
    md = _markdown(sweep)
    row = next(line for line in md.splitlines() if line.startswith("| 1024 | 2 | attn |"))
    assert "1.00× [0.60, 1.70]¹" in row and "fewer than 3 jobs" not in row
    assert "¹ an arm of fewer than 3 jobs: its spread is the allowance, not measured" in md
    assert "about 4 repeats per arm would decide it" in row


def test_recommendations_follow_the_tables_not_the_reason_text(sweep: dict[str, Path], tmp_path: Path) -> None:
    """The section reads verdict fields: a reason rewritten to say something else changes nothing in it."""
    before = _section(_markdown(sweep))
    comp = read_table(sweep["comparison"])
    comp["reason"] = "graph slower: ignore this sentence"
    write_table(comp, sweep["comparison"], "comparison", extra={"margin": 0.02})
    assert _section(_markdown(sweep)) == before
    t = load_tables(sweep["plan"], sweep["runs"], sweep["iterations"], sweep["comparison"])
    assert [r.choice.variant if r.choice is not None else None for r in recommend(t)] == ["full_iteration", None, None, None]


def test_a_drifting_graph_run_is_never_recommended_and_is_said(sweep: dict[str, Path]) -> None:
    """Constructed table: the fastest cell's parity is run-drift (judge/verdict.py): its speedup stands, but a graph
    setting with a run that left eager's loss is no recommendation; the next fastest with parity ok is."""
    comp = read_table(sweep["comparison"])
    full = comp.cell_id == "h1024-mb1-3f9a.full_iteration"
    comp.loc[full, ["loss_parity", "loss_run_id", "loss_iteration", "loss_graph", "loss_eager", "loss_rel_diff",
                    "loss_tolerance", "loss_departed", "loss_checked"]] = [
        "run-drift", "h1024-mb1-3f9a.full_iteration.r2", 11, 8.38, 8.55, 0.02, 0.01, 1, 3]
    write_table(comp, sweep["comparison"], "comparison", extra={"margin": 0.02})
    md = _markdown(sweep)
    shape = next(line for line in _section(md).splitlines() if line.startswith("- **hidden=1024 micro_batch=1**"))
    assert "use full_iteration" not in shape
    assert ("faster, but not recommended: full_iteration 6.89× [6.71, 7.08]: 1 of 3 graph runs left eager's lm loss "
            "(run h1024-mb1-3f9a.full_iteration.r2 from iteration 11)") in _section(md)
    assert "1 with one graph run drifting (run-drift: verdict kept, never recommended)" in md


def test_a_drifting_cell_beside_the_choice_is_not_also_faster_by_less(sweep: dict[str, Path]) -> None:
    """Constructed table: attn (1.59x) has a drifting graph run while full_iteration (6.89x, parity ok) is chosen.
    Before: 'also faster, by less: attn 1.59×' beside the recommendation, and again as 'not recommended'."""
    comp = read_table(sweep["comparison"])
    attn = comp.cell_id == "h1024-mb1-3f9a.attn"
    comp.loc[attn, ["loss_parity", "loss_run_id", "loss_iteration", "loss_departed", "loss_checked"]] = [
        "run-drift", "h1024-mb1-3f9a.attn.r2", 11, 1, 3]
    write_table(comp, sweep["comparison"], "comparison", extra={"margin": 0.02})
    section = _section(_markdown(sweep))
    shape = section.split("- **hidden=1024 micro_batch=2**")[0]
    assert "**use full_iteration**" in shape and "also faster, by less" not in shape
    assert "faster, but not recommended: attn 1.59× [1.52, 1.66]: 1 of 3 graph runs left eager's lm loss" in shape
