"""A Slurm sweep on a host without Slurm (issue 37 item 3): one line, exit status 2, no job, and what to run instead,
instead of submitit's "Could not detect srun" traceback from every run rule; a dry run says which Slurm cluster and
partition the runs would go to. The Slurm commands are taken away by PATH (a folder without them); the real Slurm
answers are the local cluster's (tests/slurm/local-cluster.sh: cluster graphsweep, default partition debug)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphsweep.smk import SLURM_COMMANDS, no_slurm_here, slurm_first_words, slurm_target
from tests.support import ROOT, copy_workflow

SPEC = "configs/examples/megatron-tiny-vanilla-gpt.yaml"


def test_without_slurm_commands_one_line_says_where_to_run_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, srun or sacct
    line = no_slurm_here(SPEC, 16)
    assert line == (
        "graphsweep: this sweep submits its 16 runs to Slurm (the Slurm profile, or executor.cluster: slurm), but "
        "this host has no Slurm: sbatch, srun, sacct not on PATH. Run it on the cluster's login node; here, "
        f"`snakemake -n --profile slurm --config spec={SPEC}` shows what it would submit, and "
        f"`snakemake --cores 2 --config spec={SPEC} cluster=local` runs it on this machine")


def test_a_real_run_without_slurm_stops_and_a_finished_sweep_does_not(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit) as stop:
        slurm_first_words(["a.eager.r1"], {}, SPEC, dry_run=False)
    assert stop.value.code == 2 and capsys.readouterr().err.startswith("graphsweep: this sweep submits its 1 runs")
    slurm_first_words([], {}, SPEC, dry_run=False)  # every run has its run.json: nothing to submit, no Slurm needed
    assert capsys.readouterr().err == ""


def test_a_dry_run_without_slurm_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert slurm_target(16, "gpu", "proj") == (
        "graphsweep: dry run: 16 runs would be submitted to Slurm (cluster unknown: no Slurm answers on this host), "
        "partition gpu, account proj; this host has no sbatch, srun, sacct: start the real run on the cluster's "
        "login node")


def test_a_dry_run_asks_an_unreachable_slurm_once(tmp_path, monkeypatch):
    """A login node whose Slurm controller does not answer: each client call waits about 9 s before it fails
    (measured on the local cluster stopped), so after scontrol fails the dry run does not ask sinfo too. The Slurm
    commands here are stand-ins (a failing scontrol, an sinfo that records being called): named fakes."""
    asked = tmp_path / "sinfo-called"
    (tmp_path / "scontrol").write_text("#!/bin/sh\necho 'slurm_load_ctl_conf error: Unable to contact slurm controller' >&2\nexit 1\n")
    (tmp_path / "sinfo").write_text(f"#!/bin/sh\ntouch {asked}\necho 'debug*'\n")
    for name in ("scontrol", "sinfo"):
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    line = slurm_target(4, None, None)
    assert "no Slurm answers on this host" in line and "the cluster's default partition" in line
    assert not asked.exists()


@pytest.mark.slurm
def test_a_dry_run_names_the_cluster_and_its_default_partition(slurm_cluster):
    assert all(shutil.which(c) for c in SLURM_COMMANDS)
    assert no_slurm_here(SPEC, 16) is None
    assert slurm_target(16, None, None) == (
        "graphsweep: dry run: 16 runs would be submitted to Slurm cluster 'graphsweep', partition debug (the cluster's "
        "default: the profile gives none)")


# --------------------------------------------------------------------------------------------------
# Through the real Snakemake and the repository's Slurm profile, PATH without the Slurm commands

def _snakemake_without_slurm(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """`snakemake --profile slurm --config spec=SPEC` as a user types it in a clone, with an empty PATH (Snakemake
    runs from this interpreter's path)."""
    (workdir / "slurm").symlink_to(ROOT / "profiles" / "slurm", target_is_directory=True)
    (workdir / "bin").mkdir()
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--profile", "slurm", "--config", f"spec={SPEC}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=workdir,
                          env={**os.environ, "PATH": str(workdir / "bin")})


@pytest.mark.snakemake
def test_the_slurm_profile_on_a_host_without_slurm_stops_with_one_line(tmp_path):
    workdir = copy_workflow(tmp_path)
    proc = _snakemake_without_slurm(workdir)
    ours = [line for line in proc.stderr.splitlines() if line.startswith("graphsweep")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(ours) == 1 and ours[0].startswith("graphsweep: this sweep submits its 16 runs to Slurm")
    assert "sbatch, srun, sacct not on PATH" in ours[0] and f"--config spec={SPEC} cluster=local`" in ours[0]
    assert not (workdir / "results" / "megatron-tiny-vanilla-gpt" / "runs").exists()


@pytest.mark.snakemake
def test_the_slurm_profile_dry_run_without_slurm_says_where_the_runs_would_go(tmp_path):
    workdir = copy_workflow(tmp_path)
    proc = _snakemake_without_slurm(workdir, "-n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "graphsweep: dry run: 16 runs would be submitted to Slurm (cluster unknown" in proc.stderr
