"""One plan: the workflow, `graphsweep plan` and `graphsweep check-spec` plan a sweep the same way (issue 32), with the
repeats `graphsweep more-repeats` asked for and the workflow's `cluster` setting.

The adaptive sweep (tests/support.py) with its loop's budget raised to a third repeat in results/adaptive/extra_repeats.yaml,
planned for the Slurm cluster: its graph arm needs a CUDA device, which a Slurm job has and this machine may not
have, so on a machine without CUDA the cluster setting decides whether the graph runs are submitted or blocked.
"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from graphsweep import cli
from graphsweep.plan.repeats import write_raise
from graphsweep.sweepspec.load import load_spec
from graphsweep.store.tables import read_table
from graphsweep.workloads.base import cuda_here
from tests.support import ADAPTIVE_SPEC, copy_workflow, snakemake

SPEC_PATH = "configs/adaptive.yaml"


def run_cli(capsys, *argv: object) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def sweep_with_extra_repeats(tmp_path, monkeypatch):
    workdir = copy_workflow(tmp_path)
    (workdir / SPEC_PATH).write_text(yaml.safe_dump(ADAPTIVE_SPEC, sort_keys=False))
    monkeypatch.chdir(workdir)
    graph_cell = next(c.cell_id for c in load_spec(SPEC_PATH).cells() if not c.is_control)
    write_raise(workdir / "results" / "adaptive" / "extra_repeats.yaml", "adaptive", 3, "a test")
    return workdir, graph_cell


def test_plan_and_check_spec_plan_what_the_cluster_and_the_extra_repeats_say(sweep_with_extra_repeats, capsys):
    workdir, graph_cell = sweep_with_extra_repeats
    rc, _, err = run_cli(capsys, "plan", SPEC_PATH, "--cluster", "slurm", "--out", "cli.parquet")
    assert rc == 0, err
    plan = read_table(workdir / "cli.parquet", "plan")
    graph = plan[plan.cell_id == graph_cell]
    assert sorted(graph.repeat) == [1, 2, 3]  # the budget extra_repeats.yaml raised
    assert sorted(graph.look) == [1, 1, 2]  # the third repeat only if the loop's second look asks for it
    assert set(graph.status) == {"submit"}  # a Slurm job has the CUDA device this machine may lack
    rc, out, err = run_cli(capsys, "check-spec", SPEC_PATH, "--cluster", "slurm", "--json")
    assert rc == 0, err
    summary = json.loads(out)
    first = plan[plan.look == 1]
    assert (summary["runs"], summary["to_submit"]) == (len(first), int((first.status != "blocked").sum()))
    assert summary["loop_runs"] == int((plan.look > 1).sum())
    if not cuda_here():  # planned for this machine's local executor, the graph arm cannot start
        rc, _, err = run_cli(capsys, "plan", SPEC_PATH, "--dry-run", "--commands")
        assert rc == 0, err
        rc, out, _ = run_cli(capsys, "check-spec", SPEC_PATH, "--json")
        assert json.loads(out)["blocked"] == 2  # the first look's graph runs


@pytest.mark.snakemake
def test_graphsweep_plan_writes_the_workflows_own_plan_parquet(sweep_with_extra_repeats, capsys):
    workdir, _ = sweep_with_extra_repeats
    workflow_plan = workdir / "results" / "adaptive" / "plan.parquet"
    proc = snakemake(workdir, "--cores", "1", "--config", f"spec={SPEC_PATH}", "cluster=slurm", "--",
                     str(workflow_plan.relative_to(workdir)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rc, _, err = run_cli(capsys, "plan", SPEC_PATH, "--cluster", "slurm", "--out", "cli.parquet")
    assert rc == 0, err
    ours, theirs = read_table(workdir / "cli.parquet", "plan"), read_table(workflow_plan, "plan")
    pd.testing.assert_frame_equal(ours, theirs)
    assert pq.read_schema(workdir / "cli.parquet").metadata == pq.read_schema(workflow_plan).metadata
    assert (workdir / "cli.parquet").read_bytes() == workflow_plan.read_bytes()
