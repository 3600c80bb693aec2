"""GPU-hour estimates from what the workloads really cost (issue 31 item 2): the planner's cost model takes its
figures from the committed real H200 runs (benchmarks/estimates.py), estimates each committed sweep within 30% of
what it spent, and a sweep's finished runs correct the estimate of its runs still to come (plan/cost.py)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from graphsweep.plan.cost import Correction, correction, sweep_cost
from graphsweep.store.timeparts import spent_by_run
from graphsweep.plan.planner import first_look, check_plan, dry_run_summary, plan_sweep, submitted
from graphsweep.sweepspec.load import load_spec
from graphsweep.records import SpecError
from graphsweep.workloads import builtin, megatron_bridge
from tests.support import ROOT, benchmark

est = benchmark("estimates")
FOUND = {s.name: (s, runs) for s in est.SWEEPS if (runs := est.runs_of(s)) is not None}
COMMITTED = [name for name, (s, _) in FOUND.items() if s.runs.startswith("results/examples/")]


def test_the_cost_models_are_the_committed_runs_figures():
    kinds: dict[str, list[pd.DataFrame]] = {}
    for s, runs in FOUND.values():
        kinds.setdefault(est.kind_of(s), []).append(runs)
    for kind, model in (("builtin", builtin.COST), ("megatron_bridge", megatron_bridge.COST)):
        f = est.fitted(kinds[kind])
        assert model.startup_s == pytest.approx(f["startup_s"], abs=0.05), kind
        assert model.teardown_s == pytest.approx(f["teardown_s"], abs=0.05), kind
        assert model.capture_s == pytest.approx(f["capture_s"], abs=0.05), kind
        assert model.step_s == pytest.approx(f["loop_s_per_iteration"], abs=5e-4), kind


@pytest.mark.parametrize("name", COMMITTED)
def test_each_committed_sweep_is_estimated_within_30_percent_of_what_it_spent(name):
    n, estimate, actual = est.estimate_vs_actual(*FOUND[name])
    assert n >= 2 and actual > 0
    assert abs(estimate / actual - 1) <= 0.30, (name, estimate, actual)


def _planned(name: str):
    s, runs = FOUND[name]
    return first_look(plan_sweep(load_spec(ROOT / s.spec), "slurm")), runs  # what ran: the first look


def test_finished_runs_correct_the_estimate_of_the_runs_to_come():
    planned, runs = _planned("megatron-1b-dense")
    spent = spent_by_run(runs)
    first = {r: c for r, c in spent.items() if r.endswith(".r1")}
    fix = correction(planned, first)
    assert fix.finished == len(first) > 0 and fix.ratio == pytest.approx(
        pd.Series([first[p.run.run_id] / p.est_gpu_seconds for p in planned if p.run.run_id in first]).median())
    later = next(p for p in planned if p.run.run_id.endswith(".r2"))
    same_cell = [c for r, c in first.items() if r.startswith(f"{later.run.cell_id}.r")]
    assert fix.cost(later.run, later.est_gpu_seconds) == pytest.approx(pd.Series(same_cell).median())
    # a cell none of whose runs finished: the model's estimate times what the finished runs took against theirs
    other = dataclasses.replace(later.run, variant=dataclasses.replace(later.run.variant, name="new"))
    assert Correction(fix.finished, fix.ratio, {}).cost(other, 100.0) == pytest.approx(100.0 * fix.ratio)
    # the whole sweep: what the finished runs took, and the rest corrected
    cost = sweep_cost(planned, first)
    assert cost.spent_s == pytest.approx(sum(first.values()))
    assert cost.to_come_s == pytest.approx(sum(fix.cost(p.run, p.est_gpu_seconds) for p in planned
                                               if p.run.run_id not in first))  # fmt: skip


def test_the_budget_check_and_the_dry_run_count_the_finished_runs():
    # a sweep whose runs cost clearly more or less than the model says (megatron-1b-dense: within 1 % since the cost
    # model took the 2026-12-04 MoE's runs too)
    planned, runs = _planned("megatron-tiny-vanilla-gpt")
    spec = load_spec(ROOT / FOUND["megatron-tiny-vanilla-gpt"][0].spec)
    spent = spent_by_run(runs)  # every run finished: the sweep cost what it took
    summary = dry_run_summary(planned, spent)
    assert summary["gpu_hours"] == pytest.approx(sum(spent.values()) / 3600, abs=1e-3)
    assert summary["spent_gpu_hours"] == summary["gpu_hours"] and f"{len(spent)} finished runs" in summary["estimate"]
    model_h, actual_h = sum(p.est_gpu_seconds for p in planned) / 3600, sum(spent.values()) / 3600
    assert abs(model_h / actual_h - 1) > 0.01  # the two differ: a budget between them tells which one is counted
    between = dataclasses.replace(spec, raw={**spec.raw, "budget_gpu_hours": (model_h + actual_h) / 2})
    refused = "budget_gpu_hours.*over its budget"
    if model_h > actual_h:  # the model alone is over the budget, what the sweep really cost is not
        with pytest.raises(SpecError, match=refused):
            check_plan(between, planned)
        check_plan(between, planned, spent)
    else:
        check_plan(between, planned)
        with pytest.raises(SpecError, match=f"corrected by this sweep's {len(spent)} finished runs"):
            check_plan(between, planned, spent)
