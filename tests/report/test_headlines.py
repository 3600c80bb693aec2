"""A shape's headline says what is known (issue 35 item 3, issue 40): an undecided shape names its leader, what would
decide it and the command that continues; "stay eager" only where the graphs measured not faster; a setting with a
crashed run is never recommended; no CUDA device and an all-blocked shape say so in their own words.

Constructed tables (tests/support.py build_sweep, named so), with the decision loop's comparison.parquet columns
(`loop_status`, `look`, `repeats_to_decide`, `gpu_hours_to_decide`) and its table metadata `continue_command` set
the way the loop writes them; a table without them is today's.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from graphsweep.constraints.runtime import NO_CUDA
from graphsweep.report.data import load_tables
from graphsweep.report.recommend import Answer, recommend
from graphsweep.report.write import markdown_of, write_reports
from graphsweep.store.tables import read_table, write_table
from tests.support import ROOT, build_sweep

NOISY = "h1024-mb2-3f9a"  # shape 2: full_iteration 1.03x [0.86, 1.24], attn 1.00x [0.60, 1.70], both inconclusive
FAST = "h1024-mb1-3f9a"  # shape 1: full_iteration 6.89x and attn 1.59x, both decided speedups
CONTINUE = "graphsweep continue configs/my sweep.yaml --results results"


@pytest.fixture()
def sweep(tmp_path: Path) -> dict[str, Path]:
    return build_sweep(tmp_path / "t")


def _comparison(paths: dict[str, Path], rows: dict[str, dict], extra: dict | None = None) -> None:
    """Set fields of cells (cell_id -> {column: value}) and the comparison's metadata."""
    comp = read_table(paths["comparison"])
    for cell_id, fields in rows.items():
        for col, value in fields.items():
            if col not in comp.columns:
                comp[col] = pd.Series([None] * len(comp), dtype=object if isinstance(value, str) else float)
            comp.loc[comp.cell_id == cell_id, col] = value
    write_table(comp, paths["comparison"], "comparison", extra={"margin": 0.02, **(extra or {})})


def _line(paths: dict[str, Path], shape: str) -> str:
    t = load_tables(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"])
    md = markdown_of(t)
    label = {NOISY: "hidden=1024 micro_batch=2", FAST: "hidden=1024 micro_batch=1"}[shape]
    return next(x for x in md.splitlines() if x.startswith(f"- **{label}**"))


def test_an_undecided_shape_names_the_loops_estimate_and_the_command_that_continues(sweep):
    _comparison(sweep, {
        f"{NOISY}.full_iteration": dict(loop_status="live", look=2, repeats_to_decide=9, gpu_hours_to_decide=0.41),
        f"{NOISY}.attn": dict(loop_status="live", look=2, repeats_to_decide=30, gpu_hours_to_decide=1.9),
    }, extra={"continue_command": CONTINUE})  # fmt: skip
    line = _line(sweep, NOISY)
    assert line == ("- **hidden=1024 micro_batch=2**: **undecided**: full_iteration leads at 1.03× [0.86, 1.24], "
                    "still being measured; about 9 repeats per arm (≈0.41 GPU-hours) would decide it; continue the "
                    "sweep with `graphsweep continue configs/my sweep.yaml --results results`")  # fmt: skip
    assert "stay eager" not in line


def test_the_leader_is_the_fastest_cell_still_in_the_race(sweep):
    """A cell the loop dropped because it cannot beat the leader is no leader, whatever its point estimate."""
    _comparison(sweep, {
        f"{NOISY}.full_iteration": dict(loop_status="budget", look=4, repeats_to_decide=20, gpu_hours_to_decide=2.5),
        f"{NOISY}.attn": dict(speedup=1.3, ci_low=0.9, ci_high=1.7, loop_status="dropped-leader", look=3),
    }, extra={"continue_command": CONTINUE})  # fmt: skip
    line = _line(sweep, NOISY)
    assert "**undecided**: full_iteration leads at 1.03× [0.86, 1.24] when the budget ran out; about 20 repeats" in line


def test_cells_dropped_at_the_margin_measured_not_faster_stay_eager(sweep):
    _comparison(sweep, {
        f"{NOISY}.full_iteration": dict(loop_status="dropped-margin", look=3),
        f"{NOISY}.attn": dict(loop_status="dropped-margin", look=3),
    })  # fmt: skip
    assert _line(sweep, NOISY).endswith("**stay eager**: no graph variant measured faster than eager")


def test_an_undecided_cell_that_cannot_reach_the_margin_is_no_reason_to_wait(sweep):
    """Inconclusive between neutral and slowdown (its interval ends below 1 + margin): the graphs measured not faster."""
    _comparison(sweep, {f"{NOISY}.full_iteration": dict(speedup=0.99, ci_low=0.97, ci_high=1.01),
                        f"{NOISY}.attn": dict(speedup=0.99, ci_low=0.96, ci_high=1.015)})
    assert "**stay eager**" in _line(sweep, NOISY)
    # one whose interval reaches beyond 1 + margin is undecided
    _comparison(sweep, {f"{NOISY}.attn": dict(ci_high=1.03)})
    assert "**undecided**: attn leads at 0.99× [0.96, 1.03]" in _line(sweep, NOISY)


def test_a_speedup_with_a_crashed_run_is_never_recommended(sweep):
    """Issue 40: the fastest variant's second run died of a CUDA fault (the judge excluded it from the timing and kept
    the speedup): the headline says which run and why, and the recommendation moves to the next variant."""
    runs = read_table(sweep["runs"])
    crashed = f"{FAST}.full_iteration.r2"
    cause = ("crashed at steady (iteration 12): cuda_ima (CUDA error: an illegal memory access was encountered)")
    runs.loc[runs.run_id == crashed, ["outcome", "reason", "error_class"]] = ["crashed", cause, "cuda_ima"]
    write_table(runs, sweep["runs"], "runs")
    line = _line(sweep, FAST)
    assert line.startswith("- **hidden=1024 micro_batch=1**: **use attn**: 1.59× [1.52, 1.66] faster")
    assert line.endswith(f"; not full_iteration: its run {crashed} crashed ({cause}): a setting that crashes is never "
                         "recommended")  # fmt: skip
    t = load_tables(sweep["plan"], sweep["runs"], sweep["iterations"], sweep["comparison"])
    (rec, *_) = recommend(t)
    assert rec.answer is Answer.USE and rec.choice.variant == "attn"
    assert [(c.variant, c.run_ids) for c in rec.crashed] == [("full_iteration", (crashed,))]


def test_a_failed_cell_names_its_crashed_run_and_the_shape_is_not_told_to_stay_eager(sweep):
    """A `failed` cell (the judge's verdict for a graph that crashes, issue 40) with the run and the cause in its row
    (`failure_run_id`, `failure_detail`): nothing else of the shape is faster, so no variant is recommended, and the
    headline says why."""
    run = f"{FAST}.full_iteration.r3"
    detail = "crashed at capture (iteration 4): cuda_ima (CUDA error: an illegal memory access was encountered)"
    _comparison(sweep, {
        f"{FAST}.full_iteration": dict(verdict="failed", paired_outcome="graph-introduces-failure", failure_run_id=run,
                                       failure_detail=detail),
        f"{FAST}.attn": dict(verdict="slowdown", speedup=0.95, ci_low=0.93, ci_high=0.97),
    })  # fmt: skip
    line = _line(sweep, FAST)
    assert line == (f"- **hidden=1024 micro_batch=1**: **stay eager**: no graph variant measured faster than eager; not "
                    f"full_iteration: its run {run} crashed ({detail}): a setting that crashes is never recommended")


def test_no_cuda_device_says_so_and_points_at_the_committed_h200_report(sweep):
    _comparison(sweep, {cell: dict(verdict="blocked", rule_id=NO_CUDA.id, speedup=None, ci_low=None, ci_high=None)
                        for cell in (f"{NOISY}.full_iteration", f"{NOISY}.attn")})
    md = markdown_of(load_tables(sweep["plan"], sweep["runs"], sweep["iterations"], sweep["comparison"]))
    assert "- **hidden=1024 micro_batch=2**: **no CUDA device here**: graph arms blocked; the eager baselines ran" in md
    assert "`results/examples/h200-builtin/report.html` in the graphsweep repository" in md
    assert (ROOT / "results" / "examples" / "h200-builtin" / "report.html").is_file()  # the pointer leads somewhere


def test_a_shape_whose_every_variant_was_refused_says_blocked(sweep):
    _comparison(sweep, {cell: dict(verdict="blocked", rule_id="full_iteration_nan_check", speedup=None, ci_low=None,
                                   ci_high=None) for cell in (f"{NOISY}.full_iteration", f"{NOISY}.attn")})
    assert _line(sweep, NOISY) == ("- **hidden=1024 micro_batch=2**: **every graph variant blocked**: full_iteration and "
                                   "attn blocked before running (preflight `full_iteration_nan_check`)")


@pytest.mark.slow
def test_both_reports_say_the_same_headline(sweep, tmp_path):
    _comparison(sweep, {f"{NOISY}.full_iteration": dict(loop_status="live", look=2, repeats_to_decide=9,
                                                          gpu_hours_to_decide=0.41)},
                extra={"continue_command": CONTINUE})
    write_reports(sweep["plan"], sweep["runs"], sweep["iterations"], sweep["comparison"], tmp_path / "r.md",
                  tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    row = page.split(f'<tr data-shape="{NOISY}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-answer="undecided"' in row and '<span class="rec-eager">undecided</span>' in row
    assert ('<li class="rests-on">full_iteration leads at 1.03× [0.86, 1.24], still being measured; about 9 repeats '
            "per arm (≈0.41 GPU-hours) would decide it; continue the sweep with <code>graphsweep continue "
            "configs/my sweep.yaml --results results</code></li>") in row
