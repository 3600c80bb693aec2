"""The Snakemake side keeps the snakemake-workflows style: snakefmt-formatted, and `snakemake --lint` clean but for
the one lint graphsweep declines on purpose (a conda env or container per rule: every rule runs graphsweep's own
Python, and the training job runs in the user's Megatron container, which graphsweep does not own)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

DECLINED = {"Specify a conda environment or container for each rule."}


def _bin(name: str) -> str:
    return shutil.which(name, path=str(Path(sys.executable).parent)) or name


def test_snakefile_and_rules_are_snakefmt_formatted():
    res = subprocess.run([_bin("snakefmt"), "--check", "--diff", "Snakefile", "rules/"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.snakemake
def test_snakemake_lint_finds_nothing_but_the_declined_container_lint():
    res = subprocess.run([_bin("snakemake"), "--lint", "-n", "--cores", "1"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    text = res.stdout + res.stderr
    rules = re.findall(r"^Lints for rule (\w+)", text, re.M)
    lints = set(re.findall(r"^\s+\* (.+?):$", text, re.M))
    assert rules, text  # the lint ran and saw the rules
    assert lints == DECLINED, text
