"""Issue 30 item 3: what a graph run captured, and a graph run that captured nothing is no graph result.

On the recorded real logs (results/examples/*/runs/*/log.txt from H200 jobs, tests/fixtures/logs) every completed
graph run holds as many graphs as its model has layers (TE scopes: every layer of these models is graphable) or one
(full iteration). The logs that say 0 are real logs **edited only where a run that captured nothing prints otherwise**
(`zero_graphs` below, each edit named): MCore's `Rank 0: N graphable layers.` says 0, and the lines that only a run
holding graphs prints are gone (the entry's `cuda graphs detected` / `capture seconds` / `cuda graph replay` lines,
MCore's `N graphs deleted` line) while the entry's `no cuda graph detected after N iterations` appears where its
on_train_end callback prints it, before `[after training is done]` (Bridge 0.6.2 training/train.py L768-813).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from graphsweep.commands.compare import parsed_runs
from graphsweep.judge import verdict as vd
from graphsweep.judge.compare import compare, judge_runs
from graphsweep.parse.run import parse_run
from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.report.write import write_reports
from graphsweep.store.aggregate import aggregate
from graphsweep.store.runfiles import read_yaml  # libyaml: collection reads every example run's config
from graphsweep.store.tables import read_table
from graphsweep.layout import RunDir
from graphsweep.vocab import COMPLETED, GRAPH, INVALID, UNCAPTURED
from tests.support import ROOT

EXAMPLES = ROOT / "results" / "examples"
LOGS = ROOT / "tests" / "fixtures" / "logs"
MOE = EXAMPLES / "megatron-tiny-moe"
MOE_ATTN = MOE / "runs" / "s1024-mb1-016c0b.attn.r1" / "log.txt"


def zero_graphs(text: str) -> str:
    """A real graph log as the same run prints it when its scope has no graphable layer (the edits, each named)."""
    out = []
    for line in text.splitlines(keepends=True):
        if "[graphsweep] cuda graphs detected: " in line or "[graphsweep] capture seconds: " in line \
                or "[graphsweep] capture iteration excess seconds: " in line or "[graphsweep] cuda graph replay: " in line \
                or re.search(r"Rank \d+: \d+ graphs deleted with explicit reset", line):
            continue  # printed only by a run holding graphs (entry ReplayTracker; MCore delete_cuda_graphs)
        if "[after training is done]" in line and "[graphsweep] graph api: " in text:
            out.append("[graphsweep] no cuda graph detected after 30 iterations\n")  # the entry's on_train_end
        out.append(re.sub(r"Rank (\d+): \d+ graphable layers\.", r"Rank \1: 0 graphable layers.", line))
    return "".join(out)


def _graph_runs() -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*/runs/*") if (p / "config.yaml").is_file()
                  and read_yaml(p / "config.yaml")["run"]["arm"] == GRAPH)


def _expected(run: dict) -> int:
    """What the run's model says it must hold: 1 full-iteration graph, else one graphed layer per layer."""
    if run["impl"] == "full_iteration":
        return 1
    settings = run.get("settings") or {}
    return int(settings.get("layers") or settings["model.num_layers"])


@pytest.mark.parametrize("folder", _graph_runs(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_real_graph_run_says_what_it_captured(folder: Path) -> None:
    run = read_yaml(folder / "config.yaml")["run"]
    s = parse_run(RunDir(folder).logs(), arm=GRAPH, warmup=int(run["warmup"])).summary
    if s.outcome != COMPLETED:  # an OOM or a blocked capture holds no count to check
        assert s.graphs_captured is None or s.graphs_captured > 0, s.reason
        return
    assert s.graphs_captured == _expected(run), s.reason


@pytest.mark.parametrize("rel,graphs", [
    ("megatron-h200/te_attn.log", 8), ("megatron-h200/local_full.log", 1), ("megatron-h200x2/b_te_attn_dp2_tee.log", 8),
    ("megatron-h200x2/c_local_full_tp2.log", 1), ("h200-probe/medium-graph-1.log", 1),
])
def test_the_fixture_logs_say_what_they_captured(rel: str, graphs: int) -> None:
    s = parse_run([LOGS / rel], arm=GRAPH, warmup=3).summary
    assert (s.outcome, s.graphs_captured) == (COMPLETED, graphs), s.reason


def test_per_rank_files_count_the_run_once() -> None:
    files = sorted((LOGS / "megatron-h200x2/b_rank_files").rglob("*.log"))
    s = parse_run(files, arm=GRAPH, warmup=3).summary
    assert s.graphs_captured == 8, s.reason


def test_zero_graphable_layers_trains_eager_and_is_no_graph_result(tmp_path: Path) -> None:
    # Bridge's own run_recipe.py log (no graphsweep entry): MCore still prints its capture start and time
    log = tmp_path / "te_attn_0_layers.log"  # EDITED real log: tests/fixtures/logs/megatron-h200/te_attn.log
    log.write_text(zero_graphs((LOGS / "megatron-h200/te_attn.log").read_text()))
    assert "Time spent in CUDA Graphs capture on rank 0" in log.read_text()  # the capture lines stay
    s = parse_run([log], arm=GRAPH, warmup=3).summary
    assert (s.outcome, s.error_class, s.phase, s.graphs_captured) == (UNCAPTURED, "captured_nothing", "capture", 0)
    assert s.signature.endswith("Rank 0: 0 graphable layers.") and not s.measurement_usable
    assert "it trained eager" in s.reason
    # the old reading: capture and replay seen, completed
    assert s.capture_seen and s.replay_seen


def test_the_entrys_no_graph_line_makes_the_cell_invalid_never_a_speedup(tmp_path: Path) -> None:
    eager = [str(MOE / "runs" / f"s1024-mb1-016c0b.eager.r{k}" / "log.txt") for k in (1, 2)]
    graph = []
    for k in (1, 2):  # EDITED real logs: the tiny MoE sweep's attn runs, as if no layer were graphable
        p = tmp_path / f"attn.r{k}.zero.log"
        p.write_text(zero_graphs((MOE / "runs" / f"s1024-mb1-016c0b.attn.r{k}" / "log.txt").read_text()))
        graph.append(str(p))
    e, e_its = parsed_runs(eager, "eager", 3)
    g, g_its = parsed_runs(graph, GRAPH, 3)
    assert list(g.outcome) == [UNCAPTURED, UNCAPTURED] and list(g.graphs_captured) == [0, 0]
    assert all("no cuda graph detected after 30 iterations" in x for x in g.signature)
    by_run = {df.run_id.iloc[0]: df for df in (*e_its, *g_its) if len(df)}
    v = judge_runs(e, g, by_run, {}, margin=0.02, alpha=0.05)
    assert (v.verdict, v.paired_outcome, v.speedup, v.graphs_captured) == (INVALID, vd.GRAPH_CAPTURED_NOTHING, None, 0)
    # the same runs unedited: a timed cell whose graphs are counted
    real, r_its = parsed_runs([str(MOE / "runs" / f"s1024-mb1-016c0b.attn.r{k}" / "log.txt") for k in (1, 2)], GRAPH, 3)
    by_run.update({df.run_id.iloc[0]: df for df in r_its if len(df)})
    v = judge_runs(e, real, by_run, {}, margin=0.02, alpha=0.05)
    assert v.speedup is not None and v.graphs_captured == 8


@pytest.mark.slow
def test_the_report_shows_what_each_cell_captured(tmp_path: Path) -> None:
    """The real tiny MoE sweep through parse, aggregate, compare and report, its attn runs EDITED to hold no graph."""
    out = tmp_path / "megatron-tiny-moe"
    shutil.copy(MOE / "plan.parquet", tmp_path / "plan.parquet")
    runs = []
    for src in sorted((MOE / "runs").iterdir()):
        dst = out / "runs" / src.name
        dst.mkdir(parents=True)
        for name in ("config.yaml", "run.json", "log.txt"):
            shutil.copy(src / name, dst / name)
        if ".attn.r" in src.name:
            (dst / "log.txt").write_text(zero_graphs((src / "log.txt").read_text()))
        parse_run_dir(RunDir(dst))
        runs.append(RunDir(dst))
    aggregate(tmp_path / "plan.parquet", runs, out / "runs.parquet", out / "iterations.parquet")
    r = read_table(out / "runs.parquet", "runs").set_index("run_id")
    assert r.loc["s1024-mb1-016c0b.attn.r1", "outcome"] == UNCAPTURED
    assert r.loc["s1024-mb1-016c0b.router+pre.r1", "graphs_captured"] == 8
    assert pd.isna(r.loc["s1024-mb1-016c0b.eager.r1", "graphs_captured"])
    compare(tmp_path / "plan.parquet", out / "runs.parquet", out / "iterations.parquet", out / "comparison.parquet")
    c = read_table(out / "comparison.parquet", "comparison").set_index("variant")
    assert (c.loc["attn", "verdict"], c.loc["attn", "graphs_captured"]) == (INVALID, 0)
    assert pd.isna(c.loc["attn", "speedup"]) and "captured no CUDA graph" in c.loc["attn", "reason"]
    assert c.loc["attn+router+pre", "graphs_captured"] == 8
    write_reports(tmp_path / "plan.parquet", out / "runs.parquet", out / "iterations.parquet",
                  out / "comparison.parquet", out / "report.md", out / "report.html")
    md = (out / "report.md").read_text()
    head = next(line for line in md.splitlines() if line.startswith("| ") and "variant" in line)
    cols = [x.strip() for x in head.strip("|").split("|")]
    rows = {cells[cols.index("variant")]: cells for line in md.splitlines() if line.startswith("| ")
            and (cells := [x.strip() for x in line.strip("|").split("|")])[0] != cols[0]}
    assert rows["attn"][cols.index("graphs")] == "0" and rows["router+pre"][cols.index("graphs")] == "8"
    assert "attn captured no CUDA graph (0 graphs: it trained eager" in md
    page = (out / "report.html").read_text()
    assert '<td class="num graphs">0</td>' in page and '<td class="num graphs">8</td>' in page
