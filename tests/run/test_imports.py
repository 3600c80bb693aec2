"""The run rule's own process stays small: on Snakemake's local executor (a sweep run without the Slurm profile's
graphsweep executor) a login node hosts one such process per run in flight, and what it imports is most of its
memory (on main before issue 31: pandas, pyarrow and scipy through the launch gate, the run readers and the
controller module, 129 MB a process; without them 31 MB RSS: benchmarks/login_node.py, docs/slurm.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import ROOT

HEAVY = ("pandas", "pyarrow", "scipy", "numpy", "matplotlib", "polars", "duckdb")


def _imported_by(*modules: str) -> set[str]:
    code = ("import json, sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(out.stdout))


def test_the_run_rules_script_imports_no_table_or_numeric_library():
    # what scripts/run.py imports
    found = _imported_by("graphsweep.smk", "graphsweep.run.runrule", "graphsweep.vocab")
    assert not found & set(HEAVY), sorted(found & set(HEAVY))


def test_the_check_sees_a_heavy_import():
    # the same check on a module that does read tables: it must see them
    assert {"pandas", "pyarrow"} <= _imported_by("graphsweep.store.readback")
