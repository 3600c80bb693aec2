"""graphsweep's measuring harness: the code that runs beside the training step and prints the lines the parser reads
(graphsweep/entry: the entry points, ABBA driver, CPU pinning, GPU-busy and host-time probes; logformat.py: the
lines). Its digest, not the checkout's commit, says whether two runs' graphsweep agrees (provenance.py compares it):
a commit elsewhere (the planner, the judge, a spec or a doc in the same checkout, which also makes it "dirty")
changes nothing a run measured, and a loop continued after one would otherwise compare nothing. The other graphsweep
modules a job imports record and name (BOOKKEEPING); tests/house/test_harness.py keeps the two lists equal to what
the entry modules import."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable, Mapping

from graphsweep import resources

HARNESS = ("entry/", "logformat.py")
BOOKKEEPING = (
    "__init__.py", "harness.py", "layout.py", "provenance.py", "records.py", "resources.py", "textsafe.py", "vocab.py",
)


def harness_files(paths: Iterable[str]) -> list[str]:
    """The harness's source files among `paths` (relative to the graphsweep package), sorted."""
    return sorted(p for p in paths if p.endswith(".py") and "__pycache__" not in p
                  and any(p == h or (h.endswith("/") and p.startswith(h)) for h in HARNESS))


def harness_digest(files: Mapping[str, bytes]) -> str:
    """sha256 over each harness file's path and content (`files`: relative path -> bytes)."""
    h = hashlib.sha256()
    for rel in harness_files(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).hexdigest().encode() + b"\n")
    return h.hexdigest()


def harness_sha(package: Path | None = None) -> str:
    """The digest of the harness this process would run (the installed or checked-out graphsweep package)."""
    package = package or resources.SOURCE_ROOT / resources.PACKAGE
    rels = harness_files(str(p.relative_to(package)) for p in package.rglob("*.py"))
    return harness_digest({rel: (package / rel).read_bytes() for rel in rels})
