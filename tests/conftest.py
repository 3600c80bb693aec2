"""Shared test helpers: the repository root and a scratch copy of the workflow to run Snakemake in."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT
