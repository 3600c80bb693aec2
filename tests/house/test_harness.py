"""harness.HARNESS and BOOKKEEPING name every graphsweep module a job imports, and nothing else: what the harness
digest covers (compared between runs) cannot silently miss a module an entry point starts to import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from graphsweep import harness
from graphsweep.resources import SOURCE_ROOT

PACKAGE = SOURCE_ROOT / "graphsweep"


def test_the_harness_and_bookkeeping_lists_are_what_the_entry_points_import():
    entries = sorted(p.stem for p in (PACKAGE / "entry").glob("*.py") if p.stem != "__init__")
    probe = ("import importlib, json, sys\n"
             f"for m in {entries!r}: importlib.import_module('graphsweep.entry.' + m)\n"
             "print(json.dumps(sorted(getattr(sys.modules[k], '__file__', None) or '' for k in sys.modules "
             "if k == 'graphsweep' or k.startswith('graphsweep.'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=SOURCE_ROOT)
    imported = {str(Path(f).relative_to(PACKAGE)) for f in json.loads(out.stdout) if f}
    measuring = set(harness.harness_files(imported))
    assert measuring == {f for f in imported if f.startswith("entry/") or f == "logformat.py"}
    assert imported - measuring == set(harness.BOOKKEEPING), "classify the module: harness (it shapes what a run " \
        "measures or prints) or bookkeeping (it records and names)"
