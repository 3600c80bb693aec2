"""Loss parity, round 2 (issue 28), on real H200 logs: logs that print the loss every N iterations, a broken eager
baseline, references checked against each other (one path for the workflow and `graphsweep compare`), a band per
iteration on the chaotic shape, and the holes of the departure rule.

Every case starts from the committed logs of the 1.2B dense model (results/examples/megatron-1b-dense: seq 512, whose
same-seed runs agree to 1e-4, and seq 4096, whose runs agree to 1e-3 after capture and end 30 % apart) or the tiny
dense model; where a case needs a fault or another log layout, only the log's iteration lines are edited, and the test
says how. The rates over every real model are benchmarks/validate_parity.py's (docs/statistics.md "Loss parity").
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest

from graphsweep.cli import main as graphsweep
from graphsweep.judge import compare as jc
from graphsweep.judge import parity as P
from graphsweep.judge import prose
from graphsweep.judge import verdict as vd
from graphsweep.logformat import loss_broken_from
from graphsweep.parse.run import parse_run
from graphsweep.report.data import load_tables
from graphsweep.report.write import markdown_of
from graphsweep.vocab import BASELINE_FAILED, EAGER, GRAPH, INVALID, SPEEDUP, UNVERIFIED
from tests.support import ROOT

DENSE = ROOT / "results/examples/megatron-1b-dense"
RUNS = DENSE / "runs"
ITER = re.compile(r"\] iteration\s+(\d+)/")
LM = re.compile(r" lm loss: ([-+0-9.eE]+) \|")
ELAPSED = re.compile(r"elapsed time per iteration \(ms\): ([0-9.]+) \|")


def log(shape: str, variant: str, k: int) -> Path:
    return RUNS / f"{shape}.{variant}.r{k}" / "log.txt"


def edit(src: Path, dst: Path, *, scale: Callable[[int], float] | None = None, key_every: int = 1, every: int = 1,
         nan_from: int | None = None, last: int | None = None) -> str:
    """The real log with only its iteration lines edited: `scale(i)` multiplies iteration i's loss; `key_every` N
    keeps the `lm loss` key on every N-th line only; `every` N keeps a line every N iterations with the mean loss and
    elapsed time over them (Megatron's log_interval); `nan_from` drops the key from there on (Bridge's NaN: it
    prints the key only for a loss >= 0); `last` cuts the log after that iteration."""
    out, losses, times = [], [], []
    for line in src.read_text().splitlines(keepends=True):
        m = ITER.search(line)
        if not m:
            out.append(line)
            continue
        i = int(m.group(1))
        if last is not None and i > last:
            continue
        lm, el = LM.search(line), ELAPSED.search(line)
        losses.append(float(lm.group(1)) * (scale(i) if scale else 1.0))
        times.append(float(el.group(1)))
        if i % every:
            continue
        x, ms = sum(losses) / len(losses), sum(times) / len(times)
        losses, times = [], []
        line = line.replace(el.group(0), f"elapsed time per iteration (ms): {ms:.1f} |")
        keep = i % key_every == 0 and (nan_from is None or i < nan_from)
        out.append(line.replace(lm.group(0), f" lm loss: {x:.6E} |" if keep else ""))
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("".join(out))
    return str(dst)


def compare(capsys: pytest.CaptureFixture[str], eager: list, graph: list, reference: list = (), *extra: str) -> dict:
    args = ["compare", "--json", "--warmup", "4", "--eager", *map(str, eager), "--graph", *map(str, graph)]
    if reference:
        args += ["--reference", *map(str, reference)]
    assert graphsweep([*args, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def eager_logs(shape: str, n: int = 3) -> list[Path]:
    return [log(shape, "eager", k) for k in range(1, n + 1)]


def graph_logs(shape: str, variant: str = "full_iteration") -> list[Path]:
    return [log(shape, variant, k) for k in (1, 2, 3)]


# --- 1. the loss printed every N iterations ------------------------------------------------------------------------
def test_a_missing_lm_loss_key_is_no_nan_where_the_log_prints_the_loss_every_5(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The graph logs with the `lm loss` key on every 5th iteration line only. Before: the parser called each a NaN
    run ('lm loss ? at iteration 1': invalid); with the eager logs edited too, the eager arm was 'baseline-failed ...
    NaN'. Now: compared on the 5 iterations both printed, and said."""
    graph = [edit(p, tmp_path / f"g{k}.log", key_every=5) for k, p in enumerate(graph_logs("s512-ca7740"))]
    parsed = parse_run([Path(graph[0])], arm=GRAPH, warmup=4).summary
    assert parsed.outcome == "completed" and parsed.error_class is None
    out = compare(capsys, eager_logs("s512-ca7740"), graph)
    assert out["verdict"] == SPEEDUP and out["loss_parity"] == P.PARITY_OK and out["loss_compared"] == 5
    assert "compared on the 5 iterations both printed" in out["reason"]
    eager = [edit(p, tmp_path / f"e{k}.log", key_every=5) for k, p in enumerate(eager_logs("s512-ca7740"))]
    both = compare(capsys, eager, graph)
    assert both["verdict"] == SPEEDUP and both["loss_parity"] == P.PARITY_OK and both["loss_compared"] == 5


def test_a_log_printed_every_5_iterations_holds_the_mean_and_is_compared_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Megatron's log_interval 5: a line every 5 iterations holding the mean loss over them (Bridge train_utils.py
    L1103, L1207). Eager logs as they ran (every iteration) are averaged onto the graph's iterations; a graph that is
    5 % off from iteration 11 on is still caught on them."""
    graph = [edit(p, tmp_path / f"g{k}.log", every=5) for k, p in enumerate(graph_logs("s512-ca7740"))]
    out = compare(capsys, eager_logs("s512-ca7740"), graph)
    assert out["loss_parity"] == P.PARITY_OK and out["loss_compared"] == 5 and out["loss_print_every"] == 5
    assert "the loss printed every 5 iterations" in prose.parity(out)
    off = [edit(p, tmp_path / f"o{k}.log", every=5, scale=lambda i: 1.05 if i > 10 else 1.0)
           for k, p in enumerate(graph_logs("s512-ca7740"))]
    assert compare(capsys, eager_logs("s512-ca7740"), off)["loss_parity"] == P.DIVERGED


def test_the_nan_rule_reads_the_logs_own_print_pattern() -> None:
    nan = math.nan
    assert loss_broken_from([(i, 1.0 if i % 5 == 0 else nan) for i in range(1, 26)]) is None  # every 5: no NaN
    assert loss_broken_from([(i, 1.0 if i % 5 == 0 and i <= 10 else nan) for i in range(1, 26)]) == 15
    assert loss_broken_from([(i, 1.0 if i < 12 else nan) for i in range(1, 31)]) == 12  # Bridge's NaN, every line
    assert loss_broken_from([(1, 1.0), (5, 1.0), (10, 1.0), (15, nan)]) == 15  # MCore: a line after iteration 1 too


# --- 2. a broken eager baseline -------------------------------------------------------------------------------------
def test_an_eager_run_whose_loss_goes_nan_breaks_the_baseline(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Eager r1 with Bridge's NaN from iteration 10 (the key dropped). Before: r1 excluded as 'crashed', the cell a
    speedup, the report 'use full_iteration'."""
    eager = [edit(log("s512-ca7740", "eager", 1), tmp_path / "e1.log", nan_from=10), *eager_logs("s512-ca7740")[1:]]
    out = compare(capsys, eager, graph_logs("s512-ca7740"))
    assert out["verdict"] == BASELINE_FAILED and out["paired_outcome"] == vd.BASELINE_LOSS_NONFINITE
    assert out["speedup"] is None and out["loss_iteration"] == 10
    assert out["reason"].startswith(f"the eager baseline is broken: eager run {eager[0]}'s lm loss is NaN/Inf from "
                                    "iteration 10")


def test_a_broken_baseline_is_said_in_the_recommendations_headline(tmp_path: Path) -> None:
    """The workflow's compare and report on the committed tables, eager r1 of seq 512 NaN from iteration 10 in
    iterations.parquet. Before: 'use full_iteration'."""
    it = pd.read_parquet(DENSE / "iterations.parquet")
    it.loc[(it.run_id == "s512-ca7740.eager.r1") & (it.iteration >= 10), "loss"] = math.nan
    it.to_parquet(tmp_path / "iterations.parquet")
    cmp = jc.compare(DENSE / "plan.parquet", DENSE / "runs.parquet", tmp_path / "iterations.parquet",
                     tmp_path / "comparison.parquet").set_index("cell_id")
    assert set(cmp.loc[cmp.shape_id == "s512-ca7740", "verdict"]) == {BASELINE_FAILED}
    t = load_tables(DENSE / "plan.parquet", DENSE / "runs.parquet", tmp_path / "iterations.parquet",
                    tmp_path / "comparison.parquet")
    md = markdown_of(t)
    line = next(x for x in md.splitlines() if x.startswith("- **model.seq_length=512**"))
    assert line.startswith("- **model.seq_length=512**: **no recommendation: broken baseline**: "
                           "the eager baseline is broken: eager run s512-ca7740.eager.r1's lm loss is NaN/Inf from "
                           "iteration 10"), line
    assert "use full_iteration" in next(x for x in md.splitlines() if x.startswith("- **model.seq_length=4096**"))


# --- 3. references checked against each other: one path for the workflow and `graphsweep compare` -------------------
def _workflow_compare(tmp_path: Path, scale_loss: dict[str, Callable[[int], float]]) -> pd.DataFrame:
    """The workflow's compare step (judge/compare.py compare, what rules/compare.smk runs) on the committed tables,
    with the loss of the named runs edited in iterations.parquet."""
    it = pd.read_parquet(DENSE / "iterations.parquet")
    for rid, f in scale_loss.items():
        sel = it.run_id == rid
        it.loc[sel, "loss"] = [x * f(int(i)) for i, x in zip(it.loc[sel, "iteration"], it.loc[sel, "loss"])]
    path = tmp_path / "iterations.parquet"
    it.to_parquet(path)
    return jc.compare(DENSE / "plan.parquet", DENSE / "runs.parquet", path, tmp_path / "comparison.parquet").set_index(
        "cell_id")


@pytest.mark.slow
def test_a_diverging_control_run_widens_nothing_in_either_path(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A/A run r1 of seq 512 x1.05 from iteration 10, every full_iteration graph run 2 % off. Before: in the
    workflow the A/A run joined the references and widened the tolerance from 0.5 % to 6 %: speedup, recommended;
    `graphsweep compare` on the eager and graph logs said invalid. Now both set the A/A run aside and say invalid."""
    bad_aa = {"s512-ca7740.aa.r1": lambda i: 1.05 if i >= 10 else 1.0}
    off = {f"s512-ca7740.full_iteration.r{k}": lambda i: 1.02 for k in (1, 2, 3)}
    cmp = _workflow_compare(tmp_path, {**bad_aa, **off})
    cell = cmp.loc["s512-ca7740.full_iteration"]
    assert cell.verdict == INVALID and cell.loss_parity == P.DIVERGED
    assert list(cell.loss_references_excluded) == ["s512-ca7740.aa.r1"] and cell.loss_references == 5
    aa = [edit(log("s512-ca7740", "aa", 1), tmp_path / "aa1.log", scale=bad_aa["s512-ca7740.aa.r1"]),
          log("s512-ca7740", "aa", 2), log("s512-ca7740", "aa", 3)]
    graph = [edit(p, tmp_path / f"g{k}.log", scale=lambda i: 1.02) for k, p in enumerate(graph_logs("s512-ca7740"))]
    out = compare(capsys, eager_logs("s512-ca7740"), graph, aa)
    assert (out["verdict"], out["loss_parity"], out["loss_references"]) == (INVALID, P.DIVERGED, 5)
    assert out["loss_references_excluded"] == [aa[0]] and "set aside" in out["reason"]
    # the correct graph arm beside the same diverging control: a speedup in both paths
    assert _workflow_compare(tmp_path, bad_aa).loc["s512-ca7740.full_iteration", "verdict"] == SPEEDUP
    assert compare(capsys, eager_logs("s512-ca7740"), graph_logs("s512-ca7740"), aa)["verdict"] == SPEEDUP


def test_one_or_two_references_of_the_chaotic_shape_are_unverified_never_invalid(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Seq 4096: correct graph runs against one eager run, or two (which part by 30 %). Before: invalid ('another
    model') for 100 % of such arms with one reference run. Now: the references cannot calibrate a band."""
    # one eager job is too thin a timing arm, too; two decide the speedup at one look, not yet at the decision loop's
    # first look (its repeated interval is wider): unverified there, inconclusive here, never invalid
    for n, verdict, args in ((1, "inconclusive", ()), (2, UNVERIFIED, ("--one-look",)), (2, "inconclusive", ())):
        out = compare(capsys, eager_logs("s4096-3eeebf", n), graph_logs("s4096-3eeebf"), (), *args)
        assert out["verdict"] == verdict and out["loss_parity"] == P.UNCALIBRATED, (n, args)
        assert "cannot be calibrated" in out["reason"]
    three = compare(capsys, eager_logs("s4096-3eeebf"), graph_logs("s4096-3eeebf"))
    assert three["verdict"] == SPEEDUP and three["loss_parity"] == P.PARITY_OK and three["loss_confirmed"]


# --- 4. a band per iteration -----------------------------------------------------------------------------------------
def test_a_5_percent_offset_on_the_chaotic_shape_is_caught_where_the_runs_still_agree(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every seq 4096 graph run x1.05 on every iteration. Before: one tolerance from the tail (0.36): 'losses agree'.
    The eager runs agree to 1e-3 in the iterations after capture: the band there is the floor."""
    graph = [edit(p, tmp_path / f"g{k}.log", scale=lambda i: 1.05) for k, p in enumerate(graph_logs("s4096-3eeebf"))]
    out = compare(capsys, eager_logs("s4096-3eeebf"), graph)
    assert out["verdict"] == INVALID and out["loss_parity"] == P.DIVERGED and out["loss_iteration"] <= 5
    steps = out["loss_band"]
    assert steps[0][2] < 0.01 < 0.3 < steps[-1][2]  # narrow after capture, wide where the runs part


def test_the_band_is_printed_in_compare_and_next_to_every_speedup(capsys: pytest.CaptureFixture[str]) -> None:
    assert graphsweep(["compare", "--warmup", "4", "--eager", *map(str, eager_logs("s4096-3eeebf")), "--graph",
                       *map(str, graph_logs("s4096-3eeebf"))]) == 0
    text = capsys.readouterr().out
    head, why, parity = text.splitlines()[:3]
    assert head.startswith("speedup")
    for line in (why, parity):
        assert re.search(r"band ±0\.\d+% at iterations 1-\d+, .*±\d+% at \d+-25 \(3 reference runs; compared on "
                         r"the 25 iterations both printed\)", line), line


# --- 5. the holes of the departure rule -----------------------------------------------------------------------------
def test_a_ramp_over_the_last_4_iterations_is_caught(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: 'losses agree ... 3.01 of the tolerance' (the last 4 iterations were never judged)."""
    graph = [edit(p, tmp_path / f"g{k}.log", scale=lambda i: 1 + 0.05 * max(0, i - 21))
             for k, p in enumerate(graph_logs("s512-ca7740"))]
    out = compare(capsys, eager_logs("s512-ca7740"), graph)
    assert out["verdict"] == INVALID and out["loss_iteration"] >= 22


def test_four_shared_iterations_at_1_5x_are_another_model(tmp_path: Path) -> None:
    """The graph runs cut after iteration 4, their loss x1.5. Before: 'ok' (no tail of 5 iterations to judge)."""
    graph = [vd.ArmRun(f"g{k}", "completed", [], None, seed=1234, loss={i: 1.5 * x for i, x in r.items() if i <= 4})
             for k, r in enumerate(_losses(graph_logs("s512-ca7740")))]
    eager = [vd.ArmRun(f"e{k}", "completed", [240.0] * 10, 0.1, seed=1234, loss=r)
             for k, r in enumerate(_losses(eager_logs("s512-ca7740")))]
    arm = vd.arm_parity(eager, graph)
    assert arm.state == P.DIVERGED and arm.worst.compared == 4


def test_a_same_sided_bias_is_caught_where_the_eager_runs_are_identical() -> None:
    """+0.4 % on every iteration of every seq 512 graph run: under the 0.005 floor, but on one side of eager runs
    that print the same loss to 1e-4. Before: ok."""
    eager = [vd.ArmRun(f"e{k}", "completed", [240.0] * 10, 0.1, seed=1234, loss=r)
             for k, r in enumerate(_losses(eager_logs("s512-ca7740")))]
    graph = [vd.ArmRun(f"g{k}", "completed", [47.0] * 10, 0.1, seed=1234, loss={i: x * 1.004 for i, x in r.items()})
             for k, r in enumerate(_losses(graph_logs("s512-ca7740")))]
    v = vd.judge_cell(eager, graph, margin=0.02)
    assert v.verdict == INVALID and v.loss_bias and "a bias the floor would hide" in prose.reason(asdict(v))
    correct = [vd.ArmRun(g.run_id, "completed", g.step_ms, 0.1, seed=1234, loss=r)
               for g, r in zip(graph, _losses(graph_logs("s512-ca7740")))]
    assert vd.judge_cell(eager, correct, margin=0.02).loss_parity == P.PARITY_OK


def _losses(paths: list[Path]) -> list[dict[int, float]]:
    out = []
    for p in paths:
        it = parse_run([p], arm=EAGER, warmup=4).iterations
        out.append({int(i): float(x) for i, x in zip(it.iteration, it.loss)})
    return out


# --- 6. prose: the printed step times reproduce the printed ratio ----------------------------------------------------
def test_the_printed_step_times_reproduce_the_printed_speedup(capsys: pytest.CaptureFixture[str]) -> None:
    """The 1.2B model at seq 4096: eager jobs 240-252 ms. Before: the medians of the job medians, whose ratio is not
    the speedup (the centre of the interval is the geometric mean)."""
    out = compare(capsys, eager_logs("s4096-3eeebf"), graph_logs("s4096-3eeebf", "attn+mlp"))
    m = re.search(r"([\d.]+)× \[.*eager ([\d.]+) ms vs graph ([\d.]+) ms", out["reason"])
    # the speedup is printed to 2 decimals (judge/prose.py speedup_text): the ratio agrees within its rounding
    assert m and float(m.group(2)) / float(m.group(3)) == pytest.approx(float(m.group(1)), abs=5e-3)
