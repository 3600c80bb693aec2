"""The launch gate (spec `launch_gate: true`, graphsweep/run/gate.py): a graph arm waits for its shape's eager runs and
is skipped when their GPU-busy diagnostic says no graph can win beyond the margin.

The decisions are taken on the committed real H200 eager runs (results/examples/h200-builtin: their summaries carry
the GPU-busy time measured inside each training process); the workflow test runs real Snakemake on the CPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from graphsweep import logformat as lf
from graphsweep.judge import prose
from graphsweep.judge.verdict import ArmRun, judge_cell
from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.parse.signatures import LAUNCH_GATE_CLASS
from graphsweep.plan.planner import gate_inputs, plan_sweep
from graphsweep.run import gate
from graphsweep.run.runrule import execute_run
from graphsweep.sweepspec.load import validate_spec
from graphsweep.layout import RunDir
from graphsweep.fileio import UnusableFile
from graphsweep.records import GateDecision, SpecError
from graphsweep.vocab import BLOCKED, COMPLETED
from tests.support import ROOT, run_spec

BUILTIN = ROOT / "results" / "examples" / "h200-builtin" / "runs"
COMPUTE = "h4096-nh32-l4-s2048-mb4-cfca67"  # the GPU busy 95 % of the eager step: ceiling 1.05x
LAUNCH = "h256-nh4-l4-s128-mb1-b444f4"  # busy 9 %: ceiling 11x


def eager_summaries(shape: str) -> list[Path]:
    return [BUILTIN / f"{shape}.eager.r{k}" / "summary.json" for k in (1, 2, 3)]


def test_the_gate_runs_what_can_win_and_skips_what_cannot() -> None:
    launch = gate.decide(eager_summaries(LAUNCH), margin=0.02)
    assert not launch.skip and launch.ceiling > 10
    compute = gate.decide(eager_summaries(COMPUTE), margin=0.02)
    assert not compute.skip and 1.02 < compute.ceiling < 1.06  # 1.05x is still above 1 + 0.02: it runs
    strict = gate.decide(eager_summaries(COMPUTE), margin=0.06)
    assert strict.skip and strict.eager_runs == 3  # nothing can beat 1 + 0.06 there: measured 0.95x-0.99x, all below
    assert GateDecision.from_dict(json.loads(json.dumps(strict.to_dict()))) == strict  # run.json's record, typed


def test_without_a_measurement_the_graph_arm_runs(tmp_path: Path) -> None:
    """Eager runs that predate the diagnostic (the tiny Megatron sweeps) or ran on a CPU say nothing: never skip."""
    old = ROOT / "results" / "examples" / "megatron-tiny-vanilla-gpt" / "runs"
    decision = gate.decide([old / f"s1024-mb1-6d688f.eager.r{k}" / "summary.json" for k in (1, 2)], margin=0.02)
    assert not decision.skip and decision.ceiling is None


def test_a_skipped_graph_run_starts_no_job_and_reads_blocked_with_the_figures(tmp_path: Path) -> None:
    src = BUILTIN / f"{COMPUTE}.full_iteration.r1"
    run = RunDir(tmp_path / src.name)
    run.root.mkdir()
    cfg = yaml.safe_load((src / "config.yaml").read_text())
    cfg["gate"] = {"margin": 0.06}
    run.config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    said: list[str] = []
    record = execute_run(run, tmp_path / "jobs", say=said.append, gate=eager_summaries(COMPUTE))
    assert record.executor == "launch-gate" and record.gpu_seconds == 0.0 and record.job_id is None
    assert not (tmp_path / "jobs").exists()  # no job was submitted
    decision = GateDecision.from_dict(json.loads(run.run_json.read_text())["gate"])
    assert decision.skip and decision.ceiling < 1.06
    assert any("skipped by the launch gate" in s for s in said)
    assert f"{decision.ceiling:.3f}" not in run.log.read_text()  # the log carries no figure to be read back
    summary = parse_run_dir(run)
    assert (summary.outcome, summary.error_class, summary.signature) == (BLOCKED, LAUNCH_GATE_CLASS, None)
    assert summary.reason == ("not run (the launch gate): the GPU is busy 95% of an eager step (3 eager run(s)): no "
                              f"graph of this step can be faster than {decision.ceiling:.3f}x, inside the margin 1 + 0.06")
    v = judge_cell([ArmRun("e", "completed", [86.5] * 20, 0.1)],
                   [ArmRun(run.run_id, summary.outcome, [], reason=summary.reason, error_class=summary.error_class)],
                   margin=0.06)
    assert v.verdict == BLOCKED and v.failure_class == LAUNCH_GATE_CLASS
    assert "launch gate" in prose.reason(v.__dict__)


def test_the_decision_is_the_record_never_a_log_line(tmp_path: Path) -> None:
    """The parser takes the gate's decision from run.json alone: a log line that says the gate skipped the run does not
    make it so, and a damaged record is named, not guessed at."""
    src = BUILTIN / f"{COMPUTE}.full_iteration.r1"
    run = RunDir(tmp_path / src.name)
    shutil.copytree(src, run.root, ignore=shutil.ignore_patterns("summary.json", "iterations.parquet"))
    ran = parse_run_dir(run)
    run.log.write_text(lf.GATE_SKIPPED + "\n" + run.log.read_text())
    summary = parse_run_dir(run)  # the real H200 run, which did run: a line that claims otherwise is no decision
    assert (summary.outcome, summary.error_class, summary.reason) == (ran.outcome, ran.error_class, ran.reason)
    assert summary.outcome == COMPLETED and summary.measurement_usable
    info = json.loads(run.run_json.read_text())
    run.run_json.write_text(json.dumps({**info, "gate": {"ceiling": "1.046", "busy_share": 0.95, "eager_runs": 3,
                                                         "margin": 0.06}}))
    with pytest.raises(UnusableFile, match=r"run\.json: gate\.ceiling = '1\.046' is not a number"):
        parse_run_dir(run)


def test_without_the_gate_config_the_run_rule_ignores_eager_summaries(tmp_path: Path) -> None:
    """A sweep without launch_gate: its configs have no gate (so they stay as they were), and nothing is skipped."""
    spec = validate_spec(yaml.safe_load((ROOT / "configs" / "examples" / "h200-builtin.yaml").read_text()), "x.yaml")
    planned = plan_sweep(spec, cluster="slurm")
    assert all("gate" not in p.config() for p in planned) and not any(gate_inputs(p, planned) for p in planned)
    gated = validate_spec({**spec.raw, "launch_gate": True}, "x.yaml")
    plan = plan_sweep(gated, cluster="slurm")
    graph = next(p for p in plan if p.run.arm == "graph")
    assert graph.config()["gate"] == {"margin": 0.02}
    assert gate_inputs(graph, plan) == [f"{graph.run.shape_id}.eager.r{k}" for k in (1, 2, 3)]
    assert not any(gate_inputs(p, plan) for p in plan if p.run.arm == "eager")


@pytest.mark.parametrize(("change", "key"), [({"pairing": True}, "launch_gate"), ({"warmup": 1}, "launch_gate")])
def test_specs_the_gate_cannot_serve_are_refused(change: dict, key: str) -> None:
    raw = {**yaml.safe_load((ROOT / "configs" / "examples" / "h200-builtin.yaml").read_text()), "launch_gate": True,
           **change}
    with pytest.raises(SpecError) as err:
        validate_spec(raw, "x.yaml")
    assert err.value.key == key


@pytest.mark.slow
@pytest.mark.snakemake
@pytest.mark.torch
def test_graph_runs_wait_for_their_eager_runs_in_the_workflow(tmp_path: Path) -> None:
    """Real Snakemake on the CPU: with `verify: true` the CPU-blocked graph arm is submitted anyway, and the gate
    makes it wait for the shape's eager summaries (on a CPU they measure no GPU: the graph arm runs, and says it
    needs CUDA)."""
    spec = {"sweep": "gated", "workload": {"kind": "builtin"}, "axes": {"hidden": [32]},
            "fixed": {"layers": 1, "heads": 2, "seq_length": 16, "micro_batch": 1, "vocab": 64},
            "variants": [{"impl": "full_iteration"}], "repeats": 2, "warmup": 2, "iterations": 6, "verify": True,
            "launch_gate": True, "executor": {"cluster": "local", "timeout_min": 5}}
    out = run_spec(tmp_path, "gated", spec) / "results" / "gated"
    runs = out / "runs"
    eager = [runs / f"{d.name}" / "summary.json" for d in runs.iterdir() if ".eager." in d.name]
    graph = [runs / d.name / "run.json" for d in runs.iterdir() if ".full_iteration." in d.name]
    assert len(eager) == 2 and len(graph) == 2
    assert min(g.stat().st_mtime for g in graph) >= max(e.stat().st_mtime for e in eager)
    records = [json.loads(g.read_text()) for g in graph]
    assert all(r["executor"] == "local" for r in records)  # not skipped: nothing measured
    assert all(GateDecision.from_dict(r["gate"]) == GateDecision(None, None, 0, 0.02) for r in records)
    shutil.rmtree(out)
