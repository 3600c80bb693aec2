"""Issue 30 item 2, controller side: the eager arm's `[graphsweep] host time:` line into runs.parquet, comparison.parquet
and the report (graphsweep/parse/busy.py, graphsweep/judge/host.py, graphsweep/report/recommend.py).

On the real 128-expert MoE sweep (results/examples/megatron-moe-128e: a Qwen3-30B-A3B-shaped dropless MoE on one
H200, 2026-12-02, graphsweep ad664cb, whose line prints `name ms` per region). The line's newer form (per region also
`(wait W, N events)`, graphsweep 8328219) has no real log yet: it is tested on the entry's own writer
(logformat.host_time), and two ranks' lines glued together are built from it (named as such).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from graphsweep import logformat as lf
from graphsweep.entry import host_time
from graphsweep.judge import host
from graphsweep.judge.compare import compare
from graphsweep.parse.busy import host_time_lines
from graphsweep.parse.run import parse_run
from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.report.write import write_reports
from graphsweep.store.aggregate import aggregate
from graphsweep.store.tables import read_table
from graphsweep.layout import RunDir
from graphsweep.vocab import EAGER, GRAPH
from tests.support import ROOT

MOE = ROOT / "benchmarks" / "data" / "h200-moe-128e-sweep-a"  # the 2026-12-02 sweep (its logs, as committed)
EAGER_R1 = MOE / "runs" / "s4096-f2da0d.eager.r1" / "log.txt"
# what eager.r1's line prints (log.txt, the line after `[graphsweep] gpu busy:`)
R1 = {"attn": 52.566, "mlp": 0.0, "moe_router": 30.844, "moe_preprocess": 14.865, "dispatch": 3.467,
      "experts": 416.530, "moe_other": 10.972, "optimizer": 97.745, "outside": 128.762}


def test_the_grammar_old_and_new() -> None:
    real = next(l for l in EAGER_R1.read_bytes().splitlines() if l.startswith(lf.HOST_TIME_B))
    measured, note = host_time_lines(b"[default0]:" + real)
    assert note is None and [(r, s) for r, s, _ in measured] == [(0, 755.75)]
    assert measured[0][2] == {k: (v, None, None) for k, v in R1.items()}  # ad664cb: no wait, no events
    new = lf.host_time(0, 2, 4, 755.75, {"attn": (52.566, 0.12, 1520.0), "outside": (128.762, 3.0, 2210.0)})
    assert host_time_lines(new.encode())[0] == [(0, 755.75, {"attn": (52.566, 0.12, 1520.0),
                                                             "outside": (128.762, 3.0, 2210.0)})]
    # CONSTRUCTED: two ranks' lines glued into one physical line (docs/megatron-facts.md §5.7): each is its own
    glued = (new + lf.host_time(1, 2, 4, 750.0, {"attn": (50.0, 0.1, 1500.0)})).encode()
    assert [(r, s) for r, s, _ in host_time_lines(glued)[0]] == [(0, 755.75), (1, 750.0)]
    # a region the entry may add later is not a column of today's tables
    later = lf.host_time(0, 2, 3, 10.0, {"attn": (4.0, 0.0, 1.0), "new_region": (6.0, 0.0, 1.0)}).encode()
    assert host_time_lines(later)[0][0][2] == {"attn": (4.0, 0.0, 1.0)}
    miss = lf.host_time_unmeasured(0, "RuntimeError: no Megatron Core TransformerLayer or MoELayer method to annotate")
    assert host_time_lines(miss.encode())[1].startswith("RuntimeError: no Megatron Core")


def test_rank_0s_line_whole_into_typed_columns() -> None:
    s = parse_run([EAGER_R1], arm=EAGER, warmup=3).summary
    assert (s.host_step_ms, s.host_time_rank, s.host_time_ranks) == (755.75, 0, 1)
    row = s.to_dict()
    assert {host_time.ms_column(r): v for r, v in R1.items()}.items() <= row.items()
    assert row[host_time.wait_column("attn")] is None and "host_regions" not in row  # typed columns, no JSON
    assert sum(R1.values()) == pytest.approx(755.75, abs=0.01)  # the regions add up to the step
    graph = parse_run([MOE / "runs" / "s4096-f2da0d.attn.r1" / "log.txt"], arm=GRAPH, warmup=3).summary
    assert graph.host_step_ms is None and graph.to_dict()[host_time.ms_column("attn")] is None


@pytest.mark.parametrize("impl,scope,regions", [
    ("transformer_engine", "attn+moe_router+moe_preprocess", ("attn", "moe_router", "moe_preprocess")),
    ("transformer_engine", "moe_router+moe_preprocess", ("moe_router", "moe_preprocess")),
    ("transformer_engine", "moe", ("moe_router", "moe_preprocess", "dispatch", "experts", "moe_other")),
    ("full_iteration", "", host_time.REGIONS),
])
def test_each_scope_covers_its_regions_share(impl: str, scope: str, regions: tuple[str, ...]) -> None:
    eager = pd.DataFrame([parse_run([EAGER_R1], arm=EAGER, warmup=3).summary.to_dict()])
    got = host.cover(eager, impl, scope)
    assert got["host_covered_share"] == pytest.approx(sum(R1[r] for r in regions) / 755.75)
    assert sum(got[host_time.share_column(r)] for r in host_time.REGIONS) == pytest.approx(1.0, abs=1e-4)
    assert host.cover(eager, "none", "") == {} and host.cover(eager.iloc[:0], impl, scope) == {}


def _shares() -> dict[str, float]:
    """Each region's mean share of the eager runs' host step, read from their lines here, not by the parser."""
    rows = []
    for k in (1, 2, 3):
        line = next(l for l in (MOE / "runs" / f"s4096-f2da0d.eager.r{k}" / "log.txt").read_text().splitlines()
                    if l.startswith("[graphsweep] host time:"))
        step = float(re.search(r": ([\d.]+) ms per iteration", line).group(1))
        rows.append({k: float(v) / step for k, v in re.findall(r"(\w+) ([\d.]+)(?=,|$)", line.split("iteration: ")[1])})
    return {r: sum(x[r] for x in rows) / 3 for r in host_time.REGIONS}


@pytest.mark.slow
def test_the_report_says_what_each_scope_covers_and_what_stays_eager(tmp_path: Path) -> None:
    """The real 128-expert MoE sweep through parse, aggregate, compare and report."""
    out = tmp_path / "megatron-moe-128e"
    shutil.copy(MOE / "plan.parquet", tmp_path / "plan.parquet")
    runs = []
    for src in sorted((MOE / "runs").iterdir()):
        dst = out / "runs" / src.name
        dst.mkdir(parents=True)
        for name in ("config.yaml", "run.json", "log.txt"):
            shutil.copy(src / name, dst / name)
        parse_run_dir(RunDir(dst))
        runs.append(RunDir(dst))
    aggregate(tmp_path / "plan.parquet", runs, out / "runs.parquet", out / "iterations.parquet")
    r = read_table(out / "runs.parquet", "runs").set_index("run_id")
    assert r.loc["s4096-f2da0d.eager.r1", "host_experts_ms"] == 416.53 and r["host_experts_ms"].dtype == float
    assert pd.isna(r.loc["s4096-f2da0d.attn.r1", "host_experts_ms"])
    compare(tmp_path / "plan.parquet", out / "runs.parquet", out / "iterations.parquet", out / "comparison.parquet")
    c = read_table(out / "comparison.parquet", "comparison").set_index("variant")
    want = _shares()
    cell = c.loc["attn+router+pre"]
    assert cell["host_covered"] == "attn+moe_router+moe_preprocess"
    assert cell["host_covered_share"] == pytest.approx(want["attn"] + want["moe_router"] + want["moe_preprocess"])
    assert cell["host_experts_share"] == pytest.approx(want["experts"])
    rest = sorted(((k, v) for k, v in want.items() if k not in ("attn", "moe_router", "moe_preprocess") and v >= 0.005),
                  key=lambda x: -x[1])
    assert cell["host_shares_of"] == "profiled window"  # ad664cb's lines give no events to take the profiler's cost off
    # the estimate: the eager step with exactly the covered share taken off (the GPU is not the limit here)
    assert cell["host_estimate_speedup"] == pytest.approx(1 / (1 - cell["host_covered_share"]))
    assert cell["ci_low"] <= cell["host_estimate_speedup"] <= cell["speedup"]  # inside the measured interval
    sentence = (f"attn+moe_router+moe_preprocess covers {cell['host_covered_share']:.0%} of the eager step's host time "
                f"(in the profiled window, {cell['eager_host_step_ms']:.1f} ms per iteration); taking exactly that off "
                f"the step: about {cell['host_estimate_speedup']:.2f}x; stays eager: "
                + ", ".join(f"{k} {v:.0%}" for k, v in rest))
    assert sentence in cell["reason"]
    assert rest[0][0] == "experts"  # the routed experts' launches are most of this dropless MoE's host time
    write_reports(tmp_path / "plan.parquet", out / "runs.parquet", out / "iterations.parquet",
                  out / "comparison.parquet", out / "report.md", out / "report.html")
    md = (out / "report.md").read_text()
    recs = md.split("### Recommendations", 1)[1].split("### Cells", 1)[0]
    lines = [l for l in recs.splitlines() if "of the eager step's host time" in l]
    assert len(lines) == 3 and sentence in recs  # one per scope that ran: attn, attn+router+pre, router+pre
    launch = next(i for i, l in enumerate(recs.splitlines()) if "the GPU is busy" in l)
    assert "of the eager step's host time" in recs.splitlines()[launch + 1]  # next to the GPU-busy ceiling line
    ceiling = c["graph_ceiling"].dropna().iloc[0]
    assert (f"full_iteration is blocked on this dropless MoE; what could reach the GPU-busy ceiling ({ceiling:.2f}x): "
            "a drop-and-pad MoE") in recs
    assert "dropping tokens changes the model: its loss parity must be established again" in recs
    assert "stays eager: experts" in (out / "report.html").read_text()
