"""Issue 29 on the real local Slurm cluster, through `snakemake --profile slurm` as a user types it: no spec or
profile text becomes a line of a batch script, the spec's own Slurm settings reach sbatch over the profile's nulls and
defaults, and a refusal that cannot pass stops at once with sbatch's words. sbatch is counted through a wrapper."""

from __future__ import annotations

import copy
import shlex
import subprocess

import pytest

from tests.slurm.slurm_workflow import SMALL_SPEC, calls, make_workdir

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def spec_with_slurm(**slurm) -> dict:
    spec = copy.deepcopy(SMALL_SPEC)
    spec["executor"]["slurm"] = slurm
    return spec


def sacct_fields(job_ids: list[str], fields: str) -> dict[str, list[str]]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", f"JobID,{fields}"],
                         capture_output=True, text=True, check=True, timeout=60).stdout  # fmt: skip
    return {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines() if line}


def one_line_refusal(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("graphsweep: invalid"), proc.stderr[-3000:]
    for needle in needles:
        assert needle in last, (needle, last)
    return last


def test_a_line_break_in_the_specs_slurm_comment_submits_nothing(slurm_cluster, tmp_path):
    marker = tmp_path / "pwned"
    wd = make_workdir(tmp_path / "wd", spec_with_slurm(comment=f"x\ntouch {marker} #"))
    proc = wd.snakemake()
    one_line_refusal(proc, "invalid sweep spec", "executor.slurm.comment", "a newline")
    assert calls(wd.logs["sbatch"]) == [] and not marker.exists()
    assert not (wd.path / "results").exists()


def test_a_line_break_in_the_profiles_partition_submits_nothing(slurm_cluster, tmp_path):
    marker = tmp_path / "pwned"
    wd = make_workdir(tmp_path / "wd", SMALL_SPEC, partition=f"debug\ntouch {marker} #")
    proc = wd.snakemake()
    one_line_refusal(proc, "invalid workflow setting", "cluster.yaml", "key 'slurm.partition'", "a newline")
    assert calls(wd.logs["sbatch"]) == [] and not marker.exists()


def test_the_specs_slurm_settings_reach_sbatch_and_quoted_text_runs_nothing(slurm_cluster, tmp_path):
    """The shipped profile's nulls (partition, account) and its default `request_gpus: true` (this cluster has no GPU:
    sbatch would refuse every job) lose to what the spec says; a comment full of shell syntax stays the comment."""
    marker = tmp_path / "pwned"
    hostile = f"gs $(touch {marker}-1) `touch {marker}-2` '; touch {marker}-3; echo '"
    spec = spec_with_slurm(partition="debug", account="gs-spec-account", request_gpus=False, submit_retry_s=5,
                           comment=hostile, sbatch={"mail-type": "NONE"})  # fmt: skip
    wd = make_workdir(tmp_path / "wd", spec, partition=None, account=None, request_gpus=True)
    proc = wd.snakemake()
    assert proc.returncode == 0, proc.stderr[-4000:]
    sides = {p.parent.parent.name: p for p in (wd.sweep_dir() / ".jobs").glob("*/submitit/*_submission.sh")}
    assert len(sides) == 2 and len(wd.submitted()) == 2  # both runs, each submitted once
    job_ids = [p.name.split("_")[0] for p in sides.values()]
    # ran: the profile's request_gpus was not what reached sbatch (this cluster refuses --gpus-per-node)
    assert {state for (state,) in sacct_fields(job_ids, "State").values()} == {"COMPLETED"}
    for script in sides.values():  # the batch script sbatch was given (submitit keeps it beside the job's files)
        lines = script.read_text().splitlines()
        # (this cluster enforces no associations: Slurm records an unknown account as the user's default, so the
        # script, not sacct, shows the account that was asked for)
        for line in ("#SBATCH --account=gs-spec-account", "#SBATCH --partition=debug", "#SBATCH --mail-type=NONE",
                     f"#SBATCH --comment={shlex.quote(hostile)}"):  # fmt: skip
            assert line in lines, (line, lines[:30])
        assert not any(ln.startswith("#SBATCH --gpus-per-node") for ln in lines)
    assert not list(tmp_path.glob("pwned*"))  # the comment ran nothing


def test_a_permanent_sbatch_refusal_stops_at_once_with_its_message(slurm_cluster, tmp_path):
    """The issue's case: GPUs asked of a cluster that has none. Retried, it is refused the same way: one sbatch per
    attempt of the rule (the profile's `retries: 2`), not one every 15 s for 300 s."""
    wd = make_workdir(tmp_path / "wd", SMALL_SPEC, request_gpus=True)
    proc = wd.snakemake()
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    made = calls(wd.logs["sbatch"])
    assert made and all(c.rc != 0 for c in made)
    assert len(made) == 2 * 3, [c.args for c in made]  # 2 runs x (1 + 2 retries)
    assert "retrying in 15 s" not in proc.stderr
    assert ("graphsweep: sbatch refused the job: sbatch: error: Invalid generic resource (gres) specification (not one "
            "of the failures Slurm calls transient") in proc.stderr
    failed = list((wd.sweep_dir() / ".jobs").glob("*/failed.json"))
    assert len(failed) == 2 and all('"state": "REFUSED"' in f.read_text() for f in failed)  # graphsweep status says so


# --------------------------------------------------------------------------------------------------
# Issue 38 item 2: a spec cannot steer Slurm; the profile cannot set what every run's plan sets

@pytest.mark.parametrize("sbatch, needles", [
    ({"nodes": 64, "time": "9-00:00:00", "gpus-per-node": 8, "ntasks-per-node": 8},
     ["executor.slurm.sbatch.nodes", "launch plan"]),
    ({"output": "OUTSIDE/%j.out", "error": "OUTSIDE/%j.err", "chdir": "/"}, ["executor.slurm.sbatch.output"]),
], ids=["size and time", "files"])  # fmt: skip
def test_a_spec_that_steers_slurm_submits_nothing(slurm_cluster, tmp_path, sbatch, needles):
    outside = tmp_path / "OUTSIDE"
    spec = spec_with_slurm(sbatch={k: str(v).replace("OUTSIDE", str(outside)) for k, v in sbatch.items()})
    wd = make_workdir(tmp_path / "wd", spec)
    proc = wd.snakemake()
    one_line_refusal(proc, "invalid sweep spec", *needles)
    assert calls(wd.logs["sbatch"]) == [] and not outside.exists() and not (wd.path / "results").exists()


def test_a_specs_python_is_never_the_batch_scripts(slurm_cluster, tmp_path):
    marker = tmp_path / "PWNED"
    wd = make_workdir(tmp_path / "wd", spec_with_slurm(slurm_python=f"python3; touch {marker}; python3"))
    proc = wd.snakemake()
    one_line_refusal(proc, "invalid sweep spec", "executor.slurm.slurm_python", "shell code")
    assert calls(wd.logs["sbatch"]) == [] and not marker.exists()


def test_a_profile_that_moves_slurms_files_submits_nothing(slurm_cluster, tmp_path):
    outside = tmp_path / "OUTSIDE"
    wd = make_workdir(tmp_path / "wd", SMALL_SPEC, sbatch={"output": f"{outside}/%j.out"})
    proc = wd.snakemake()
    one_line_refusal(proc, "invalid workflow setting", "key 'slurm.sbatch.output'", "inside the results folder")
    assert calls(wd.logs["sbatch"]) == [] and not outside.exists()


def test_a_jobs_size_time_and_files_are_the_plans(slurm_cluster, tmp_path):
    """What reaches sbatch when the spec gives only where its jobs go: one node, the spec's time limit, and Slurm's
    output inside the results folder (the whole folder tree is searched: nothing of the job lands elsewhere)."""
    spec = spec_with_slurm(sbatch={"mail-type": "NONE"}, submit_retry_s=5)
    wd = make_workdir(tmp_path / "wd", spec)
    proc = wd.snakemake()
    assert proc.returncode == 0, proc.stderr[-4000:]
    job_ids = [c.out.split()[-1] for c in wd.submitted()]
    assert len(job_ids) == 2
    rows = sacct_fields(job_ids, "NNodes,Timelimit,WorkDir")
    assert {tuple(v[:2]) for v in rows.values()} == {("1", "00:05:00")}  # executor.timeout_min: 5
    results = wd.sweep_dir().resolve()
    outs = [p for p in results.rglob("*_log.out")]
    assert len(outs) == 2 and not [p for p in wd.path.rglob("*_log.out") if results not in p.resolve().parents]


def test_slurm_without_the_profile_is_refused_with_one_line_naming_it(slurm_cluster, tmp_path):
    """A run on Slurm is submitted and waited for by the graphsweep executor, which the profile names: `--config
    cluster=slurm` on Snakemake's local executor (one waiting process per run, before issue 39) says so and submits
    nothing."""
    wd = make_workdir(tmp_path / "wd", SMALL_SPEC)
    cmd = [c for c in wd.command() if c not in ("--profile", "slurm")] + ["cluster=slurm", "--cores", "2"]
    proc = subprocess.run(cmd, cwd=wd.path, env=wd.env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "(--config cluster=slurm)" in last and "run snakemake --profile slurm" in last, last
    assert calls(wd.logs["sbatch"]) == [] and not list(wd.sweep_dir().glob("runs/*/run.json"))
