"""report.md and report.html from small real tables (plan, runs, iterations, comparison written as Parquet)."""

from __future__ import annotations

import re
from pathlib import Path

import markupsafe
import pandas as pd
import pytest

from graphsweep.report.plots import TRACE_CAP
from graphsweep.judge.prose import speedup_text
from graphsweep.report.words import display_reason
from graphsweep.report.write import write_reports
from graphsweep.store.tables import read_table, write_table
from tests.support import SWEEP, build_sweep


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """Written once for the tests that only read it (a report costs seconds); a test that changes a table builds its own."""
    tmp_path = tmp_path_factory.mktemp("reports")
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
    assert "costs +1.70 GB" in full[-1]  # the price of the speedup stays in the short reason
    assert "[6.710" not in full[-1]  # ...but the interval sentence the table already shows does not
    assert by[("2048", "1", "full_iteration")][3] == "oom"
    assert "CUDA OOM at warmup (iteration 1) allocating 11.00 GiB" in by[("2048", "1", "full_iteration")][-1]
    blocked = by[("2048", "2", "full_iteration")]
    assert blocked[3] == "blocked" and "check_for_nan_in_loss must be disabled" in blocked[-1] and blocked[4] == "—"
    assert by[("2048", "2", "attn")][3] == "baseline-failed"
    assert by[("1024", "2", "full_iteration")][-1].startswith("about 14 repeats per arm would decide it")
    assert by[("1024", "1", "aa")][3] == "neutral (A/A)"


def test_markdown_counts_costs_and_caveats(reports: tuple[str, str, Path]) -> None:
    md, _, _ = reports
    assert "8 cells (**2** speedup, **1** slowdown, **2** inconclusive, **1** blocked, **1** oom, **1** baseline-failed)" in md
    assert "**GPU-hours**:" in md and "avoided by 3 preflight-blocked runs" in md and "avoided by shared eager baselines" in md
    assert "1 timed cell(s) had fewer than 3 jobs in an arm: for that arm the interval assumes a job-to-job spread" in md
    assert "the sweep's 5 timed cells (A/A controls excluded) are one family" in md  # cells with a q-value
    assert "1 ± 0.02" in md
    assert "0 of 1 judged control cells flagged" in md


@pytest.mark.slow
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


@pytest.mark.slow
def test_no_control_cells_says_so(tmp_path: Path) -> None:
    paths = build_sweep(tmp_path / "t", aa=False)
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], tmp_path / "r.md", tmp_path / "r.html")
    assert "No A/A control cells were run" in (tmp_path / "r.md").read_text()
    assert "no A/A control cells were run" in (tmp_path / "r.html").read_text()


@pytest.mark.slow
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


@pytest.mark.slow
def test_traces_are_capped_with_a_note(tmp_path: Path) -> None:
    paths = build_sweep(tmp_path / "t")
    comp = read_table(paths["comparison"])
    many = pd.concat([comp.assign(cell_id=comp.cell_id + f"-{k}", hidden=comp.hidden + k) for k in range(4)], ignore_index=True)
    write_table(many, paths["comparison"], "comparison", extra={"margin": 0.02})
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], tmp_path / "r.md", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    # 32 = 4 x 8: the blocked cell's only data is its shape's eager baseline, already drawn with the other variant
    assert f"Showing the first {TRACE_CAP} of 32 cells with iteration data" in page


@pytest.mark.slow
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
        assert str(markupsafe.escape(display_reason(row))) in page  # as Jinja's autoescape writes it (&#39;)
        if row.verdict in ("speedup", "slowdown", "neutral", "inconclusive"):
            assert speedup_text(row) in md
    assert comp.set_index("cell_id").verdict["h1024-mb1-3f9a.full_iteration"] == "speedup"  # 63 ms vs 9.2 ms


@pytest.mark.slow
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
