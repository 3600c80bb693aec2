"""Every benchmark in benchmarks/ runs on the tree it is in (issue 39 item 6: benchmarks/login_node.py, which backs
the README's login-node table, failed on main with `ImportError: cannot import name 'SweepPaths' from
'graphsweep.vocab'`, in code it handed to a child Python). Each one imports here, and every graphsweep name imported
by the code a benchmark hands to a child Python (`python -c`) exists: a rename fails this test, not the next person
who needs the figure. Running them is each one's own business: most need a GPU, the cluster or minutes."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.support import ROOT, benchmark

BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))
IMPORT = re.compile(r"^\s*from (graphsweep[\w.]*) import ([\w, ]+)$", re.M)


def _child_imports(module) -> list[tuple[str, str]]:
    """(module, name) of each `from graphsweep... import ...` line in a string of the benchmark (its child's code)."""
    texts = [v for v in vars(module).values() if isinstance(v, str)]
    return [(mod, name.split(" as ")[0].strip()) for text in texts for mod, names in IMPORT.findall(text)
            for name in names.split(",")]  # fmt: skip


def _has(mod: str, attr: str) -> bool:
    """Whether `from mod import attr` works: a name of the module, or a module of the package."""
    if hasattr(importlib.import_module(mod), attr):
        return True
    try:
        importlib.import_module(f"{mod}.{attr}")
    except ModuleNotFoundError:
        return False
    return True


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_benchmark_imports_and_its_childs_graphsweep_names_exist(name):
    module = benchmark(name)
    assert module.__doc__, f"benchmarks/{name}.py says what it measures"
    for mod, attr in _child_imports(module):
        assert _has(mod, attr), f"benchmarks/{name}.py: from {mod} import {attr}"


def test_the_check_sees_a_childs_missing_name():
    class Child:
        CODE = "import sys\nfrom graphsweep.vocab import SweepPaths\n"

    ((mod, attr),) = _child_imports(Child)
    assert not _has(mod, attr) and _has("graphsweep", "vocab") and _has("graphsweep.layout", "SweepPaths")


def test_every_benchmark_is_checked():
    assert "login_node" in BENCHMARKS and len(BENCHMARKS) >= 15
