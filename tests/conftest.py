"""Shared test helpers: the repository root and a scratch copy of the workflow to run Snakemake in."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = ROOT / "tests" / "fixtures"


def copy_workflow(dest: Path) -> Path:
    """A working directory with the workflow's configs, as a user's clone would have them."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "configs", dest / "configs", dirs_exist_ok=True)
    return dest


def snakemake(workdir: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the real Snakemake CLI on the repository's Snakefile in workdir."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def run_spec(dest: Path, name: str, spec: dict) -> Path:
    """A working directory where the sweep spec `spec` (written as configs/NAME.yaml) ran to the end with Snakemake."""
    workdir = copy_workflow(dest)
    (workdir / "configs" / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    proc = snakemake(workdir, "--cores", "2", "--config", f"spec=configs/{name}.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return workdir


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT
