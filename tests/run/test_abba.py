"""Pairing (spec `pairing: true`): the ABBA driver, splitting its log, one measured run per arm, and the verdict.

The "training" here is a 20-line script that prints Megatron Bridge log lines (docs/megatron-facts.md §5.1 per-iteration line
from train_utils.py::training_log, §5.5 full-iteration capture lines, §5.6 start/end markers), so every test runs
the real driver, the real parser and the real compare in well under a second each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from graphsweep.judge import verdict as stats
from graphsweep.parse import segments
from graphsweep.entry import abba as driver
from graphsweep.entry.job import is_pair_plan
from graphsweep.workloads import paired
from graphsweep.workloads.registry import for_run
from graphsweep.store.aggregate import aggregate
from graphsweep.judge.compare import compare
from graphsweep.layout import RunDir
from graphsweep.records import LaunchPlan
from graphsweep.workloads.registry import launch_plan, preflight
from graphsweep.plan.planner import plan_frame, plan_sweep, write_plan
from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.sweepspec.load import validate_spec
from tests.support import ROOT

FAKE_TRAIN = textwrap.dedent(
    """
    import sys
    ms, iters, warmup, graph = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "graph"
    oom = len(sys.argv) > 5 and sys.argv[5] == "oom"
    print("time to initialize megatron (seconds): 0.5")  # docs/megatron-facts.md §5.6
    print("Starting training loop at iteration 0")
    for i in range(1, iters + 1):
        if graph and i == warmup + 1:
            print("Capture CUDA graph for training!!!")  # megatron.core.full_cuda_graph, docs/megatron-facts.md §5.5
            if oom:
                print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                      "capacity of 139.80 GiB of which 1.06 GiB is free.")
                sys.exit(1)
            print("CUDA graph capture done for training!!!")
            print("[graphsweep] capture seconds: 0.020")
        t = 3 * ms if i == 1 else ms * (1 + 0.004 * ((i * 7) % 5 - 2))  # slow first step, small deterministic jitter
        # docs/megatron-facts.md §5.1: Bridge training_log, last rank
        print(f" [2026-11-30 10:00:00] iteration {i:8d}/{iters:8d} | consumed samples: {i:12d} | "
              f"elapsed time per iteration (ms): {t:.1f} | learning rate: 1.000000E-04 | global batch size:     1 | "
              f"lm loss: 6.000000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | "
              f"number of nan iterations:   0 |")
    if graph:
        print(f"[graphsweep] cuda graph replays: {iters - warmup - 1}")
        print("Deleting CUDA graphs")
    print("[after training is done] datetime: 2026-11-30 10:00:01 ")
    """
)
WARMUP, ITERS = 2, 16


@pytest.fixture(scope="module")
def fake_train(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fake") / "fake_train.py"
    path.write_text(FAKE_TRAIN)
    return path


def _plan(script: Path, ms: float, arm: str, *extra: str) -> LaunchPlan:
    return LaunchPlan(argv=[sys.executable, str(script), str(ms), str(ITERS), str(WARMUP), arm, *extra])


def _drive(plan: LaunchPlan, segments_dir: Path | None = None) -> subprocess.CompletedProcess:
    argv = list(plan.argv[1:]) + (["--segments-dir", str(segments_dir)] if segments_dir else [])
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60)


def test_driver_runs_abba_and_each_segment_gets_its_own_log(fake_train, tmp_path):
    pair = paired.pair_plan(_plan(fake_train, 10.0, "eager"), _plan(fake_train, 8.0, "graph"), repeat=1)
    proc = _drive(pair, tmp_path / "segments")
    assert proc.returncode == 0, proc.stderr
    starts = [line.split()[3] for line in proc.stdout.splitlines() if " start: " in line]
    assert starts == ["A1", "B1", "B2", "A2"]
    files = sorted(p.name for p in (tmp_path / "segments").iterdir())
    assert files == ["A1.log", "A2.log", "B1.log", "B2.log"]
    # the combined log split back gives exactly what each segment wrote
    for seg in segments.split_segments(proc.stdout):
        assert seg.text == (tmp_path / "segments" / f"{seg.label}.log").read_text()
        assert seg.exit_code == 0 and seg.wall_s > 0
        assert ("Capture CUDA graph" in seg.text) == (seg.arm == "graph")


def test_even_repeats_run_baab(fake_train):
    pair = paired.pair_plan(_plan(fake_train, 10.0, "eager"), _plan(fake_train, 8.0, "graph"), repeat=2)
    proc = _drive(pair)
    assert [s.label for s in segments.split_segments(proc.stdout)] == ["B1", "A1", "A2", "B2"]


def test_driver_exit_code_is_the_first_failed_segment_and_every_segment_still_runs(fake_train):
    pair = paired.pair_plan(_plan(fake_train, 10.0, "eager"), _plan(fake_train, 8.0, "graph", "oom"), repeat=1)
    proc = _drive(pair)
    segs = segments.split_segments(proc.stdout)
    assert proc.returncode == 1
    assert [(s.label, s.exit_code) for s in segs] == [("A1", 0), ("B1", 1), ("B2", 1), ("A2", 0)]


def test_a_segment_cut_off_by_the_end_of_the_job_has_no_exit_code():
    text = (
        "[graphsweep abba] segment A1 (eager) start: x\nline a\n[graphsweep abba] segment A1 (eager) end: exit 0, "
        "wall 1.500 s\n[graphsweep abba] segment B1 (graph) start: y\nline b\n"
    )
    a1, b1 = segments.split_segments(text)
    assert (a1.text, a1.exit_code, a1.wall_s) == ("line a\n", 0, 1.5)
    assert (b1.text, b1.exit_code) == ("line b\n", None)


# --------------------------------------------------------------------------------------------------
# Plan side


def _spec(**extra):
    raw = {
        "sweep": "pairs",
        "workload": {"kind": "builtin"},
        "axes": {"hidden": [64]},
        "fixed": {"layers": 1, "heads": 2, "seq_length": 32, "micro_batch": 1},
        "variants": [{"impl": "full_iteration"}],
        "pairing": True,
        "repeats": 2,
        "warmup": WARMUP,
        "iterations": ITERS - WARMUP - 1,
        # planned as for a cluster with GPUs: the test drives the pair jobs itself (on this CPU machine a local
        # executor would block the graph arms at plan time)
        "executor": {"cluster": "slurm"},
        "decide": {"enabled": False},  # one look: the ids of the repeats the spec asks for, not the loop's budget
        **extra,
    }
    return validate_spec(raw, "test.yaml")


def test_pairing_plans_one_job_per_cell_repeat_and_no_shared_baseline():
    spec = _spec(aa_control=True)
    runs = spec.runs()
    assert {r.arm for r in runs} == {"pair"}
    assert sorted(r.run_id.split(".", 1)[1] for r in runs) == [
        "aa.pair.r1", "aa.pair.r2", "full_iteration.pair.r1", "full_iteration.pair.r2",
    ]  # fmt: skip
    cell = next(c for c in spec.cells() if not c.is_control)
    assert cell.pair_run_ids == tuple(r.run_id for r in runs if r.cell_id == cell.cell_id)
    assert cell.eager_run_ids == tuple(f"{j}.eager" for j in cell.pair_run_ids)
    plan = launch_plan(runs[0])
    assert is_pair_plan(plan) and "--order" in plan.argv and "A1,B1,B2,A2" in plan.argv
    df = plan_frame(plan_sweep(spec))
    assert set(df.arm) == {"pair"} and df.command.str.contains("graphsweep.entry.abba").all()
    # a pair runs each arm twice: it costs what four unpaired runs cost
    eager, graph = runs[0].pair_arms()
    four = 2 * for_run(eager).estimate(eager) + 2 * for_run(graph).estimate(graph)
    assert df.est_gpu_seconds.iloc[0] == pytest.approx(four)


def test_unpaired_ids_do_not_change():
    raw = _spec().raw
    spec = validate_spec({**raw, "pairing": False}, "test.yaml")
    ids = [r.run_id.split(".", 1)[1] for r in spec.runs()]
    assert ids == ["eager.r1", "eager.r2", "full_iteration.r1", "full_iteration.r2"]


def test_either_arms_preflight_rule_blocks_the_pair():
    raw = yaml.safe_load((ROOT / "configs/examples/megatron-tiny-vanilla-gpt.yaml").read_text())
    # NCCL_GRAPH_REGISTER=1 with expandable segments: MCore's TE graph helper refuses it, the eager arm does not
    workload = {**raw["workload"], "env": {"NCCL_GRAPH_REGISTER": 1}}
    spec = validate_spec({**raw, "pairing": True, "workload": workload}, "test.yaml")
    blocked = {}
    for run in spec.runs():
        eager, graph = run.pair_arms()
        assert preflight(eager) == []
        assert preflight(run) == preflight(eager) + preflight(graph)
        blocked[run.variant.name] = [v.rule for v in preflight(run)]
    assert blocked == {"attn": ["expandable_segments_nccl_graph_register"],
                       "attn+mlp": ["expandable_segments_nccl_graph_register"],
                       "full_iteration": ["full_iteration_expandable_segments"]}


# --------------------------------------------------------------------------------------------------
# Parse, aggregate, compare: synthetic pair jobs through the real pipeline functions


def _pair_job(out: Path, spec, run, fake_train: Path, eager_ms: float, graph_ms: float, graph_extra=()) -> Path:
    """A finished pair job's run folder: config.yaml as the workflow writes it, log.txt from the real driver."""
    run_dir = out / "runs" / run.run_id
    run_dir.mkdir(parents=True)
    planned = {p.run.run_id: p for p in plan_sweep(spec)}[run.run_id]
    (run_dir / "config.yaml").write_text(yaml.safe_dump(planned.config(), sort_keys=False))
    pair = paired.pair_plan(_plan(fake_train, eager_ms, "eager"), _plan(fake_train, graph_ms, "graph", *graph_extra),
                          repeat=run.repeat)  # fmt: skip
    proc = _drive(pair)
    (run_dir / "log.txt").write_text(proc.stdout)
    walls = sum(s.wall_s for s in segments.split_segments(proc.stdout))
    info = {"run_id": run.run_id, "job_id": f"j{run.repeat}", "exit_code": proc.returncode, "state": "COMPLETED",
            "wall_s": walls + 1.0, "gpus": 1, "gpu_seconds": walls + 1.0, "attempt": 1,
            "executor": "local"}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(info))
    parse_run_dir(RunDir(run_dir))
    return RunDir(run_dir)


def _sweep(tmp_path, fake_train, node_speed, graph_gain=0.9, graph_extra=()):
    spec = _spec(repeats=len(node_speed))
    out = tmp_path / "results" / spec.name
    write_plan(spec, plan_sweep(spec), out / "plan.parquet")
    dirs = [_pair_job(out, spec, run, fake_train, 10.0 * s, 10.0 * s * graph_gain, graph_extra)
            for run, s in zip(spec.runs(), node_speed)]  # fmt: skip
    aggregate(out / "plan.parquet", dirs, out / "runs.parquet", out / "iterations.parquet")
    cmp = compare(out / "plan.parquet", out / "runs.parquet", out / "iterations.parquet", out / "comparison.parquet")
    return out, pd.read_parquet(out / "runs.parquet"), cmp


def test_each_pair_job_gives_an_eager_and_a_graph_run_with_the_jobs_cost_split(tmp_path, fake_train):
    out, runs, _ = _sweep(tmp_path, fake_train, [1.0, 1.0])
    assert len(runs) == 4
    for pair_id, g in runs.groupby("pair_id"):
        assert sorted(g.arm) == ["eager", "graph"] and g.job_id.nunique() == 1
        job = json.loads((out / "runs" / pair_id / "run.json").read_text())
        assert g.gpu_seconds.sum() == pytest.approx(job["gpu_seconds"], abs=0.01)  # counted once, split
        assert (g.steady_n == 2 * (ITERS - WARMUP - 1)).all()  # two segments' windows
        assert sorted(g[g.arm == "graph"].segments.iloc[0]) == ["B1", "B2"]  # a list (store/schema.py)
    it = pd.read_parquet(out / "iterations.parquet")
    one = it[it.run_id == runs.run_id.iloc[0]]
    assert one.iteration.is_monotonic_increasing and one.iteration.max() == 2 * ITERS
    assert sorted(one.segment.unique()) == ["A1", "A2"]


@pytest.mark.slow
def test_pairing_removes_node_to_node_variance_from_the_verdict(tmp_path, fake_train):
    # four jobs on nodes up to 30 % apart; within every job the graph arm is 10 % faster
    node_speed = [1.0, 1.3, 0.85, 1.15]
    _, runs, cmp = _sweep(tmp_path, fake_train, node_speed)
    row = cmp.iloc[0]
    assert row.verdict == "speedup", row.reason
    assert row.design == "paired" and row.n_eager == row.n_graph == 4
    assert 1.08 < row.ci_low <= row.speedup <= row.ci_high < 1.14
    # the same runs judged as independent jobs cannot tell: the nodes' spread swamps a 10 % effect
    med = runs.set_index("run_id").step_ms_median
    unpaired = stats.judge_cell(
        [stats.ArmRun(r, "completed", [med[r]]) for r in row.eager_run_ids],
        [stats.ArmRun(r, "completed", [med[r]]) for r in row.graph_run_ids],
        margin=0.02, paired=False,
    )
    assert unpaired.verdict == "inconclusive"
    assert np.log(row.ci_high / row.ci_low) < np.log(unpaired.ci_high / unpaired.ci_low) / 5


@pytest.mark.slow
def test_a_graph_arm_that_ooms_in_its_segments_is_an_oom_cell(tmp_path, fake_train):
    _, runs, cmp = _sweep(tmp_path, fake_train, [1.0, 1.0], graph_extra=("oom",))
    assert set(runs[runs.arm == "graph"].outcome) == {"oom"}
    assert set(runs[runs.arm == "eager"].outcome) == {"completed"}
    assert cmp.iloc[0].verdict == "oom" and cmp.iloc[0].paired_outcome == "graph-only-oom"


def test_on_slurm_the_driver_runs_in_the_batch_step_and_each_segment_is_its_own_srun_step():
    from graphsweep.entry.job import job_argv
    from graphsweep.run.sbatch import slurm_parameters

    arm = LaunchPlan(argv=["python", "-m", "train"], gpus=8, gpus_per_node=8, tasks_per_node=8, srun=True,
                     srun_args=["--ntasks-per-node=8"])  # fmt: skip
    pair = paired.pair_plan(arm, LaunchPlan(**{**arm.__dict__, "argv": ["python", "-m", "train", "--graph"]}), repeat=1)
    slurm = {"container_image": "nvcr.io/nvidia/nemo:25.09", "partition": "batch"}
    params = slurm_parameters(pair, slurm, 30, "gs-pair")
    # the allocation fits one srun step of 8 tasks; the driver itself is not wrapped in srun (NeMo has no submitit)
    assert (params["tasks_per_node"], params["gpus_per_node"], params["slurm_use_srun"]) == (8, 8, False)
    argv = job_argv(pair, slurm)
    assert argv[:3] == pair.argv[:3] and "srun" not in argv[:3]
    args = driver._parse_args(argv[3:])
    seg = driver._segment_argv(LaunchPlan.from_dict(json.loads(args.plans)["B"]), json.loads(args.slurm))
    assert seg[0] == "srun" and "--container-image=nvcr.io/nvidia/nemo:25.09" in seg and seg[-1] == "--graph"
