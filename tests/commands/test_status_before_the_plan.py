"""`graphsweep status` between submission and plan.parquet: the Slurm profile's controller submits the runs while
its plan job may still be writing plan.parquet (the run rule does not wait for it), and a controller killed then
leaves none. status then plans the sweep from the spec, whose executor is local: on this machine without CUDA that
plan blocks the graph arm, which the Slurm profile did submit. A run with a job in flight is in flight."""

from __future__ import annotations

from pathlib import Path

import yaml

from graphsweep.commands.status import _plan, collect
from graphsweep.fileio import write_json
from graphsweep.layout import SweepPaths
from graphsweep.records import JobSide
from graphsweep.sweepspec.load import load_spec
from graphsweep.vocab import BLOCKED


def test_a_submitted_graph_arm_is_not_called_blocked_before_the_plan_is_written(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({
        "sweep": "s", "workload": {"kind": "builtin"}, "axes": {"hidden": [64]},
        "fixed": {"layers": 1, "heads": 2, "seq_length": 16, "vocab": 64, "micro_batch": 1},
        "variants": [{"impl": "full_iteration"}], "repeats": 1, "warmup": 1, "iterations": 5,
        "executor": {"cluster": "local", "timeout_min": 5}}))  # fmt: skip
    spec = load_spec(spec_path)
    paths = SweepPaths(tmp_path / "results", spec.name)
    plan = _plan(paths, spec)  # no plan.parquet: planned here, from the spec
    graph = plan[plan.arm == "graph"].run_id.iloc[0]
    assert plan.set_index("run_id").status[graph] == BLOCKED  # a machine without CUDA, a local executor
    for run_id, job_id in zip(plan.run_id, ("101", "102")):  # the Slurm profile submitted both
        paths.jobs(run_id).root.mkdir(parents=True)
        write_json(paths.jobs(run_id).side, JobSide(cluster="slurm", job_id=job_id, folder=str(tmp_path), log="",
                                                    attempt=1, timeout_min=5, submitted_utc="").to_dict())
    statuses, _ = collect(paths.root, plan, query=lambda ids: {})
    states = {s.run_id: s.state for s in statuses}
    assert states[graph] == "queued" and BLOCKED not in states.values(), states
