"""Issue 30 item 2, controller side: the eager arm's `[graphsweep] host time:` line into runs.parquet, comparison.parquet
and the report (graphsweep/parse/busy.py, graphsweep/judge/host.py, graphsweep/report/recommend.py).

No committed real log carries the line yet (the 128-expert MoE sweep that prints it lands under
results/examples/megatron-moe-128e/): the pipeline test below uses the real tiny MoE sweep (H200 jobs,
results/examples/megatron-tiny-moe/) with the line **added by this test** to its eager runs' logs, after iteration 3
where the entry prints it (its profiled window is iterations 2..warmup), with **made-up figures** (ADDED below):
what the test checks is how the figures travel, not what they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from graphsweep import logformat as lf
from graphsweep.entry import host_time
from graphsweep.judge import host
from graphsweep.judge.compare import compare
from graphsweep.parse.busy import host_time_lines
from graphsweep.parse.records import summary_to_dict
from graphsweep.parse.run import parse_run
from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.report.write import write_reports
from graphsweep.store.aggregate import aggregate
from graphsweep.store.tables import read_table
from graphsweep.vocab import EAGER, GRAPH, RunDir
from tests.support import ROOT

MOE = ROOT / "results" / "examples" / "megatron-tiny-moe"
# ADDED: made-up figures, ms per iteration, adding up to the step (120.0) as the entry's regions do
ADDED = {"attn": 20.0, "mlp": 0.0, "moe_router": 6.0, "moe_preprocess": 4.0, "dispatch": 14.0, "experts": 30.0,
         "moe_other": 8.0, "optimizer": 12.0, "outside": 26.0}
STEP = 120.0


def test_the_grammar_as_the_entry_writes_it() -> None:
    line = lf.host_time(0, 2, 3, STEP, ADDED).encode()
    measured, note = host_time_lines(b"[default0]:" + line + b"\n")
    assert note is None and measured == [(0, STEP, ADDED)]
    # two ranks' lines glued into one physical line (docs/megatron-facts.md §5.7): each is its own
    glued = line + b"[graphsweep] host time: rank 1 iterations 2-3: 118.500 ms per iteration: attn 19.000, outside 99.500"
    assert [(r, s) for r, s, _ in host_time_lines(glued)[0]] == [(0, STEP), (1, 118.5)]
    assert host_time_lines(glued)[0][1][2] == {"attn": 19.0, "outside": 99.5}
    # a region the entry may add later is not a column of today's tables
    assert host_time_lines(lf.host_time(0, 2, 3, 10.0, {"attn": 4.0, "new_region": 6.0}).encode())[0][0][2] == \
        {"attn": 4.0}
    miss = lf.host_time_unmeasured(0, "RuntimeError: no Megatron Core TransformerLayer or MoELayer method to annotate")
    assert host_time_lines(miss.encode()) == ([], "RuntimeError: no Megatron Core TransformerLayer or MoELayer method "
                                                  "to annotate")


def _with_line(src: Path, rank_lines: list[str]) -> str:
    out = []
    for line in src.read_text().splitlines(keepends=True):
        out.append(line)
        if lf.ITER_HEAD.search(line.encode()) and " iteration        3/" in line:
            out += [x + "\n" for x in rank_lines]  # ADDED lines (module docstring)
    return "".join(out)


def test_rank_0s_line_whole_into_typed_columns(tmp_path: Path) -> None:
    log = tmp_path / "eager.log"
    other = dict(ADDED, attn=60.0, outside=0.0)  # rank 1: another split of the same step
    log.write_text(_with_line(MOE / "runs/s1024-mb1-016c0b.eager.r1/log.txt",
                              [lf.host_time(1, 2, 3, STEP, other), lf.host_time(0, 2, 3, STEP, ADDED)]))
    s = parse_run([log], arm=EAGER, warmup=3).summary
    assert (s.host_step_ms, s.host_time_rank, s.host_time_ranks) == (STEP, 0, 2)
    row = summary_to_dict(s)
    assert {host_time.ms_column(r): v for r, v in ADDED.items()}.items() <= row.items()
    assert "host_ms" not in row  # one typed column per region, no JSON
    # a graph arm prints none; an eager run that could not measure it says why
    assert parse_run([MOE / "runs/s1024-mb1-016c0b.attn.r1/log.txt"], arm=GRAPH, warmup=3).summary.host_step_ms is None
    miss = tmp_path / "miss.log"
    miss.write_text(_with_line(MOE / "runs/s1024-mb1-016c0b.eager.r1/log.txt", [lf.host_time_unmeasured(0, "warmup < 2")]))
    s = parse_run([miss], arm=EAGER, warmup=3).summary
    assert s.host_step_ms is None and s.host_time_note == "warmup < 2"
    assert summary_to_dict(s)[host_time.ms_column("attn")] is None


@pytest.mark.parametrize("impl,scope,share", [
    ("transformer_engine", "attn+moe_router+moe_preprocess", 30 / 120), ("transformer_engine", "moe_router+moe_preprocess", 10 / 120),
    ("full_iteration", "", 1.0), ("transformer_engine", "moe", 62 / 120),
])
def test_each_scope_covers_its_regions_share(impl: str, scope: str, share: float) -> None:
    eager = pd.DataFrame([{"host_step_ms": STEP, **{host_time.ms_column(r): v for r, v in ADDED.items()}}] * 2)
    got = host.cover(eager, impl, scope)
    assert got["host_covered_share"] == pytest.approx(share) and got["eager_host_step_ms"] == STEP
    assert sum(got[host_time.share_column(r)] for r in host_time.REGIONS) == pytest.approx(1.0)
    assert host.cover(eager, "none", "") == {} and host.cover(eager.iloc[:0], impl, scope) == {}


def test_the_report_says_what_each_scope_covers_and_what_stays_eager(tmp_path: Path) -> None:
    """The real tiny MoE sweep through parse, aggregate, compare and report, its eager logs with the line ADDED."""
    out = tmp_path / "megatron-tiny-moe"
    shutil.copy(MOE / "plan.parquet", tmp_path / "plan.parquet")
    runs = []
    for src in sorted((MOE / "runs").iterdir()):
        dst = out / "runs" / src.name
        dst.mkdir(parents=True)
        for name in ("config.yaml", "run.json", "log.txt"):
            shutil.copy(src / name, dst / name)
        if ".eager.r" in src.name:
            (dst / "log.txt").write_text(_with_line(src / "log.txt", [lf.host_time(0, 2, 3, STEP, ADDED)]))
        parse_run_dir(RunDir(dst))
        runs.append(RunDir(dst))
    aggregate(tmp_path / "plan.parquet", runs, out / "runs.parquet", out / "iterations.parquet")
    r = read_table(out / "runs.parquet", "runs").set_index("run_id")
    assert r.loc["s1024-mb1-016c0b.eager.r1", "host_experts_ms"] == 30.0
    assert r["host_experts_ms"].dtype == float and pd.isna(r.loc["s1024-mb1-016c0b.attn.r1", "host_experts_ms"])
    compare(tmp_path / "plan.parquet", out / "runs.parquet", out / "iterations.parquet", out / "comparison.parquet")
    c = read_table(out / "comparison.parquet", "comparison").set_index("variant")
    assert c.loc["attn+router+pre", "host_covered"] == "attn+moe_router+moe_preprocess"
    assert c.loc["attn+router+pre", "host_covered_share"] == pytest.approx(0.25)
    assert c.loc["attn", "host_covered_share"] == pytest.approx(20 / 120)
    assert "attn covers 17% of the eager step's host time (120.0 ms per iteration); stays eager: experts 25%, " \
           "outside 22%, dispatch 12%, optimizer 10%, moe_other 7%, moe_router 5%" in c.loc["attn", "reason"]
    write_reports(tmp_path / "plan.parquet", out / "runs.parquet", out / "iterations.parquet",
                  out / "comparison.parquet", out / "report.md", out / "report.html")
    md = (out / "report.md").read_text()
    recs = md.split("### Recommendations", 1)[1].split("### Cells", 1)[0]
    assert "attn+moe_router+moe_preprocess covers 25% of the eager step's host time (120.0 ms per iteration); " \
           "stays eager: experts 25%, outside 22%, dispatch 12%, optimizer 10%, moe_other 7%" in recs
    assert "moe_router+moe_preprocess covers 8%" in recs
    # full_iteration is blocked at plan time on this dropless MoE: what could reach the ceiling, and its price
    assert "full_iteration is blocked on this dropless MoE; what could reach the GPU-busy ceiling: a drop-and-pad MoE" in recs
    assert "dropping tokens changes the model: its loss parity must be established again" in recs
    assert "stays eager: experts 25%" in (out / "report.html").read_text()
