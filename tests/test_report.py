"""report.md and report.html from small real tables (plan, runs, iterations, comparison written as Parquet)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from graphsweep.judge import prose
from graphsweep.report.plots import TRACE_CAP
from graphsweep.report.text import display_reason, fmt_speedup
from graphsweep.report.write import write_reports
from graphsweep.store.tables import COMPARISON_COLUMNS, PLAN_COLUMNS, read_table, write_table

SWEEP = "h200-tiny-llama"
WARMUP = 3  # cuda_graph_warmup_steps: capture happens on iteration 4 (fixtures/megatron-h200/te_attn.log)
ITERS = 30
NAN_RULE = (
    # Bridge training/config.py L1364-1369 (ConfigContainer.validate), megatron-reference.md §3
    "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. "
    "Set rerun_state_machine.check_for_nan_in_loss=False."
)
OOM_TEXT = (
    # PyTorch >= 2.4 allocator message, megatron-reference.md §6
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.54 GiB. GPU 0 has a total capacity of 139.81 GiB "
    "of which 1.02 GiB is free."
)


def _series(rng: np.random.Generator, steady_ms: float, capture: bool, noise: float = 0.01) -> list[float]:
    """Iteration times as Megatron prints them: a slow first iteration, warmup, the capture spike, then steady."""
    out = []
    for i in range(1, ITERS + 1):
        if i == 1:
            out.append(steady_ms * 40 + 900.0)  # setup, compilation, allocator growth
        elif i <= WARMUP:
            out.append(steady_ms * 1.6)
        elif i == WARMUP + 1 and capture:
            out.append(steady_ms * 25 + 300.0)  # the capture iteration
        else:
            out.append(steady_ms * (1 + rng.normal(0, noise)))
    return out


class Sweep:
    """Builds the four tables of a small sweep with known outcomes."""

    def __init__(self) -> None:
        self.plan: list[dict] = []
        self.runs: list[dict] = []
        self.iters: list[dict] = []
        self.comparison: list[dict] = []
        self.rng = np.random.default_rng(7)

    def _plan_row(self, shape: dict, sid: str, cell: str, arm: str, variant: str, impl: str, scope: str, k: int, blocked: str | None) -> dict:
        rid = f"{cell}.r{k}"
        row = dict(
            sweep=SWEEP, run_id=rid, shape_id=sid, cell_id=cell, arm=arm, variant=variant, impl=impl, scope=scope,
            repeat=k, warmup=WARMUP, iterations=ITERS - WARMUP - 1, gpus=1, workload="megatron_bridge",
            status="blocked" if blocked else "submit", rule_id="full_iteration_nan_check" if blocked else None,
            rule_message=blocked, rule_source="Bridge training/config.py L1364-1369" if blocked else None,
            command="python mb_run.py ...", seed=1234, est_gpu_seconds=0.0 if blocked else 95.0, **shape,
        )  # fmt: skip
        self.plan.append(row)
        return row

    def _run(self, prow: dict, outcome: str, steady_ms: float | None, peak: float | None, reason: str = "", noise: float = 0.01) -> None:
        rid = prow["run_id"]
        graph = prow["arm"] == "graph"
        row = dict(prow)
        row.update(
            outcome=outcome, error_class="oom" if outcome == "oom" else None, reason=reason,
            gpu_seconds=float(self.rng.uniform(80, 110)), wall_s=100.0, capture_seen=graph and outcome == "completed",
            replay_seen=graph and outcome == "completed", peak_mem_gb=peak, log_path=f"results/{SWEEP}/runs/{rid}/log.txt",
            steady_first=None, steady_last=None, steady_n=0,
        )  # fmt: skip
        if steady_ms is not None:
            times = _series(self.rng, steady_ms, capture=graph, noise=noise)
            first = WARMUP + 2
            row.update(steady_first=first, steady_last=ITERS, steady_n=ITERS - first + 1, step_ms_median=steady_ms)
            for i, ms in enumerate(times, 1):
                self.iters.append(dict(run_id=rid, iteration=i, elapsed_ms=ms, tflops=None, loss=10.0 - i * 0.05, grad_norm=2.0,
                                       mem_allocated_gb=peak, mem_max_allocated_gb=peak, mem_max_reserved_gb=peak,
                                       source_file="log.txt"))  # fmt: skip
        elif outcome == "oom":  # died in capture: the iterations before it were logged
            row.update(phase="capture", failed_iteration=WARMUP + 1, capture_iteration=WARMUP + 1 if graph else None)
            for i, ms in enumerate(_series(self.rng, 50.0, capture=False)[:WARMUP], 1):
                self.iters.append(dict(run_id=rid, iteration=i, elapsed_ms=ms, source_file="log.txt"))
        self.runs.append(row)

    def shape(self, shape: dict, eager: list[tuple[str, float | None, float | None, str]], reps: int = 3) -> tuple[str, list[str]]:
        sid = "h{hidden}-mb{micro_batch}-".format(**shape) + "3f9a"
        ids = []
        for k, (outcome, ms, peak, reason) in enumerate(eager[:reps], 1):
            prow = self._plan_row(shape, sid, f"{sid}.eager", "eager", "eager", "none", "", k, None)
            self._run(prow, outcome, ms, peak, reason, noise=0.04)
            ids.append(prow["run_id"])
        return sid, ids

    def cell(self, shape: dict, sid: str, eager_ids: list[str], variant: str, impl: str, scope: str,
             graph: list[tuple[str, float | None, float | None, str]], verdict: dict, blocked: str | None = None,
             arm: str = "graph") -> None:  # fmt: skip
        cell = f"{sid}.{variant}"
        ids = []
        for k, (outcome, ms, peak, reason) in enumerate(graph, 1):
            prow = self._plan_row(shape, sid, cell, arm, variant, impl, scope, k, blocked)
            if not blocked:
                self._run(prow, outcome, ms, peak, reason)
            ids.append(prow["run_id"])
        row = {c: None for c in COMPARISON_COLUMNS}
        timed = verdict.get("speedup") is not None
        defaults = dict(thin=False, resolution_limited=False, design="unpaired" if timed else "",
                        eager_spread="observed" if timed else None, graph_spread="observed" if timed else None)
        row.update(sweep=SWEEP, cell_id=cell, shape_id=sid, variant=variant, impl=impl, scope=scope, **shape,
                   eager_run_ids=eager_ids, graph_run_ids=ids, eager_run_id=eager_ids[0], graph_run_id=ids[0],
                   margin=0.02, alpha=0.05, control=arm == "control", **{**defaults, **verdict})  # fmt: skip
        row["reason"] = prose.reason(row)  # the sentence the judge writes from these fields
        self.comparison.append(row)

    def write(self, folder: Path) -> dict[str, Path]:
        axes = ["hidden", "micro_batch"]
        paths = {k: folder / f"{k}.parquet" for k in ("plan", "runs", "iterations", "comparison")}
        write_table(pd.DataFrame(self.plan)[PLAN_COLUMNS + axes], paths["plan"], "plan",
                    extra={"spec": {"sweep": SWEEP, "margin": 0.02, "description": "Tiny Llama on one H200"}})  # fmt: skip
        write_table(pd.DataFrame(self.runs), paths["runs"], "runs")
        write_table(pd.DataFrame(self.iters), paths["iterations"], "iterations")
        comp = pd.DataFrame(self.comparison)
        comp = comp[COMPARISON_COLUMNS[:6] + axes + [c for c in comp.columns if c not in COMPARISON_COLUMNS[:6] + axes]]
        write_table(comp, paths["comparison"], "comparison", extra={"margin": 0.02, "paired": False})
        return paths


def _ok(ms: float, peak: float, n: int = 3) -> list[tuple[str, float, float, str]]:
    return [("completed", ms * f, peak, "") for f in (1.0, 1.012, 0.991)[:n]]


def build_sweep(folder: Path, aa: bool = True) -> dict[str, Path]:
    """Four shapes x two variants (+ an A/A control) with one cell of each outcome a user must recognise.

    Constructed tables (named so): the verdict fields are typed here, the sentences come from judge/prose.py.
    """
    s = Sweep()
    both = dict(paired_outcome="both-completed", eager_outcomes=["completed"] * 3, graph_outcomes=["completed"] * 3)
    # Shape 1: host-bound tiny Llama (fixtures/megatron-h200: eager 63.4 ms, TE attn 39.9 ms, full 9.2 ms).
    sh = {"hidden": 1024, "micro_batch": 1}
    sid, e = s.shape(sh, _ok(63.4, 10.4))
    s.cell(sh, sid, e, "full_iteration", "full_iteration", "", _ok(9.2, 12.1),
           dict(verdict="speedup", speedup=6.89, ci_low=6.71, ci_high=7.08, p_beyond=1e-6, q_value=6e-6, n_eager=3, n_graph=3,
                eager_step_ms=63.4, graph_step_ms=9.2, eager_mem_gb=10.4, graph_mem_gb=12.1, mem_delta_gb=1.7,
                **both))  # fmt: skip
    s.cell(sh, sid, e, "attn", "transformer_engine", "attn", _ok(39.9, 10.9),
           dict(verdict="speedup", speedup=1.59, ci_low=1.52, ci_high=1.66, p_beyond=2e-5, q_value=4e-5, n_eager=3, n_graph=3,
                eager_step_ms=63.4, graph_step_ms=39.9, eager_mem_gb=10.4, graph_mem_gb=10.9, mem_delta_gb=0.5,
                **both))  # fmt: skip
    if aa:
        s.cell(sh, sid, e, "aa", "none", "", _ok(63.1, 10.4),
               dict(verdict="neutral", speedup=1.004, ci_low=0.985, ci_high=1.019, p_beyond=0.61, n_eager=3, n_graph=3,
                    eager_step_ms=63.4, graph_step_ms=63.1, **both),
               arm="control")  # fmt: skip
    # Shape 2: launch-bound with job-to-job noise on the eager arm (h200-probe: 15 vs 18 ms).
    sh = {"hidden": 1024, "micro_batch": 2}
    sid, e = s.shape(sh, [("completed", 15.3, 6.2, ""), ("completed", 18.1, 6.2, ""), ("completed", 16.0, 6.2, "")])
    s.cell(sh, sid, e, "full_iteration", "full_iteration", "", _ok(15.9, 6.9),
           dict(verdict="inconclusive", speedup=1.03, ci_low=0.86, ci_high=1.24, p_beyond=0.41, q_value=0.55, n_eager=3,
                n_graph=3, eager_step_ms=16.0, graph_step_ms=15.9, eager_mem_gb=6.2, graph_mem_gb=6.9, mem_delta_gb=0.7,
                repeats_needed=14, **both))  # fmt: skip
    s.cell(sh, sid, e, "attn", "transformer_engine", "attn", [("completed", 16.2, 6.3, "")],
           dict(verdict="inconclusive", speedup=1.002, ci_low=0.6, ci_high=1.7, p_beyond=0.8, q_value=0.8, n_eager=3, n_graph=1,
                thin=True, graph_spread="allowance", repeats_needed=4, eager_step_ms=16.0, graph_step_ms=16.2,
                eager_mem_gb=6.2, graph_mem_gb=6.3, mem_delta_gb=0.1, **both))  # fmt: skip
    # Shape 3: the graph's static buffers do not fit; TE attn is a little slower.
    sh = {"hidden": 2048, "micro_batch": 1}
    sid, e = s.shape(sh, _ok(41.0, 118.0))
    s.cell(sh, sid, e, "full_iteration", "full_iteration", "", [("oom", None, None, OOM_TEXT)] * 3,
           dict(verdict="oom", n_eager=3, n_graph=0, eager_step_ms=41.0, eager_mem_gb=118.0, paired_outcome="graph-only-oom",
                eager_outcomes=["completed"] * 3, graph_outcomes=["oom"] * 3, failure_run_id=f"{sid}.full_iteration.r1",
                failure_detail=OOM_TEXT))  # fmt: skip
    s.cell(sh, sid, e, "attn", "transformer_engine", "attn", _ok(43.1, 121.5),
           dict(verdict="slowdown", speedup=0.951, ci_low=0.938, ci_high=0.964, p_beyond=3e-4, q_value=5e-4, n_eager=3, n_graph=3,
                eager_step_ms=41.0, graph_step_ms=43.1, eager_mem_gb=118.0, graph_mem_gb=121.5, mem_delta_gb=3.5,
                **both))  # fmt: skip
    # Shape 4: preflight blocks full_iteration (NaN check left on); the eager arm itself runs out of memory.
    sh = {"hidden": 2048, "micro_batch": 2}
    sid, e = s.shape(sh, [("oom", None, None, OOM_TEXT)] * 3)
    s.cell(sh, sid, e, "full_iteration", "full_iteration", "", [("blocked", None, None, "")] * 3,
           dict(verdict="blocked", failure_detail=NAN_RULE, rule_id="full_iteration_nan_check", gpu_seconds=0.0),
           blocked=NAN_RULE)  # fmt: skip
    s.cell(sh, sid, e, "attn", "transformer_engine", "attn", [("oom", None, None, OOM_TEXT)] * 3,
           dict(verdict="baseline-failed", n_eager=0, n_graph=0, paired_outcome="both-oom", eager_outcomes=["oom"] * 3,
                graph_outcomes=["oom"] * 3, failure_run_id=f"{sid}.eager.r1", failure_detail=OOM_TEXT))  # fmt: skip
    return s.write(folder)


@pytest.fixture()
def reports(tmp_path: Path) -> tuple[str, str, Path]:
    paths = build_sweep(tmp_path / "tables")
    out = tmp_path / "results" / SWEEP
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], out / "report.md", out / "report.html")
    return (out / "report.md").read_text(), (out / "report.html").read_text(), out


def _md_rows(md: str) -> list[list[str]]:
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows[1:]]


def test_markdown_has_one_row_per_cell_with_interval_and_reason(reports: tuple[str, str, Path]) -> None:
    md, _, _ = reports
    rows = _md_rows(md)
    assert len(rows) == 9  # 8 cells + the A/A control
    by = {(r[0], r[1], r[2]): r for r in rows}
    full = by[("1024", "1", "full_iteration")]
    assert "**speedup**" in full[3] and full[4] == "6.89× [6.71, 7.08]"
    assert full[6] == "63.40" and full[7] == "9.20" and full[8] == "+1.70"
    assert "costs +1.70 GB" in full[9]  # the price of the speedup stays in the short reason
    assert "[6.710" not in full[9]  # ...but the interval sentence the table already shows does not
    assert by[("2048", "1", "full_iteration")][3] == "oom" and "tried to allocate 1.54 GiB (GPU 0: 139.81 GiB total" in by[("2048", "1", "full_iteration")][9]
    blocked = by[("2048", "2", "full_iteration")]
    assert blocked[3] == "blocked" and "check_for_nan_in_loss must be disabled" in blocked[9] and blocked[4] == "—"
    assert by[("2048", "2", "attn")][3] == "baseline-failed"
    assert by[("1024", "2", "full_iteration")][9].startswith("about 14 repeats per arm would decide it")
    assert by[("1024", "1", "aa")][3] == "neutral (A/A)"


def test_markdown_counts_costs_and_caveats(reports: tuple[str, str, Path]) -> None:
    md, _, _ = reports
    assert "8 cells (**2** speedup, **1** slowdown, **2** inconclusive, **1** blocked, **1** oom, **1** baseline-failed)" in md
    assert "**GPU-hours**:" in md and "avoided by 3 preflight-blocked runs" in md and "avoided by shared eager baselines" in md
    assert "1 timed cell(s) had fewer than 3 jobs in an arm: for that arm the interval assumes a job-to-job spread" in md
    assert "Benjamini–Hochberg across the 5 timed cells" in md  # cells with a q-value; the A/A control is excluded
    assert "1 ± 0.02" in md
    assert "0 of 1 judged control cells flagged" in md


def test_markdown_pipes_inside_reasons_do_not_break_the_table(tmp_path: Path) -> None:
    paths = build_sweep(tmp_path / "t")
    comp = read_table(paths["comparison"])
    comp.loc[0, "reason"] = "graph faster: x; rule a | rule b"
    write_table(comp, paths["comparison"], "comparison", extra={"margin": 0.02})
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], tmp_path / "r.md", tmp_path / "r.html")
    rows = _md_rows((tmp_path / "r.md").read_text())
    assert {len(r) for r in rows} == {len(rows[0])}


def test_html_counts_badges_and_every_cell(reports: tuple[str, str, Path]) -> None:
    _, page, _ = reports
    counts = re.search(r'<div class="badges" id="verdict-counts">(.*?)</div>', page).group(1)
    for text in ("2 speedup", "1 slowdown", "0 neutral", "2 inconclusive", "1 blocked", "1 oom", "1 baseline-failed", "0 failed"):
        assert f">{text}<" in counts
    rows = re.findall(r'<tr id="cell-[^"]+"[^>]*data-verdict="([^"]+)"', page)
    assert sorted(rows) == sorted(["speedup", "speedup", "neutral", "inconclusive", "inconclusive", "oom", "slowdown", "blocked", "baseline-failed"])
    assert "6.89×" in page and "[6.71, 7.08]" in page
    assert "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph" in page
    assert "graph-only OOM" in page and "graph arm OOM too" in page


def test_html_links_each_run_log_relative_to_the_report(reports: tuple[str, str, Path]) -> None:
    _, page, out = reports
    hrefs = re.findall(r'<a href="([^"#][^"]*)"', page)
    assert hrefs and all(h.startswith("runs/") and h.endswith("/log.txt") for h in hrefs)
    assert "runs/h1024-mb1-3f9a.full_iteration.r2/log.txt" in hrefs
    # blocked runs never ran: no link to a log that does not exist
    assert not any("h2048-mb2-3f9a.full_iteration" in h for h in hrefs)


def test_html_is_self_contained(reports: tuple[str, str, Path]) -> None:
    _, page, _ = reports
    # No resource the browser would fetch: no external src/href, no CSS url() or @import of a remote file.
    assert not re.search(r'(?:src|href)\s*=\s*["\']?\s*(?:https?:)?//', page)
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", page)
    assert "@import" not in page and "<script" not in page and "<link" not in page
    assert page.count("<svg") >= 2  # memory bars and traces (the 2-axis sweep gets an HTML heatmap)
    assert 'class="heatmap"' in page


def test_html_cost_and_aa_rate(reports: tuple[str, str, Path]) -> None:
    _, page, _ = reports
    assert "GPU-hours spent" in page and "avoided by preflight" in page and "avoided by shared baselines" in page
    assert "A/A false-positive rate" in page and "0 of 1 eager-vs-eager cells flagged" in page
    table = re.search(r"<table class='costs'.*?</table>", page, re.S).group(0)
    assert ">speedup<" in table and ">oom<" in table and "A/A control" in table and "total" in table


def test_cost_accounting_adds_up(tmp_path: Path) -> None:
    from graphsweep.report.data import cost_accounting, load_tables

    paths = build_sweep(tmp_path)
    t = load_tables(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"])
    cost = cost_accounting(t)
    runs = read_table(paths["runs"])
    assert cost.spent_gpu_h == pytest.approx(runs.gpu_seconds.sum() / 3600)
    assert sum(cost.per_verdict_gpu_h.values()) + cost.control_gpu_h + cost.unattributed_gpu_h == pytest.approx(cost.spent_gpu_h)
    # the blocked cell's three runs are estimated from what its shape's runs cost
    shape4 = runs[runs.shape_id == "h2048-mb2-3f9a"].gpu_seconds
    assert cost.avoided_blocked_gpu_h == pytest.approx(3 * shape4.median() / 3600)
    # shared baselines: shapes 1-3 have 2 submitted variants each, shape 4 one (the other is blocked)
    eager = runs[runs.arm == "eager"].groupby("shape_id").gpu_seconds.sum()
    expected = eager[["h1024-mb1-3f9a", "h1024-mb2-3f9a", "h2048-mb1-3f9a"]].sum()
    assert cost.avoided_shared_gpu_h == pytest.approx(expected / 3600)


def test_no_control_cells_says_so(tmp_path: Path) -> None:
    paths = build_sweep(tmp_path / "t", aa=False)
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], tmp_path / "r.md", tmp_path / "r.html")
    assert "No A/A control cells were run" in (tmp_path / "r.md").read_text()
    assert "no A/A control cells were run" in (tmp_path / "r.html").read_text()


def test_one_axis_sweep_gets_a_bar_chart(tmp_path: Path) -> None:
    paths = build_sweep(tmp_path / "t")
    for name in ("plan", "comparison"):
        df = read_table(paths[name])
        df = df[df.hidden == 1024].drop(columns=["hidden"]) if name == "comparison" else df.drop(columns=["hidden"])
        write_table(df, paths[name], name, extra={"margin": 0.02})
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], tmp_path / "r.md", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert 'class="plot speedup-bars"' in page and 'class="heatmap"' not in page
    # no grid of two axes: the one grid of shapes x variants, above the bars that draw its intervals
    assert 'id="shapes-by-variants"' in page and "Speedup by" not in page


def test_traces_are_capped_with_a_note(tmp_path: Path) -> None:
    paths = build_sweep(tmp_path / "t")
    comp = read_table(paths["comparison"])
    many = pd.concat([comp.assign(cell_id=comp.cell_id + f"-{k}", hidden=comp.hidden + k) for k in range(4)], ignore_index=True)
    write_table(many, paths["comparison"], "comparison", extra={"margin": 0.02})
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], tmp_path / "r.md", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    # 32 = 4 x 8: the blocked cell's only data is its shape's eager baseline, already drawn with the other variant
    assert f"Showing the first {TRACE_CAP} of 32 cells with iteration data" in page


def test_report_of_a_real_comparison(tmp_path: Path) -> None:
    """The comparison written by graphsweep.judge.compare (list columns, its own reasons) reports the same way."""
    from graphsweep.judge.compare import compare

    paths = build_sweep(tmp_path / "t")
    comp = compare(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"])
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], tmp_path / "r.md", tmp_path / "r.html")
    md, page = (tmp_path / "r.md").read_text(), (tmp_path / "r.html").read_text()
    assert len(_md_rows(md)) == len(comp) == 9
    assert set(re.findall(r'data-verdict="([^"]+)"', page)) == set(comp.verdict)
    for verdict in ("blocked", "oom", "baseline-failed"):
        assert verdict in set(comp.verdict)
    for _, row in comp.iterrows():  # every cell's reason as the table shows it, and its interval
        assert html.escape(display_reason(row)) in page
        if row.verdict in ("speedup", "slowdown", "neutral", "inconclusive"):
            assert fmt_speedup(row) in md
    assert comp.set_index("cell_id").verdict["h1024-mb1-3f9a.full_iteration"] == "speedup"  # 63 ms vs 9.2 ms


def test_aa_false_positive_is_counted_and_shown(tmp_path: Path) -> None:
    paths = build_sweep(tmp_path / "t")
    comp = read_table(paths["comparison"])
    comp.loc[comp.variant == "aa", ["verdict", "speedup", "ci_low", "ci_high"]] = ["slowdown", 0.96, 0.95, 0.975]
    write_table(comp, paths["comparison"], "comparison", extra={"margin": 0.02})
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], tmp_path / "r.md", tmp_path / "r.html")
    md, page = (tmp_path / "r.md").read_text(), (tmp_path / "r.html").read_text()
    assert "1 of 1 judged control cells flagged a difference (measured false-positive rate 100%" in md
    assert '<div class="v">100%</div><div class="d">1 of 1 eager-vs-eager cells flagged' in page
    # the control cell is not one of the sweep's verdicts
    assert "8 cells (**2** speedup, **1** slowdown," in md
