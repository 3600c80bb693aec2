"""Issue 38 items 2 and 5 and issue 40's round-3 inputs, in process through the real `graphsweep` CLI: a spec cannot
steer Slurm (the job's size, time, files and shell lines are the plan's and the profile's), a Megatron spec that
Megatron would divide by zero with, or that no executor can place, is one line and not a traceback, every number of a
spec is in range with the range in its line, a launch gate on ingested logs is refused, and a spec that is not a
regular file is refused before it is read.

Every bad spec: one line naming the file, key and value, exit status 2, nothing written. The same specs through the
real `snakemake --profile slurm` on the local cluster: tests/slurm/test_slurm_settings.py.
"""

from __future__ import annotations

import os
import threading

import pytest
import yaml

from graphsweep import smk, textsafe
from graphsweep.records import LaunchPlan, SpecError
from graphsweep.run.sbatch import merged_slurm, slurm_parameters
from graphsweep.sweepspec.load import load_spec
from tests.support import ROOT, one_line, run_cli
from tests.support import spec_with as _spec

BASE = yaml.safe_load((ROOT / "configs" / "sweep.yaml").read_text())
MEGATRON = yaml.safe_load((ROOT / "configs" / "examples" / "megatron-tiny-vanilla-gpt.yaml").read_text())

LOGS = ROOT / "tests" / "fixtures" / "logs" / "megatron-h200"
SLURM = {"executor/cluster": "slurm"}

STEERING = {
    # the cases: a spec that sized, timed or moved its Slurm jobs, or ran shell code, passed check-spec
    "sbatch nodes, time, GPUs": (_spec(BASE, **SLURM, **{"executor/slurm/sbatch": {
        "nodes": 64, "time": "9-00:00:00", "gpus-per-node": 8, "ntasks-per-node": 8}}),
        ["executor.slurm.sbatch.nodes", "= 64", "the job's size comes from each run's launch plan"]),
    "sbatch output": (_spec(BASE, **SLURM, **{"executor/slurm/sbatch": {"output": "/tmp/OUT"}}),
                      ["executor.slurm.sbatch.output", "'/tmp/OUT'", "inside the results folder"]),
    "sbatch error": (_spec(BASE, **SLURM, **{"executor/slurm/sbatch": {"error": "/tmp/OUT"}}),
                     ["executor.slurm.sbatch.error"]),
    "sbatch chdir": (_spec(BASE, **SLURM, **{"executor/slurm/sbatch": {"chdir": "/"}}),
                     ["executor.slurm.sbatch.chdir", "= '/'"]),
    "sbatch time spelled with _": (_spec(BASE, **SLURM, **{"executor/slurm/sbatch": {"time_min": "1"}}),
                                   ["executor.slurm.sbatch.time_min", "executor.timeout_min x attempt"]),
    "sbatch abbreviated --output": (_spec(BASE, **SLURM, **{"executor/slurm/sbatch": {"outp": "/tmp/OUT"}}),
                                    ["executor.slurm.sbatch.outp", "it begins --output"]),
    "submitit's spelling of output": (_spec(BASE, **SLURM, **{"executor/slurm/slurm_additional_parameters": {
        "output": "/tmp/OUT"}}), ["executor.slurm.slurm_additional_parameters.output"]),
    "an option a spec may not set": (_spec(BASE, **SLURM, **{"executor/slurm/sbatch": {"gres": "gpu:8"}}),
                                     ["executor.slurm.sbatch.gres", "not an sbatch option a sweep spec may set",
                                      "reservation"]),
    "slurm_python shell code": (_spec(BASE, **SLURM, **{"executor/slurm/slurm_python": "python3; touch PWNED; python3"}),
                                ["executor.slurm.slurm_python", "'python3; touch PWNED; python3'", "shell code"]),
    "slurm_time": (_spec(BASE, **SLURM, **{"executor/slurm/slurm_time": 99999}),
                   ["executor.slurm.slurm_time", "the job's size or time"]),
    "nodes in the Slurm block": (_spec(BASE, **SLURM, **{"executor/slurm/nodes": 64}), ["executor.slurm.nodes"]),
    "gres in the Slurm block": (_spec(BASE, **SLURM, **{"executor/slurm/gres": "gpu:8"}), ["executor.slurm.gres"]),
    "the repository on the nodes": (_spec(MEGATRON, **SLURM, **{"executor/slurm/graphsweep_dir": "/tmp/evil"}),
                                    ["executor.slurm.graphsweep_dir", "the Slurm profile's setting"]),
    "srun arguments": (_spec(MEGATRON, **SLURM, **{"executor/slurm/srun_args": ["--output=/tmp/OUT"]}),
                       ["executor.slurm.srun_args", "the Slurm profile's setting"]),
    "the sacct cache": (_spec(BASE, **SLURM, **{"executor/slurm/state_dir": "/tmp/elsewhere"}),
                        ["executor.slurm.state_dir"]),
    "an option of the entry": (_spec(MEGATRON, **{"workload/overrides/--config-file": "/etc/passwd"}),
                               ["workload.overrides.--config-file", "not a Megatron Bridge config path"]),
    "an option on an axis": (_spec(MEGATRON, **{"axes/--help": [1]}), ["axes.--help", "config path"]),
    "an option in a variant": (_spec(MEGATRON, variants=[{"name": "f", "impl": "local", "scope": ["full_iteration"],
                                                          "overrides": {"-c x": 1}}]),
                               ["variants.0.overrides.-c x", "config path"]),
}  # fmt: skip

MEGATRON_COUNTS = {
    # tracebacks (MegatronSpecError, ZeroDivisionError) or a job that would die on its GPUs after the queue
    "16 GPUs on the local executor": (_spec(MEGATRON, **{"fixed/gpus": 16}),
                                      ["fixed.gpus", "= 16", "needs 2 nodes of 8 GPUs", "executor.cluster: slurm"]),
    "12 GPUs on Slurm": (_spec(MEGATRON, **SLURM, **{"fixed/gpus": 12}), ["fixed.gpus", "does not fill 2 nodes"]),
    "micro batch 0": (_spec(MEGATRON, **{"axes/train.micro_batch_size": [0]}),
                      ["axes.train.micro_batch_size", "= 0", "a whole number, 1 or more"]),
    "tensor parallel 0": (_spec(MEGATRON, **{"fixed/model.tensor_model_parallel_size": 0}),
                          ["fixed.model.tensor_model_parallel_size", "= 0"]),
    "global batch 0": (_spec(MEGATRON, **{"fixed/train.global_batch_size": 0}), ["fixed.train.global_batch_size"]),
    "global batch 0 as text": (_spec(MEGATRON, **{"workload/overrides/train.global_batch_size": "0"}),
                               ["workload.overrides.train.global_batch_size", "'0'"]),
    "heads 2.5": (_spec(MEGATRON, **{"fixed/model.num_attention_heads": 2.5}), ["fixed.model.num_attention_heads"]),
    "no recipe": (_spec(MEGATRON, **{"workload/recipe": ""}), ["workload.recipe", "needs a recipe"]),
}  # fmt: skip

RANGES = {
    # issue 40: accepted without a word before; every number in range, the range in the line
    "max_runs 1e30": (_spec(BASE, max_runs=1.0e30), ["max_runs", "1e+30", "give a whole number from 1 to 100,000"]),
    "timeout 10^15": (_spec(BASE, **{"executor/timeout_min": 10**15}),
                      ["executor.timeout_min", "1000000000000000", "from 1 to 10,080"]),
    "budget 1e30": (_spec(BASE, budget_gpu_hours=1.0e30), ["budget_gpu_hours", "above 0 and at most 10,000,000"]),
    "margin 0.9": (_spec(BASE, margin=0.9), ["margin", "above 0 and at most 0.5"]),
    "gpus_per_node 1000": (_spec(MEGATRON, **{"executor/gpus_per_node": 1000}), ["executor.gpus_per_node", "to 64"]),
    "repeats 0": (_spec(BASE, repeats=0), ["repeats", "from 1 to 100"]),
}  # fmt: skip

CASES = {**STEERING, **MEGATRON_COUNTS, **RANGES}


@pytest.mark.parametrize("command", [["check-spec"], ["plan", "--dry-run"]])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_spec_that_steers_slurm_or_breaks_megatron_is_one_line(tmp_path, capsys, monkeypatch, case, command):
    monkeypatch.chdir(tmp_path)
    spec, needles = CASES[case]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    rc, out, err = run_cli(capsys, *command, path)
    one_line(rc, err, f"{path}: key '", *needles)
    assert out == "" and not (tmp_path / "results").exists() and not (tmp_path / "PWNED").exists()


def test_where_a_spec_may_send_its_jobs_stays_valid(tmp_path, capsys):
    """The placement a spec may give (partition, account, reservation, mail, memory, a container) passes, with
    sbatch's own spellings; the megatron examples still load."""
    spec = _spec(BASE, **SLURM, **{"executor/slurm": {
        "partition": "gpu", "account": "a", "qos": "high", "constraint": "h100", "mem_gb": 0, "exclusive": True,
        "request_gpus": True, "submit_retry_s": 60, "container_image": "nvcr.io/nvidia/nemo:25.11",
        "sbatch": {"reservation": "r", "mail-type": "FAIL", "mail_user": "me@x", "gpu-bind": "closest"},
        "slurm_additional_parameters": {"licenses": "fs:1"}}})  # fmt: skip
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(spec))
    rc, out, err = run_cli(capsys, "check-spec", path)
    assert rc == 0 and err == "", err
    for example in sorted((ROOT / "configs" / "examples").glob("*.yaml")):
        load_spec(example)


def test_what_a_spec_may_give_reaches_sbatch_and_nothing_else(tmp_path):
    """The last look at what is handed to submitit (the spec's lines merged into the profile's): the plan's nodes,
    GPUs and time, and any option the profile gives but a plan one."""
    plan = LaunchPlan(argv=["python"], env={}, gpus=8, nodes=1, gpus_per_node=8)
    spec = load_spec(_write(tmp_path, _spec(BASE, **SLURM, **{"executor/slurm/sbatch": {"reservation": "r"}}))).executor
    merged = merged_slurm({"sbatch": {"switches": "1"}, "request_gpus": True}, spec.slurm)
    params = slurm_parameters(plan, merged, 30, "gs-x")
    assert (params["nodes"], params["gpus_per_node"], params["timeout_min"]) == (1, 8, 30)
    assert params["slurm_additional_parameters"] == {"switches": "1", "reservation": "r"}
    for option in ("nodes", "time", "output", "chdir", "ntasks_per_node", "job-name", "wrap", "nod"):
        with pytest.raises(SpecError, match=f"key 'sbatch.{option.replace('-', '_')}'.*graphsweep sets for every run"):
            slurm_parameters(plan, {"sbatch": {option: "1"}}, 30, "gs-x")


@pytest.mark.parametrize("profile, needles", [
    ({"slurm": {"sbatch": {"time": "9-00:00:00"}}}, ["key 'slurm.sbatch.time'", "executor.timeout_min x attempt"]),
    ({"slurm": {"slurm_additional_parameters": {"output": "/x"}}}, ["key 'slurm.slurm_additional_parameters.output'"]),
    ({"slurm": {"slurm_nodes": 64}}, ["key 'slurm.slurm_nodes' = 64", "launch plan"]),
    ({"slurm": {"slurm_job_name": "x"}}, ["key 'slurm.slurm_job_name'"]),
])  # fmt: skip
def test_the_profile_may_not_set_the_plans_options_either(profile, needles):
    found = smk.unsafe_setting(profile)  # (the key, the one line that names it)
    assert found and all(n in found[1] for n in needles), found


def test_the_profile_keeps_its_own_options():
    assert smk.unsafe_setting({"slurm": {"sbatch": {"gres": "gpu:8", "mpi": "pmix", "reservation": "r"},
                                         "slurm_python": "singularity exec img python", "slurm_setup": ["x"]}}) is None
    # every option a spec may give is the profile's to give too, and none begins an option of the plan
    assert not [o for o in textsafe.SPEC_SBATCH_OPTIONS if textsafe.sbatch_option_problem(o, spec=False)]


def _write(tmp_path, spec: dict):
    path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# --------------------------------------------------------------------------------------------------
# Issue 40: a launch gate on ingested logs; a spec that is no regular file

def test_a_launch_gate_on_ingested_logs_is_refused(tmp_path, capsys):
    spec = {"sweep": "gated", "workload": {"kind": "megatron_bridge", "recipe": "vanilla_gpt_pretrain_config"},
            "source": {"logs": str(LOGS), "pattern": r"(?P<variant>eager|local_full)\.log"},
            "axes": {"train.micro_batch_size": [1]}, "variants": [{"name": "local_full", "impl": "local",
                                                                  "scope": ["full_iteration"]}],
            "repeats": 1, "launch_gate": True}  # fmt: skip
    path = _write(tmp_path, spec)
    for command in (["check-spec"], ["ingest"]):
        rc, out, err = run_cli(capsys, *command, path)
        one_line(rc, err, str(path), "key 'launch_gate' = true", "does not apply to ingested logs")
    spec["launch_gate"] = False
    rc, out, err = run_cli(capsys, "check-spec", _write(tmp_path, spec))
    assert rc == 0, err


@pytest.mark.parametrize("what", ["/dev/zero", "fifo", "folder", "/dev/stdin"])
def test_a_spec_that_is_no_regular_file_is_refused_at_once(tmp_path, capsys, what):
    """/dev/zero never ended (check-spec read it for ever); a named pipe with no writer would block in open()."""
    if what == "fifo":
        path = tmp_path / "spec.yaml"
        os.mkfifo(path)
    elif what == "folder":
        path = tmp_path
    else:
        path = what
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(zip(("rc", "out", "err"), run_cli(capsys, "check-spec",
                                                                                           path))), daemon=True)
    worker.start()
    worker.join(20)  # a hang guard: refused at once, or never
    assert not worker.is_alive(), f"check-spec {path} did not end"
    kind = "a folder" if what == "folder" else "a device, pipe or socket"
    one_line(result["rc"], result["err"], f"{path}: key '(file)'", f"is {kind}, not a regular file")


def test_a_spec_bigger_than_any_spec_is_refused_unread(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    with open(path, "wb") as f:
        f.truncate(64 << 20)  # sparse: 64 MiB of NUL without writing them
    rc, out, err = run_cli(capsys, "check-spec", path)
    one_line(rc, err, str(path), "is more than 16,777,216 bytes")
