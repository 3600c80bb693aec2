"""pytest's hooks and fixtures (helpers live in tests/support.py): the test lanes.

`pytest --lane fast` (`make test-fast`) runs the in-process unit tests: it deselects every test marked with one of
the HEAVY markers (pyproject.toml describes them) and fails a test that starts such a process all the same, in
pytest's process and in every Python process the tests start (tests/lane/sitecustomize.py), so a missing marker is
found, not paid for. `make test` runs every lane.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.lane.sitecustomize import HEAVY, LANE_ENV, install
from tests.support import ROOT

FAST_TIMEOUT_S = 60  # per test in the fast lane (pyproject.toml sets the default for the others)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--lane", choices=("all", "fast"), default="all",
                     help="fast: in-process unit tests only (no torch, Snakemake, Slurm or Chromium process)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("lane") != "fast":
        return
    if not config.getoption("timeout", None):
        config.option.timeout = FAST_TIMEOUT_S
    lane = str(Path(__file__).resolve().parent / "lane")
    os.environ[LANE_ENV] = "fast"
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (lane, os.environ.get("PYTHONPATH")) if p)
    install()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("lane") != "fast":
        return
    keep, drop = [], []
    for item in items:
        (drop if any(item.get_closest_marker(m) for m in HEAVY) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT
