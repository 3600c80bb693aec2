"""`--profile slurm` from any install (issue 37 item 4): the graphsweep wheel, installed without -e into a fresh venv,
brings the executor Snakemake looks for (`executor: graphsweep`), and that venv's `snakemake --profile slurm` runs a
sweep on the local Slurm cluster, its jobs running the installed graphsweep. Before, only `make install` (a second,
separate plugin distribution) made `--executor graphsweep` a choice: "invalid choice: 'graphsweep'".

Real parts: the wheel built by pip from the package's sources, a fresh venv, PyPI-style installs of its dependencies,
the real Slurm cluster (tests/slurm/local-cluster.sh), the repository's Snakefile and Slurm profile."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.slurm.slurm_workflow import SMALL_SPEC, calls, make_workdir
from tests.support import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.snakemake, pytest.mark.torch]

PLUGIN = "snakemake_executor_plugin_graphsweep"


def _bare_env(**extra: str) -> dict[str, str]:
    """This environment without PYTHONPATH: the venv's own graphsweep, never a checkout's."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **extra}


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # the distribution's sources alone: pip builds in the source tree
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src / "pyproject.toml")
    for package in ("graphsweep", PLUGIN):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "--quiet", "wheel", "--no-deps", "--no-build-isolation", "-w",
                    str(dist), str(src)], check=True, timeout=300, env=_bare_env())  # fmt: skip
    (wheel,) = dist.glob("graphsweep-*.whl")
    assert f"{PLUGIN}/__init__.py" in zipfile.ZipFile(wheel).namelist()
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, env=_bare_env())
    # torch for the builtin trainer's eager arm (the CPU build, as make install pins it)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--quiet", "install", "torch==2.13.0", str(wheel)],
                   check=True, timeout=900, env=_bare_env())  # fmt: skip
    return venv


def test_the_installed_wheel_s_snakemake_knows_the_graphsweep_executor(wheel_venv):
    help_text = subprocess.run([str(wheel_venv / "bin" / "snakemake"), "--help"], capture_output=True, text=True,
                               timeout=120, env=_bare_env(), cwd=wheel_venv).stdout  # fmt: skip
    assert "--executor {graphsweep," in " ".join(help_text.split()), help_text[:3000]


def test_the_slurm_profile_runs_a_sweep_with_the_installed_wheel(wheel_venv, tmp_path, slurm_cluster):
    work = make_workdir(tmp_path / "work", SMALL_SPEC)  # configs, the Slurm profile for this cluster, ./slurm
    env = _bare_env(PATH=f"{work.bin}:{wheel_venv / 'bin'}:{os.environ['PATH']}")
    proc = subprocess.run([str(wheel_venv / "bin" / "snakemake"), "--snakefile", str(ROOT / "Snakefile"), "--profile",
                           "slurm", "--config", f"spec={work.spec}"], cwd=work.path, env=env, capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "graphsweep: sweep 'small' done: 1 cells: 1 blocked" in proc.stderr  # the CPU cluster's graph arm
    assert len([c for c in calls(work.logs["sbatch"]) if c.rc == 0]) == 2  # eager and graph, each one Slurm job
    site = next((wheel_venv / "lib").glob("python3.*/site-packages"))
    for run_json in (work.sweep_dir() / "runs").glob("*/run.json"):
        record = json.loads(run_json.read_text())
        assert record["state"] == "COMPLETED" and record["executor"] == "slurm", record
        assert record["provenance"]["graphsweep"]["path"] == str(site)  # the job ran the installed package


def test_an_editable_install_brings_it_too(wheel_venv, tmp_path):
    """`pip install -e .` (make install; environment.yml's `-e .[builtin,test]`) puts the repository root on sys.path,
    where Snakemake's pkgutil scan finds the executor (setuptools' import-hook editable mode would hide it)."""
    yml = (ROOT / "environment.yml").read_text()
    assert "- -e .[builtin,test]" in yml
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "graphsweep", checkout / "graphsweep", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / PLUGIN, checkout / PLUGIN, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    pip = [str(wheel_venv / "bin" / "python"), "-m", "pip", "--quiet"]
    subprocess.run([*pip, "uninstall", "-y", "graphsweep"], check=True, timeout=120, env=_bare_env())
    try:
        subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", "-e", str(checkout)], check=True,
                       timeout=300, env=_bare_env(), cwd=tmp_path)  # fmt: skip
        where = subprocess.run([str(wheel_venv / "bin" / "python"), "-c", f"import {PLUGIN} as p; print(p.__file__)"],
                               capture_output=True, text=True, timeout=120, env=_bare_env(), cwd=wheel_venv)
        assert where.stdout.strip() == str(checkout / PLUGIN / "__init__.py"), where.stderr
        help_text = subprocess.run([str(wheel_venv / "bin" / "snakemake"), "--help"], capture_output=True, text=True,
                                   timeout=120, env=_bare_env(), cwd=wheel_venv).stdout  # fmt: skip
        assert "--executor {graphsweep," in " ".join(help_text.split()), help_text[:3000]
    finally:  # the module's venv holds the wheel again
        subprocess.run([*pip, "uninstall", "-y", "graphsweep"], timeout=120, env=_bare_env())
        wheel = next((wheel_venv.parent / "dist").glob("graphsweep-*.whl"))
        subprocess.run([*pip, "install", "--no-deps", str(wheel)], check=True, timeout=300, env=_bare_env())
