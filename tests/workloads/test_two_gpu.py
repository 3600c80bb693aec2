"""Two GPUs (issue 17): the commands of configs/examples/megatron-tiny-2gpu.yaml, and the run folder the local
executor leaves for a two-rank torchrun, parsed.

The run folders are made by the real parts: the planned command's own launcher (`python -m torch.distributed.run
--standalone --nnodes=1 --nproc-per-node=2 --tee=3`), started by the run rule's execute_run through submitit's local
executor and job_main, with the training program swapped for tests/fixtures/replay_rank.py, which prints, as each
rank, that rank's recorded lines of a real two-H200 run (tests/fixtures/logs/megatron-h200x2/b_rank_files: the
per-rank files torchrun wrote for run b, TE `attn`, DP 2). torchrun itself writes log.txt's `[defaultN]:` copies, the
per-rank files and its own end report. Facts from the recorded logs (tests/fixtures/README.md): only the last
rank prints the iteration line; rank 0 prints `Step Time`, the memory lines and the TE capture lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from graphsweep.resources import SOURCE_ROOT
from graphsweep.parse.run import parse_run
from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.plan.planner import plan_sweep
from graphsweep.entry.job import job_argv, tees_rank_files
from graphsweep.run.runrule import execute_run
from graphsweep.sweepspec.load import load_spec, validate_spec
from graphsweep.layout import RANKS_DIR, TORCHRUN_TEE, RunDir
from graphsweep.workloads import megatron_bridge as megatron
from graphsweep.workloads.registry import launch_plan, preflight
from tests.support import ROOT

SPEC = ROOT / "configs" / "examples" / "megatron-tiny-2gpu.yaml"
LOGS = ROOT / "tests" / "fixtures" / "logs"
B_RANKS = LOGS / "megatron-h200x2" / "b_rank_files"  # recorded: torchrun's per-rank files of run b
REPLAY = ROOT / "tests" / "fixtures" / "replay_rank.py"
GOLDEN_SLURM = ROOT / "tests" / "golden" / "megatron-tiny-2gpu.slurm.txt"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ITERATION = re.compile(r"iteration +(\d+)/ +\d+ \|")


def _shapes(runs):
    return {r.settings["model.tensor_model_parallel_size"]: r for r in runs if r.arm == "eager" and r.repeat == 1}


# --------------------------------------------------------------------------------------------------
# The commands
def test_two_shapes_three_variants_and_nothing_blocked():
    runs = load_spec(SPEC).runs()
    shapes = {(r.settings["model.tensor_model_parallel_size"], r.settings["model.sequence_parallel"]) for r in runs}
    assert shapes == {(1, False), (2, True)}
    assert {r.variant.name for r in runs} == {"eager", "attn", "attn+mlp", "full_iteration"}
    first = [r for r in runs if r.repeat <= 2]  # the first look (the loop plans every cell to its budget)
    assert len(first) == 2 * 4 * 2 and all(r.gpus == 2 for r in runs)
    assert [v for r in runs for v in preflight(r)] == []


def test_local_shapes_are_one_torchrun_of_two_ranks_with_per_rank_files():
    for tp, run in _shapes(load_spec(SPEC).runs()).items():
        plan = launch_plan(run)
        assert plan.argv[:8] == ["python", "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                                 "--nproc-per-node=2", TORCHRUN_TEE, str(SOURCE_ROOT / megatron.ENTRY_RELPATH)]
        assert (plan.gpus, plan.nodes, plan.gpus_per_node, plan.srun) == (2, 1, 2, False)
        o = plan.overrides
        assert (o["model.tensor_model_parallel_size"], o["model.sequence_parallel"]) == (tp, tp == 2)
        assert o["train.global_batch_size"] == 2 and o["train.micro_batch_size"] == 1
        assert tees_rank_files(plan)  # the local executor gives it a --log-dir (PET_LOG_DIR)


def test_every_process_keeps_nvlink_multicast_off():
    """KINDS.md (nvidia-h200-x2): NCCL_NVLS_ENABLE=0 (already in the workload's DEFAULT_ENV),
    TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 (the spec's workload.env) in every run."""
    for run in load_spec(SPEC).runs():
        env = launch_plan(run).env
        assert {k: env[k] for k in NO_MULTICAST} == NO_MULTICAST


def _slurm_runs():
    raw = load_spec(SPEC).raw
    spec = validate_spec({**raw, "executor": {**raw["executor"], "cluster": "slurm"}}, "slurm")
    return [r for r in spec.runs() if r.repeat <= spec.repeats]  # the first look's runs


def test_slurm_form_is_one_srun_task_per_gpu():
    for tp, run in _shapes(_slurm_runs()).items():
        plan = launch_plan(run)
        assert plan.srun and (plan.nodes, plan.gpus_per_node, plan.tasks_per_node) == (1, 2, 2)
        assert plan.srun_args == ["--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--kill-on-bad-exit=1"]
        assert plan.argv[:2] == ["python", str(SOURCE_ROOT / megatron.ENTRY_RELPATH)]  # no torchrun
        assert not tees_rank_files(plan)
        assert job_argv(plan, {})[:5] == ["srun", *plan.srun_args]
        assert megatron.slurm_parameters(run) == {"nodes": 1, "tasks_per_node": 2, "gpus_per_node": 2,
                                                  "slurm_use_srun": False, "timeout_min": 5}


def test_slurm_golden_command_lines():
    """tests/golden/megatron-tiny-2gpu.slurm.txt: the spec with executor.cluster = slurm (no container image)."""
    lines = ["# megatron-tiny-2gpu with executor.cluster: slurm: one run per line, run_id then the exact command "
             "({REPO} = repository root)"]
    for run in _slurm_runs():
        lines.append(f"{run.run_id}\n  {launch_plan(run).shell().replace(str(SOURCE_ROOT), '{REPO}')}")
    text = "\n".join(lines) + "\n"
    if os.environ.get("GRAPHSWEEP_UPDATE_GOLDEN"):
        GOLDEN_SLURM.write_text(text)
    assert text == GOLDEN_SLURM.read_text()


def test_tees_rank_files_only_for_a_local_torchrun_without_its_own_log_dir():
    one = launch_plan(load_spec(ROOT / "configs/examples/megatron-tiny-vanilla-gpt.yaml").runs()[0])
    assert TORCHRUN_TEE not in one.argv and not tees_rank_files(one)  # one GPU: the command is unchanged
    two = launch_plan(_shapes(load_spec(SPEC).runs())[2])
    given = megatron.launch_plan(_shapes(load_spec(SPEC).runs())[2], rank_log_dir="/scratch/r1")
    assert "--log-dir=/scratch/r1" in given.argv and not tees_rank_files(given)
    # a `--tee=3` among the training script's own arguments is not torchrun's
    late = dataclasses.replace(two, argv=[a for a in two.argv if a != TORCHRUN_TEE] + [TORCHRUN_TEE])
    assert tees_rank_files(two) and not tees_rank_files(late)


# --------------------------------------------------------------------------------------------------
# The run folder of a two-rank local run
def _replay_folder(tmp_path: Path, sources: Path, run_id: str = "tp1.attn.r1") -> tuple[Path, dict]:
    """runs/{run_id}/ as the run rule leaves it: config.yaml (the planned DP 2 TE attn run, its launcher kept and
    the entry swapped for the replay), then execute_run -> submitit local -> job_main -> torchrun -> replay."""
    planned = next(p for p in plan_sweep(load_spec(SPEC))
                   if p.run.variant.name == "attn" and p.run.settings["model.tensor_model_parallel_size"] == 1)
    launcher = planned.launch.argv[: planned.launch.argv.index(str(SOURCE_ROOT / megatron.ENTRY_RELPATH))]
    assert launcher[1:] == ["-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc-per-node=2",
                            TORCHRUN_TEE]
    plan = dataclasses.replace(planned.launch, argv=[sys.executable, *launcher[1:], str(REPLAY), str(sources)])
    cfg = planned.config()
    cfg["launch"] = {**plan.to_dict(), "shell": plan.shell()}
    cfg["run"]["run_id"] = run_id
    run_dir = tmp_path / "results" / "megatron-tiny-2gpu" / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    record = execute_run(RunDir(run_dir), tmp_path / "results" / "megatron-tiny-2gpu" / ".jobs" / run_id,
                         say=lambda _: None)
    return run_dir, record


def _rank_files(run_dir: Path) -> dict[tuple[int, str], Path]:
    """torch.distributed.elastic's layout: ranks/<rdzv run id>_<random>/attempt_0/<local rank>/{stdout,stderr}.log"""
    found = sorted((run_dir / RANKS_DIR).glob("*/attempt_*/*/*.log"))
    assert len({f.parents[2] for f in found}) == 1 and {f.parent.parent.name for f in found} == {"attempt_0"}
    return {(int(f.parent.name), f.stem): f for f in found}


def _parse(run_dir: Path):
    summary = parse_run_dir(RunDir(run_dir))
    return summary, pd.read_parquet(run_dir / "iterations.parquet")


@pytest.fixture(scope="module")
def completed(tmp_path_factory):
    return _replay_folder(tmp_path_factory.mktemp("completed"), B_RANKS)


@pytest.fixture(scope="module")
def oom_rank1(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("oom")
    return _replay_folder(tmp / "run", _oom_on_rank1(tmp / "src"), run_id="tp1.attn.oom")


@pytest.mark.torch  # torchrun of two ranks (real, on the CPU)
def test_completed_two_rank_run_folder(completed):
    run_dir, record = completed
    assert record.exit_code == 0
    files = _rank_files(run_dir)
    assert set(files) == {(r, s) for r in (0, 1) for s in ("stdout", "stderr")}
    for (rank, stream), f in files.items():  # torchrun's files hold exactly what each rank printed
        assert f.read_text() == (B_RANKS / f"rank{rank}" / f"{stream}.log").read_text()
    log = (run_dir / "log.txt").read_text().splitlines()
    prefixed = [line for line in log if line.startswith(("[default0]:", "[default1]:"))]
    assert len(prefixed) == sum(len(f.read_text().splitlines()) for f in files.values())
    assert RunDir(run_dir).logs() == [files[0, "stdout"], files[0, "stderr"], files[1, "stdout"], files[1, "stderr"],
                                     run_dir / "log.txt"]

    s, rows = _parse(run_dir)
    assert set(s.files) == {str(f) for f in RunDir(run_dir).logs()}  # every rank's files and log.txt
    assert (s.outcome, s.n_iterations, s.last_iteration) == ("completed", 30, 30)
    assert rows.iteration.tolist() == list(range(1, 31))  # read twice (rank 1's file, log.txt), counted once
    # the iteration lines are the last rank's: rank 1 (Megatron print_rank_last); none in rank 0's files
    assert not any(ITERATION.search(line) for f in (files[0, "stdout"], files[0, "stderr"])
                   for line in f.read_text().splitlines())
    for src, n in zip(rows.source_file, rows.line):
        line = Path(src).read_text().splitlines()[n - 1]
        assert ITERATION.search(line) and (line.startswith("[default1]:") or src == str(files[1, "stdout"]))
    # the same verdict and steady window as the recorded --tee log of run b alone
    tee = parse_run([LOGS / "megatron-h200x2/b_te_attn_dp2_tee.log"], arm="graph", warmup=3).summary
    assert (s.steady_first, s.steady_last, s.step_ms_median) == (tee.steady_first, tee.steady_last, tee.step_ms_median)
    assert s.step_ms_median == pytest.approx(31.70, rel=0.02)
    assert s.capture_seen and s.replay_seen and s.capture_iteration == 4 and s.graphable_layers == 8
    assert s.peak_mem_before_capture_gb == tee.peak_mem_before_capture_gb  # rank 0's memory lines, once
    assert rows.tflops.notna().all()  # Step Time TFLOP/s: rank 0's lines, joined to rank 1's iterations


@pytest.mark.torch  # torchrun of two ranks (real, on the CPU)
def test_a_rerun_replaces_the_earlier_attempts_rank_files(oom_rank1, tmp_path):
    """A retried run (Snakemake --retries, the transient retry) runs in the same run folder: ranks/ then holds the
    new job's files only, never two attempts mixed. Here: the failed run's folder, run again with the recorded
    completed ranks."""
    src, _ = oom_rank1
    run_dir = tmp_path / "results" / "megatron-tiny-2gpu" / "retried" / src.name  # a run folder is named for its run
    shutil.copytree(src, run_dir)
    old = next((run_dir / RANKS_DIR).iterdir()).name
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    cfg["launch"]["argv"][-1] = str(B_RANKS)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    record = execute_run(RunDir(run_dir), run_dir.parents[1] / ".jobs" / "tp1.attn.oom", say=lambda _: None)
    files = _rank_files(run_dir)  # one torchrun run folder
    assert record.exit_code == 0 and files[0, "stdout"].parents[2].name != old
    s, rows = _parse(run_dir)
    assert (s.outcome, s.n_iterations) == ("completed", 30) and rows.iteration.tolist() == list(range(1, 31))


def _oom_on_rank1(dest: Path) -> Path:
    """Constructed from real logs: run b's per-rank files (recorded) cut after iteration 20, then rank 1 fails with
    Bridge's OOM report and its traceback as megatron-h200/oom.log L370-571 printed it on one H200 (rank 0 / GPU 0
    there, rank 1 / GPU 1 here; nothing else changed), exit code 1; rank 0 stops after its 20th `Step Time` line and
    waits (blocked in the next collective) until torchrun stops it."""
    oom = (LOGS / "megatron-h200/oom.log").read_text().splitlines(keepends=True)[369:571]
    assert oom[0].startswith("ERROR:megatron.bridge.training.pretrain:Pretrain failed on rank=0 with OutOfMemoryError")
    assert oom[-1].startswith("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 11.00 GiB.")
    rank1 = [line.replace("rank=0", "rank=1").replace("GPU 0 ", "GPU 1 ").replace("[rank0]:", "[rank1]:")
             for line in oom]
    out1 = (B_RANKS / "rank1/stdout.log").read_text().splitlines(keepends=True)
    out1 = out1[: next(i for i, line in enumerate(out1) if ITERATION.search(line) and " 20/" in line) + 1]
    out0 = (B_RANKS / "rank0/stdout.log").read_text().splitlines(keepends=True)
    out0 = out0[: [i for i, line in enumerate(out0) if line.startswith("Step Time :")][19] + 1]
    for rank, stdout, end, tail in ((0, out0, "hang", []), (1, out1, "1", rank1)):
        d = dest / f"rank{rank}"
        d.mkdir(parents=True)
        (d / "stderr.log").write_text((B_RANKS / f"rank{rank}/stderr.log").read_text())
        (d / "stdout.log").write_text("".join(stdout))
        (d / "stderr-end.log").write_text("".join(tail))
        (d / "end").write_text(end)
    return dest


@pytest.mark.torch  # torchrun of two ranks (real, on the CPU)
def test_an_error_printed_only_on_rank_1_is_found(oom_rank1):
    run_dir, record = oom_rank1
    assert record.exit_code == 1
    files = _rank_files(run_dir)
    assert "Pretrain failed on rank=1" in files[1, "stderr"].read_text()
    assert "Pretrain failed" not in files[0, "stderr"].read_text() + files[0, "stdout"].read_text()
    log = (run_dir / "log.txt").read_text()
    assert "ChildFailedError" in log and "[default1]:ERROR:megatron.bridge.training.pretrain:Pretrain failed" in log

    s, rows = _parse(run_dir)
    assert set(s.files) == {str(f) for f in RunDir(run_dir).logs()}
    assert (s.outcome, s.error_class, s.phase, s.failed_iteration) == ("oom", "oom", "steady", 21)
    assert s.oom_request == "11.00 GiB" and "Pretrain failed on rank=1 with OutOfMemoryError" in s.signature
    assert rows.iteration.tolist() == list(range(1, 21))  # each iteration once, though read from two files
    # the proving line is rank 1's own file (read before log.txt), at the line it has there
    assert s.signature_file == str(files[1, "stderr"])
    assert files[1, "stderr"].read_text().splitlines()[s.signature_line - 1].startswith(
        "ERROR:megatron.bridge.training.pretrain:Pretrain failed on rank=1 with OutOfMemoryError")


@pytest.mark.torch  # torchrun of two ranks (real, on the CPU)
def test_a_rank_error_that_never_reached_log_txt_is_found(oom_rank1, tmp_path):
    """torchrun copies each rank's file to the console every 0.1 s (torch 2.13 tail_log.py tail_logfile, interval_sec):
    when the launcher itself dies (killed at the time limit, the host's OOM killer), a rank's last lines are only
    in its file. Constructed: the run folder above with log.txt cut before rank 1's error, as a SIGKILLed
    launcher leaves it (run.json exit code 137)."""
    src, _ = oom_rank1
    run_dir = tmp_path / "runs" / "cut"
    shutil.copytree(src, run_dir)
    log = (run_dir / "log.txt").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(log) if line.startswith("[default1]:ERROR:megatron.bridge"))
    (run_dir / "log.txt").write_text("".join(log[:cut]))
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "exit_code": 137}))
    s, rows = _parse(run_dir)
    assert (s.outcome, s.phase, s.failed_iteration, s.oom_request) == ("oom", "steady", 21, "11.00 GiB")
    assert "/attempt_0/1/stderr.log" in s.signature_file
    assert rows.iteration.tolist() == list(range(1, 21))


def test_lines_of_two_ranks_glued_in_the_tee_log(tmp_path):
    """torchrun's console copy is whole lines only when a rank writes whole lines: tail_logfile (torch 2.13
    tail_log.py L40-46) writes `[defaultN]:` + whatever readline() returned, a partial line at the end of the file
    included. Megatron prints the iteration line and its newline in two writes (PYTHONUNBUFFERED=1, as in
    a_eager_dp2.log L470-471, where rank 0's `Deleting CUDA graphs` landed between them), so the tee log can read
    `[default1]: ... iteration 30 ... |[default0]:<rank 0's next line>` then `[default1]:`. Constructed from the
    recorded b_te_attn_dp2_tee.log: its iteration-30 line (L475) and rank 0's next line, the end-of-training marker
    (L476), glued that way."""
    lines = (LOGS / "megatron-h200x2/b_te_attn_dp2_tee.log").read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("[default1]:") and " 30/" in line)
    j = next(i for i in range(k + 1, len(lines)) if lines[i].startswith("[default0]:"))
    assert (k, j) == (474, 475) and lines[j].startswith("[default0]:[after training is done]")
    glued = lines[:k] + [lines[k] + lines[j], "[default1]:"] + lines[k + 1: j] + lines[j + 1:]
    (tmp_path / "glued.log").write_text("\n".join(glued) + "\n")
    got = parse_run([tmp_path / "glued.log"], arm="graph", warmup=3)
    whole = parse_run([LOGS / "megatron-h200x2/b_te_attn_dp2_tee.log"], arm="graph", warmup=3)
    cols = ["iteration", "elapsed_ms", "loss", "grad_norm", "tflops"]
    pd.testing.assert_frame_equal(got.iterations[cols], whole.iterations[cols])
    assert got.summary.outcome == "completed" and got.summary.step_ms_median == whole.summary.step_ms_median
    assert got.iterations.line.iloc[-1] == k + 1 == got.summary.signature_line  # both on the glued line
    assert "[after training is done]" in got.summary.signature
