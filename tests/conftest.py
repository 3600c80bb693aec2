"""pytest's hooks and fixtures (helpers live in tests/support.py): the test lanes.

`pytest --lane fast` (`make test-fast`) runs the in-process unit tests: it deselects every test marked with one of
the HEAVY markers (pyproject.toml describes them) and fails a test that starts such a process all the same, in
pytest's process and in every Python process the tests start (tests/lane/sitecustomize.py), so a missing marker is
found, not paid for.

`make test` runs every test in three lanes that split the suite by marker, each test in exactly one (`lane_of`), so a
new test joins a lane by its markers alone (tests/lane/lanes.py runs them):
- `--lane=slurm`: the tests marked slurm (they wait on the local Slurm cluster and use little CPU); with `=`:
  pytest reads `--lane slurm` as the path ./slurm (the profile's link) before this file defines --lane;
- `--lane=cpu`: every other test but the megatron ones; starting a Slurm command here fails like a missing marker
  in the fast lane (the Slurm lane's fault tests take the cluster's node down beside it);
- `--lane=megatron`: the tests marked megatron (their live checks rewrite fixtures the cpu lane reads).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphsweep.workloads import bridge_check

from tests.lane.sitecustomize import GUARDED, HEAVY, LANE_ENV, install
from tests.support import ROOT

FAST_TIMEOUT_S = 60  # per test in the fast lane (pyproject.toml sets the default for the others)
LANES = ("cpu", "slurm", "megatron")  # make test's lanes: a partition of the suite
# tests/lane/lanes.py names a folder here: each lane writes how many tests it collected and kept (lanes.py adds them up)
COUNTS_ENV = "GRAPHSWEEP_LANE_COUNTS"


def lane_of(item: pytest.Item) -> str:
    """The one lane of make test that runs this test."""
    if item.get_closest_marker("megatron"):
        return "megatron"
    if item.get_closest_marker("slurm"):
        return "slurm"
    return "cpu"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--lane", choices=("all", "fast", *LANES), default="all",
                     help="fast: in-process unit tests only (no torch, Snakemake, Slurm or Chromium process); "
                          "cpu, slurm, megatron: make test's lanes (tests/conftest.py lane_of)")


def pytest_configure(config: pytest.Config) -> None:
    lane = config.getoption("lane")
    if lane not in GUARDED:
        return
    if lane == "fast" and not config.getoption("timeout", None):
        config.option.timeout = FAST_TIMEOUT_S
    folder = str(Path(__file__).resolve().parent / "lane")
    os.environ[LANE_ENV] = lane
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p)
    install(lane)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    lane = config.getoption("lane")
    if lane == "all":
        return
    keep, drop = [], []
    for item in items:
        (keep if _in_lane(item, lane) else drop).append(item)
    if lane != "fast":
        _write_counts(lane, items, len(keep))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _in_lane(item: pytest.Item, lane: str) -> bool:
    if lane == "fast":
        return not any(item.get_closest_marker(m) for m in HEAVY)
    return lane_of(item) == lane


def _write_counts(lane: str, items: list[pytest.Item], kept: int) -> None:
    """{lane}.json in $GRAPHSWEEP_LANE_COUNTS: what this lane collected, per lane, and kept (one xdist worker writes)."""
    folder = os.environ.get(COUNTS_ENV)
    if not folder or os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    per_lane = {name: 0 for name in LANES}
    for item in items:
        per_lane[lane_of(item)] += 1
    record = {"lane": lane, "collected": len(items), "kept": kept, "per_lane": per_lane}
    Path(folder, f"{lane}.json").write_text(json.dumps(record) + "\n")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def bridge_worker() -> Iterator[bridge_check.BridgeWorker]:
    """One Bridge worker for every live Bridge test of the session (its imports take most of a minute); skips without
    GRAPHSWEEP_MEGATRON_PYTHON."""
    python = os.environ.get("GRAPHSWEEP_MEGATRON_PYTHON")
    if not python:
        pytest.skip("GRAPHSWEEP_MEGATRON_PYTHON is not set (build: tools/megatron-venv.sh)")
    with bridge_check.BridgeWorker(python, timeout=1200) as worker:
        yield worker
