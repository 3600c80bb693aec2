"""A sweep that can measure nothing is refused (issue 37 item 2): when preflight leaves no graph cell with both arms,
check-spec exits 2 (after the table of blocked cells, so each cell's rule shows) and the workflow stops before any
job. A machine without a CUDA device is not the spec's fault: runs blocked only for that still count (a cluster runs
them). Through the real CLI and, once, the real Snakemake."""

from __future__ import annotations

import json

import pytest
import yaml

from graphsweep import cli
from graphsweep.plan.planner import measurable_cells, plan_sweep
from graphsweep.sweepspec.load import load_spec
from tests.support import ROOT, copy_workflow, snakemake

LLAMA = yaml.safe_load((ROOT / "configs" / "examples" / "megatron-llama3-8b-dense.yaml").read_text())
BUILTIN = ROOT / "configs" / "sweep.yaml"


def spec_file(tmp_path, **changes) -> str:
    spec = json.loads(json.dumps(LLAMA))
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        spec[section][key.replace("_DOT_", ".")] = value
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def run_cli(capsys, *argv: object) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_tensor_parallel_3_on_8_gpus_is_refused_by_check_spec_after_the_blocked_cells(tmp_path, capsys):
    path = spec_file(tmp_path, fixed__model_DOT_tensor_model_parallel_size=3)
    rc, out, err = run_cli(capsys, "check-spec", path)
    (line,) = err.strip().splitlines()
    assert rc == 2
    assert line.startswith(f"graphsweep: invalid sweep spec: {path}: key 'preflight' = 'rules': no cell can give a "
                           "timed verdict: preflight blocks 48 of 48 runs")
    assert "rule parallel_sizes_divide_gpus on 48 run(s): world_size (8) is not divisible by " \
           "tensor_model_parallel_size (3)" in line
    assert "48 runs (0 to submit, 48 blocked by preflight)" in " ".join(out.split())
    assert "Blocked by preflight" in out  # each cell's rule, before the refusal


def test_json_says_not_ok_and_lists_the_cells(tmp_path, capsys):
    path = spec_file(tmp_path, fixed__model_DOT_tensor_model_parallel_size=3)
    rc, out, _ = run_cli(capsys, "check-spec", "--json", path)
    got = json.loads(out)
    assert rc == 2 and got["ok"] is False and got["key"] == "preflight" and len(got["violations"]) == 16  # 4 shapes x (eager + 3 variants)


@pytest.mark.parametrize("command", [["plan", "--dry-run"], ["plan", "--out", "plan.parquet"]])
def test_plan_refuses_it_too(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    path = spec_file(tmp_path, fixed__model_DOT_tensor_model_parallel_size=3)
    rc, _, err = run_cli(capsys, *command, path)
    assert rc == 2 and "no cell can give a timed verdict" in err and not (tmp_path / "plan.parquet").exists()


def test_graph_arms_all_blocked_while_eager_runs_is_nothing_to_measure_too(tmp_path, capsys):
    # NCCL_GRAPH_REGISTER=1 with expandable segments: MCore refuses it for graphs only, the eager runs would run
    path = spec_file(tmp_path, workload__env={"NCCL_GRAPH_REGISTER": 1})
    planned = plan_sweep(load_spec(path))
    assert [p for p in planned if p.submitted and p.run.arm == "eager"] and measurable_cells(planned) == []
    rc, _, err = run_cli(capsys, "check-spec", path)
    assert rc == 2 and "preflight blocks 36 of 48 runs, which leaves no graph cell with both arms" in err


def test_verify_submits_them_to_see_megatron_refuse_them(tmp_path, capsys):
    path = spec_file(tmp_path, fixed__model_DOT_tensor_model_parallel_size=3)
    spec = yaml.safe_load(open(path))
    spec["verify"] = True
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    assert run_cli(capsys, "check-spec", path)[0] == 0


def test_one_measurable_cell_is_enough(tmp_path, capsys):
    path = spec_file(tmp_path, axes__model_DOT_tensor_model_parallel_size=[1, 3])
    spec = yaml.safe_load(open(path))
    del spec["fixed"]["model.tensor_model_parallel_size"]
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    rc, out, err = run_cli(capsys, "check-spec", path)
    assert rc == 0, err
    assert "96 runs (48 to submit, 48 blocked by preflight)" in " ".join(out.split())


def test_no_cuda_device_here_is_not_the_spec_s_fault(capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # every graph arm blocked for this machine's local executor
    rc, out, err = run_cli(capsys, "check-spec", BUILTIN)
    assert rc == 0, err
    assert "30 runs (6 to submit, 24 blocked by preflight)" in " ".join(out.split())


@pytest.mark.snakemake
def test_the_workflow_stops_before_any_job(tmp_path):
    workdir = copy_workflow(tmp_path)
    path = spec_file(workdir / "configs", fixed__model_DOT_tensor_model_parallel_size=3)
    proc = snakemake(workdir, "--cores", "1", "--config", f"spec={path}", timeout=300)
    ours = [line for line in proc.stderr.splitlines() if line.startswith("graphsweep")]
    assert proc.returncode == 2 and len(ours) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "no cell can give a timed verdict" in ours[0] and not (workdir / "results").exists()
