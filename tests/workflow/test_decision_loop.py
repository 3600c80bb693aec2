"""The decision loop through the real workflow (Snakemake checkpoints, submitit's local executor, parse, the looks):
rounds of repeats within one invocation until every cell is decided or the budget is spent, more-repeats to go on,
and Ctrl-C with a rerun that finishes the loop without running any job twice.

The training jobs are the one fake here, for the GPU CI lacks: tests/fixtures/replay_h200.py prints recorded real H200
jobs (benchmarks/data/h200-extra, the medium probe shape: eager ~15 ms, full_iteration ~7 ms) in place of the builtin
trainer; its scoped variant replays eager jobs with their capture lines (a graph arm with no effect). Graph arms are
blocked at plan time on a machine without CUDA, so the spec says `verify: true` to submit them anyway.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from graphsweep.layout import SweepPaths
from graphsweep.store.tables import read_table
from graphsweep.vocab import LOOP_BUDGET, LOOP_CONTROL, LOOP_DECIDED, SPEEDUP
from tests.support import ROOT, copy_workflow, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.snakemake]

REPLAY = ROOT / "tests" / "fixtures" / "replay_h200.py"
SPEC = {
    "sweep": "loop",
    "description": "recorded real H200 jobs replayed through the decision loop",
    "workload": {"kind": "builtin", "python": str(REPLAY)},
    "axes": {"hidden": [1024]},  # the replay's medium shape
    "fixed": {"layers": 8, "heads": 16, "seq_length": 512, "micro_batch": 2},
    "variants": [{"impl": "full_iteration"}, {"impl": "transformer_engine", "scope": ["attn"]}],
    "aa_control": True,
    "repeats": 3,
    "warmup": 3,
    "iterations": 36,
    "verify": True,  # graph arms are blocked at plan time here (no CUDA): submit them, the replay runs them
    "decide": {"max_repeats": 4},
    "executor": {"cluster": "local", "timeout_min": 5},
}
FULL, NULL, AA_CELL = "full_iteration", "attn", "aa"


def write_spec(workdir: Path, spec: dict) -> str:
    (workdir / "configs" / "loop.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return "configs/loop.yaml"


def looks(out: Path) -> list[dict]:
    files = sorted((out / "looks").glob("look-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    return [json.loads(p.read_text()) for p in files]


def runs_of(out: Path, cell_suffix: str) -> list[str]:
    return sorted(p.name for p in (out / "runs").iterdir() if p.name.rsplit(".r", 1)[0].endswith(cell_suffix)
                  and (p / "run.json").exists())


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("loop"))
    spec = write_spec(workdir, SPEC)
    proc = snakemake(workdir, "--cores", "2", "--config", f"spec={spec}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    (workdir / "first.log").write_text(proc.stderr)
    return workdir


def test_one_invocation_takes_looks_until_the_budget_is_spent(swept):
    out = swept / "results" / "loop"
    chain = looks(out)
    assert [(lk["look"], lk["repeats"], lk["end"]) for lk in chain] == [(1, 3, ""), (2, 4, "max_repeats")]
    first = chain[0]["cells"]
    full = next(c for c in first if c.endswith(FULL))
    null = next(c for c in first if c.endswith("." + NULL))
    assert first[full]["status"] == LOOP_DECIDED and first[full]["verdict"] == SPEEDUP
    assert chain[-1]["cells"][null]["status"] == LOOP_BUDGET
    # the decided cell got no more repeats; the live one, its shape's baseline and A/A control got the round
    assert [r[-2:] for r in runs_of(out, FULL)] == ["r1", "r2", "r3"]
    for cell in (NULL, "eager", AA_CELL):
        assert [r[-2:] for r in runs_of(out, "." + cell)] == ["r1", "r2", "r3", "r4"], cell
    assert not (out / "runs" / f"{null}.r5").exists()


def test_the_comparison_says_where_the_loop_left_each_cell(swept):
    comp = read_table(SweepPaths(swept / "results", "loop").comparison, "comparison").set_index("variant")
    assert comp.loc["full_iteration", "loop_status"] == LOOP_DECIDED
    assert comp.loc["full_iteration", "look"] == 1 and comp.loc["full_iteration", "loop_repeats"] == 3
    assert comp.loc[NULL, "loop_status"] == LOOP_BUDGET and comp.loc[NULL, "look"] == 2
    assert comp.loc[AA_CELL, "loop_status"] == LOOP_CONTROL
    # the baseline of a cell is the shape's eager and A/A control runs: 4 + 4 jobs at look 2
    assert comp.loc[NULL, "n_eager"] == 8 and comp.loc[NULL, "n_graph"] == 4
    assert comp.loc[NULL, "repeats_to_decide"] is None or pd.isna(comp.loc[NULL, "repeats_to_decide"]) \
        or comp.loc[NULL, "repeats_to_decide"] > 4
    # the final judgement is the replay of the looks: the decided cell keeps its look-1 interval
    first = looks(swept / "results" / "loop")[0]["cells"]
    full = next(c for c in first if c.endswith(FULL))
    assert comp.loc["full_iteration", "ci_low"] == pytest.approx(first[full]["ci_low"])
    assert "graphsweep: sweep 'loop' done" in (swept / "first.log").read_text()


def test_a_rerun_finds_the_loop_complete_and_runs_nothing(swept):
    proc = snakemake(swept, "--cores", "2", "--config", "spec=configs/loop.yaml", "-n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_more_repeats_raises_the_budget_and_the_loop_goes_on(swept, tmp_path):
    results = str(swept / "results")
    cli = [sys.executable, "-m", "graphsweep.cli", "more-repeats", "configs/loop.yaml", "--results", results]
    dry = subprocess.run([*cli, "--dry-run", "--max-repeats", "5"], cwd=swept, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "budget 4 -> 5 jobs per arm" in dry.stdout and "dry run: nothing written" in dry.stdout
    out = swept / "results" / "loop"
    assert not (out / "extra_repeats.yaml").exists()
    before = {p.parent.name: p.stat().st_mtime for p in (out / "runs").glob("*/run.json")}
    real = subprocess.run([*cli, "--max-repeats", "5"], cwd=swept, capture_output=True, text=True)
    assert real.returncode == 0, real.stderr
    assert yaml.safe_load((out / "extra_repeats.yaml").read_text())["max_repeats"] == 5
    assert "continue with: snakemake" in real.stdout
    proc = snakemake(swept, "--cores", "2", "--config", "spec=configs/loop.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    chain = looks(out)
    assert chain[-1]["look"] == 3 and chain[-1]["repeats"] == 5
    after = {p.parent.name: p.stat().st_mtime for p in (out / "runs").glob("*/run.json")}
    assert {k: v for k, v in after.items() if k in before} == before  # no finished run ran again
    new = sorted(set(after) - set(before))
    assert new and all(r.endswith(".r5") for r in new) and not any(r.endswith(FULL + ".r5") for r in new)


def test_ctrl_c_in_the_middle_of_the_loop_and_a_rerun_submit_no_job_twice(tmp_path):
    workdir = copy_workflow(tmp_path / "w")
    spec = write_spec(workdir, SPEC)
    out = workdir / "results" / "loop"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", "--config", f"spec={spec}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.time() + 600
    while not (out / "looks" / "look-1.json").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    assert (out / "looks" / "look-1.json").exists(), "the first look never came"
    time.sleep(2)  # the second round is being submitted or running
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=300)
    done_before = {p.parent.name for p in (out / "runs").glob("*/run.json")}
    again = snakemake(workdir, "--cores", "2", "--config", f"spec={spec}", "--rerun-incomplete")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-5000:]
    chain = looks(out)
    assert chain[-1]["end"] == "max_repeats"
    # each finished run has the one job it was given: its attempt 1 (a resubmission would show a second attempt)
    for path in (out / "runs").glob("*/run.json"):
        record = json.loads(path.read_text())
        assert record.get("attempt", 1) == 1, path
    assert done_before <= {p.parent.name for p in (out / "runs").glob("*/run.json")}
