"""Provenance is collected inside the real job, lands in runs.parquet, and keeps arms from different environments
from being compared."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from graphsweep import logformat as lf
from graphsweep import harness, provenance
from graphsweep.store.aggregate import aggregate
from graphsweep.store.tables import write_table
from graphsweep.judge.compare import compare
from graphsweep.plan.planner import plan_sweep, write_plan, write_run_config
from graphsweep.parse.run import parse_run
from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.sweepspec.load import load_spec
from graphsweep.entry.job import job_main
from graphsweep.run.runrule import execute_run
from graphsweep.layout import RunDir
from tests.support import ROOT

PROBE = ROOT / "tests" / "fixtures" / "logs" / "h200-probe"
GRAPH_ENV = {"NCCL_GRAPH_REGISTER": "0", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def test_a_real_job_records_what_produced_it(tmp_path):
    """Through the run rule's own path: config.yaml -> submitit (local) -> job_main -> run.json."""
    cfg = {
        "run": {"run_id": "r1"},
        "launch": {"argv": [sys.executable, "-c", "print('training')"],
                   "env": {**GRAPH_ENV, "GRAPHSWEEP_CONTAINER_IMAGE": "nvcr.io/nvidia/nemo:25.09", "MY_TOKEN": "s3cret"}},
        "executor": {"cluster": "local", "timeout_min": 5},
    }  # fmt: skip
    run = RunDir(tmp_path / "r1")
    run.root.mkdir()
    run.config.write_text(yaml.safe_dump(cfg))
    record = execute_run(run, tmp_path / "jobs", say=lambda _: None)
    prov = json.loads(run.run_json.read_text())["provenance"]
    assert record.exit_code == 0 and "error" not in prov
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if head:
        assert prov["graphsweep"]["git_sha"] == head and isinstance(prov["graphsweep"]["git_dirty"], bool)
    else:  # a source archive (`git archive`), no .git: no SHA to record, none made up
        assert "git_sha" not in prov["graphsweep"] and "git_dirty" not in prov["graphsweep"]
    assert prov["graphsweep"]["harness"] == harness.harness_sha()  # the measuring harness the job ran
    assert prov["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert prov["versions"]["torch"] == md.version("torch")
    assert prov["container"] == {"image": "nvcr.io/nvidia/nemo:25.09", "source": "GRAPHSWEEP_CONTAINER_IMAGE"}
    assert prov["env"]["NCCL_GRAPH_REGISTER"] == "0" and "MY_TOKEN" not in prov["env"]
    assert prov["nodes"] == prov["host"]  # no Slurm: the job's own host
    flat = provenance.flatten(prov)
    assert flat["prov_container"] == "nvcr.io/nvidia/nemo:25.09" and flat["prov_torch"] == md.version("torch")
    assert json.loads(flat["prov_env"]) == {**GRAPH_ENV}


def test_collect_does_not_raise_without_git_or_nvidia_smi(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    prov = provenance.collect({"SLURM_JOB_ID": "42", "SLURM_JOB_PARTITION": "h200", "SLURM_JOB_NODELIST": "gpu[01-02]"})
    assert prov["gpu"] == {} and "git_sha" not in prov["graphsweep"]
    assert prov["slurm"] == {"job_id": "42", "partition": "h200", "nodelist": "gpu[01-02]"}
    assert prov["nodes"] == "gpu[01-02]"


def test_training_side_line_wins_for_versions(tmp_path):
    """The job runs outside the container on Slurm; the line the training prints inside it has the real versions.
    The parser keeps it (summary.json provenance_lines): once, though log.txt and a rank's file both print it."""
    line = provenance.log_line({"GRAPHSWEEP_CONTAINER_IMAGE": "nemo:25.11", **GRAPH_ENV})
    log, rank = tmp_path / "log.txt", tmp_path / "rank0.log"
    log.write_text("setup\n[default0]:" + line + "\n iteration        1/      30 | ...\n")
    rank.write_text(line + "\n")
    found = parse_run([rank, log]).summary.provenance_lines
    assert found == [json.loads(line.removeprefix(lf.PROVENANCE))]
    merged = provenance.merge({"versions": {"torch": "controller-torch", "python": "3.11.0"}, "container": {}}, found)
    assert merged["versions"]["torch"] == md.version("torch")
    assert merged["container"]["image"] == "nemo:25.11"


def _row(**prov):
    return {"provenance": json.dumps(prov)}


def test_differences_name_the_field_and_both_values():
    e = [_row(container={"image": "nemo:25.09"}, gpu={"name": "NVIDIA H200"})] * 2
    g = [_row(container={"image": "nemo:25.11"}, gpu={"name": "NVIDIA H200"})]
    diffs = provenance.differences(e, g)
    assert [d.field for d in diffs] == ["prov_container"]
    assert diffs[0].describe() == "container: eager nemo:25.09 vs graph nemo:25.11"
    # unknown is not a difference (an ingested log without provenance next to a recorded run)
    assert provenance.differences(e, [_row(gpu={"name": "NVIDIA H200"})]) == []
    # drift inside one arm is named as such
    mixed = [_row(gpu={"driver": "580.1"}), _row(gpu={"driver": "575.2"})]
    assert provenance.differences(mixed, [_row(gpu={"driver": "580.1"})])[0].describe() == \
        "driver differs between eager runs (575.2, 580.1)"
    env = provenance.differences([_row(env={"NCCL_GRAPH_REGISTER": "1"})], [_row(env={"NCCL_GRAPH_REGISTER": "0"})])
    assert "NCCL_GRAPH_REGISTER: eager 1 vs graph 0" in env[0].describe()


def test_te_versions_across_2_19_are_never_compared_silently():
    # TE >= 2.19 clones parameter gradients on return from graphed callables (TE PR #2937, TE 2.20.2 graph.py L165)
    old, new = _row(versions={"transformer_engine": "2.18.0"}), _row(versions={"transformer_engine": "2.20.2"})
    (d,) = provenance.differences([old], [new])
    assert d.field == "prov_te" and "eager 2.18.0 vs graph 2.20.2" in d.describe()
    assert "clone_param_grads_on_return" in d.describe() and "not comparable" in provenance.not_comparable_reason([d])
    # two TE releases on one side of 2.19 still differ (every TE version is compared), without the 2.19 note
    (same_side,) = provenance.differences([_row(versions={"transformer_engine": "2.19.0"})], [new])
    assert "clone_param_grads_on_return" not in same_side.describe()
    # the comparability key separates them too (archives and catalogs of several sweeps)
    assert provenance.flatten(json.loads(old["provenance"]))["prov_key"] != \
        provenance.flatten(json.loads(new["provenance"]))["prov_key"]


def test_cell_with_arms_from_two_containers_is_not_compared(tmp_path):
    """Real jobs (job_main) replay real H200 logs; one shape's graph runs come from another container."""
    spec_path = tmp_path / "sweep.yaml"
    spec_path.write_text(yaml.safe_dump({
        "sweep": "prov", "workload": {"kind": "megatron_bridge", "recipe": "vanilla_gpt_pretrain_config"},
        "axes": {"model.seq_length": [1024, 2048]}, "variants": [{"name": "graph", "impl": "full_iteration"}],
        "repeats": 2, "warmup": 3, "iterations": 26, "preflight": "none", "decide": {"enabled": False},
    }))  # fmt: skip
    spec = load_spec(spec_path)
    out = tmp_path / "results" / "prov"
    planned = plan_sweep(spec, cluster="slurm")  # where the logs ran: this machine's local executor has no CUDA device
    write_plan(spec, planned, out / "plan.parquet")
    run_dirs = []
    for p in planned:
        run = p.run
        image = "nemo:25.11" if run.arm == "graph" and run.shape["model.seq_length"] == 2048 else "nemo:25.09"
        log = PROBE / f"medium-{run.arm}-{run.repeat}.log"
        d = RunDir(out / "runs" / run.run_id)
        write_run_config(p, d)
        facts = job_main(["cat", str(log)], {"GRAPHSWEEP_CONTAINER_IMAGE": image}, str(d.log))
        d.run_json.write_text(json.dumps({"run_id": run.run_id, "executor": "local", "state": "COMPLETED",
                                          "attempt": 1, **facts}))  # fmt: skip
        parse_run_dir(d)
        run_dirs.append(d)
    aggregate(out / "plan.parquet", run_dirs, out / "runs.parquet", out / "iterations.parquet")
    runs = pd.read_parquet(out / "runs.parquet")
    assert set(runs.prov_container) == {"nemo:25.09", "nemo:25.11"}
    assert runs.prov_key.nunique() == 2
    cmp = compare(out / "plan.parquet", out / "runs.parquet", out / "iterations.parquet", out / "comparison.parquet")
    by_len = {int(r["model.seq_length"]): r for _, r in cmp.iterrows()}
    same, other = by_len[1024], by_len[2048]
    # the probe's graph really is faster (unverified: probe.py logs state no seed, so parity is not checked)
    assert same.verdict in ("speedup", "inconclusive", "unverified") and same.speedup > 1
    assert other.verdict == "not-comparable"
    assert "container: eager nemo:25.09 vs graph nemo:25.11" in other.reason
    assert pd.isna(other.speedup) and pd.isna(other.ci_low) and list(other.not_comparable_fields) == ["prov_container"]
    written = pd.read_parquet(out / "comparison.parquet")
    assert set(written.verdict) == {same.verdict, "not-comparable"}


def test_gpu_facts_respect_cuda_visible_devices(tmp_path, monkeypatch):
    """nvidia-smi is absent on this machine: a stand-in prints two rows in the format of
    `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` (driver of the fixtures' H200 runs)."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\n"
                    "echo '0, NVIDIA H200, 580.159.04, 1980, 3201, 1980, [N/A], 143771, GPU-aaaa'\n"
                    "echo '1, NVIDIA H200, 580.159.04, 345, 3201, 1980, [N/A], 143771, GPU-bbbb'\n")  # fmt: skip
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    both = provenance.gpu_info({})
    assert both["count"] == 2 and both["name"] == "NVIDIA H200" and both["driver"] == "580.159.04"
    assert both["app_sm_clock_mhz"] is None and both["sm_clock_mhz"] == "1980;345"
    one = provenance.gpu_info({"CUDA_VISIBLE_DEVICES": "GPU-bbbb"})
    assert one["count"] == 1 and one["uuids"] == ["GPU-bbbb"] and one["sm_clock_mhz"] == "345"


# The first line of the error every Megatron run on the H200 raised on 2026-12-01 when provenance asked torch for
# its cuDNN version (TE had loaded another cuDNN): shared logs under tests/fixtures/logs/megatron-h200/.
CUDNN_MISMATCH = ("cuDNN version incompatibility: PyTorch was compiled  against (9, 19, 0) but found runtime version "
                  "(9, 14, 0). PyTorch already comes bundled with cuDNN.")


def test_training_line_survives_a_cudnn_that_torch_refuses(monkeypatch):
    torch = pytest.importorskip("torch")

    def refuse() -> int:
        raise RuntimeError(CUDNN_MISMATCH)

    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", refuse)
    line = provenance.log_line({})
    facts = json.loads(line.removeprefix(lf.PROVENANCE))
    assert facts["versions"]["torch"] == torch.__version__
    assert any("cuDNN version incompatibility" in e for e in facts["errors"])


def test_entry_never_lets_provenance_stop_the_training(monkeypatch, capsys):
    from graphsweep.entry import megatron_entry

    def broken(**_: object) -> str:
        raise RuntimeError(CUDNN_MISMATCH)

    monkeypatch.setattr(provenance, "log_line", broken)
    megatron_entry.print_provenance(rank=0)
    assert capsys.readouterr().out.startswith("[graphsweep] provenance failed: RuntimeError: cuDNN version")


MEGATRON_PYTHON = os.environ.get("GRAPHSWEEP_MEGATRON_PYTHON")


@pytest.mark.megatron
@pytest.mark.skipif(not MEGATRON_PYTHON, reason="GRAPHSWEEP_MEGATRON_PYTHON is not set (build: tools/megatron-venv.sh)")
def test_container_like_split_records_the_training_processs_stack(tmp_path):
    """The wrapper and the training in two environments, as under Slurm with a container: the job wrapper runs in
    the controller's venv (Python 3.11, its torch), the Megatron entry in the Bridge venv (Python 3.12, torch, TE,
    Core, Bridge). runs.parquet must carry what the training process saw, not the wrapper's packages."""
    out = tmp_path / "results" / "split"
    run_dir = out / "runs" / "r1"
    run_dir.mkdir(parents=True)
    entry = ROOT / "graphsweep" / "entry" / "megatron_entry.py"
    cfg = {
        "run": {"run_id": "r1", "cell_id": "c", "shape_id": "s", "arm": "eager", "variant": "eager", "warmup": 3},
        "launch": {"argv": [MEGATRON_PYTHON, str(entry), "--recipe", "vanilla_gpt_pretrain_config",
                            "train.train_iters=4", "model.cuda_graph_impl=none"],
                   "env": {"GRAPHSWEEP_CONTAINER_IMAGE": "bridge-venv", "CUDA_VISIBLE_DEVICES": ""}},
        "executor": {"cluster": "local", "timeout_min": 5},
    }  # fmt: skip
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    execute_run(RunDir(run_dir), out / ".jobs", say=lambda _: None)
    wrapper = json.loads((run_dir / "run.json").read_text())["provenance"]
    assert wrapper["versions"]["python"].startswith("3.11") and wrapper["versions"]["torch"] == md.version("torch")
    log = (run_dir / "log.txt").read_text()
    assert lf.PROVENANCE in log  # printed by the entry before training (which then fails: no GPU here)
    training = {k: subprocess.run([MEGATRON_PYTHON, "-c", f"import importlib.metadata as m; print(m.version('{d}'))"],
                                  capture_output=True, text=True, check=True).stdout.strip()
                for k, d in (("torch", "torch"), ("te", "transformer-engine"), ("mcore", "megatron-core"),
                             ("bridge", "megatron-bridge"))}  # fmt: skip
    parse_run_dir(RunDir(run_dir))
    plan = pd.DataFrame([{**cfg["run"], "sweep": "split", "impl": "none", "scope": "", "repeat": 1, "iterations": 1,
                          "gpus": 1, "workload": "megatron_bridge", "status": "submit"}])  # fmt: skip
    write_table(plan, out / "plan.parquet", "plan")
    aggregate(out / "plan.parquet", [RunDir(run_dir)], out / "runs.parquet", out / "iterations.parquet")
    row = pd.read_parquet(out / "runs.parquet").iloc[0]
    assert row.prov_python.startswith("3.12") and row.prov_torch.split("+")[0] == training["torch"]
    assert row.prov_torch != wrapper["versions"]["torch"]
    assert (row.prov_te, row.prov_mcore, row.prov_bridge) == (training["te"], training["mcore"], training["bridge"])
    assert row.prov_container == "bridge-venv"
    # the recipe's env_vars (Bridge COMMON_RECIPE_ENV_VARS) are applied before the line: the environment it trains in
    assert json.loads(row.prov_env)["TORCH_NCCL_AVOID_RECORD_STREAMS"] == "1"


def test_runs_from_two_commits_with_one_harness_are_compared_and_a_changed_harness_is_named(tmp_path):
    """A loop continued after a commit elsewhere in the checkout (a spec edited there makes it dirty too) compares its
    new runs with the old ones; a changed entry point or log format does not; runs recorded before the digest
    existed are compared by commit, as they were."""
    def run(sha, dirty, harness=None):
        g = {"version": "0.1.0", "git_sha": sha, "git_dirty": dirty, **({"harness": harness} if harness else {})}
        return _row(graphsweep=g, gpu={"name": "NVIDIA H200"})
    assert provenance.differences([run("aaa", False, "h1")] * 2, [run("bbb", True, "h1")]) == []
    diffs = provenance.differences([run("aaa", False, "h1")], [run("aaa", False, "h2")])
    assert [d.field for d in diffs] == ["prov_graphsweep_harness"]
    assert diffs[0].describe() == "graphsweep's measuring harness: eager h1 vs graph h2"
    old = provenance.differences([run("aaa", False)], [run("bbb", False, "h1")])  # one run without the digest
    assert [d.field for d in old] == ["prov_graphsweep_sha"]
    # the digest covers the harness's files and nothing else: a changed entry point changes it, a planner does not
    pkg = tmp_path / "graphsweep"
    (pkg / "entry").mkdir(parents=True)
    (pkg / "plan").mkdir()
    for rel, text in (("entry/abba.py", "A = 1\n"), ("logformat.py", "L = 1\n"), ("plan/planner.py", "P = 1\n")):
        (pkg / rel).write_text(text)
    first = harness.harness_sha(pkg)
    (pkg / "plan" / "planner.py").write_text("P = 2\n")
    assert harness.harness_sha(pkg) == first
    (pkg / "entry" / "abba.py").write_text("A = 2\n")
    assert harness.harness_sha(pkg) != first
