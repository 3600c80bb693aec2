"""One place for each name: verdicts, run outcomes and arms in graphsweep/vocab.py, the results layout in
graphsweep/layout.py, constraint ids in the constraint
catalogue, signature ids in the signature catalogue. A string literal spelling one of them anywhere else in the
library, the rule files or the scripts fails here with its file and line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from graphsweep import layout, vocab
from graphsweep.constraints.catalogue import CONSTRAINTS
from graphsweep.parse.signatures import SIGNATURES
from tests.support import ROOT

NAMES = {
    "verdict": set(vocab.VERDICTS),
    "outcome": set(vocab.OUTCOMES),
    "arm": set(vocab.ARMS) | {vocab.AA},
    # the results layout: a run folder's files (layout.RunDir), the sweep's tables, reports and job plumbing
    # (layout.SweepPaths), a run's job files (layout.JobsDir)
    "results file": set(layout.RunDir.FILES) | set(layout.SweepPaths.TABLES)
    | {layout.SweepPaths.REPORT_MD, layout.SweepPaths.REPORT_HTML, layout.SweepPaths.JOBS, layout.JobsDir.SIDE,
       layout.JobsDir.FAILURE},
}
CONSTRAINT_IDS = {c.id for c in CONSTRAINTS}
SIGNATURE_IDS = {s.id for s in SIGNATURES} - CONSTRAINT_IDS
# Words that are something else in one module (file, word): why
OTHER_MEANING = {
    ("graphsweep/store/tables.py", "speedup"): "a column of comparison.parquet",
    ("graphsweep/commands/status.py", "failed"): "a run status: an infrastructure failure the next snakemake retries",
    ("graphsweep/plan/planner.py", "blocked"): "a dry-run summary field (runs preflight blocked)",
    ("graphsweep/store/tables.py", "control"): "a column of comparison.parquet (an A/A cell)",
    ("graphsweep/constraints/graph.py", "graph"): "a substring of a Megatron field name (cuda_graph_impl, ...)",
    ("graphsweep/entry/host_time.py", "is_moe_layer"): "an attribute of Megatron Core's TransformerLayer",
}
# where each kind of name is defined (and may be spelled)
HOMES = {
    "verdict": {"graphsweep/vocab.py"},
    "outcome": {"graphsweep/vocab.py"},
    "arm": {"graphsweep/vocab.py"},
    "results file": {"graphsweep/layout.py"},
    "constraint": {"graphsweep/constraints/rules.py", "graphsweep/constraints/runtime.py",
                   "graphsweep/constraints/offload.py", "graphsweep/constraints/field.py",
                   "graphsweep/constraints/capture.py"},
    "signature": {"graphsweep/parse/signatures.py"},
}


def _sources(root: Path) -> list[Path]:
    return sorted([*(root / "graphsweep").rglob("*.py"), *(root / "scripts").glob("*.py")])


def _literals(path: Path) -> list[tuple[int, str]]:
    """String literals that name something, not docstrings and not keys of a record: `row["speedup"]`,
    `row.get("speedup")`, `_get(row, "speedup")` and `{"aa": ...}` read or write a column or a JSON field that
    happens to share a word with the vocabulary."""
    tree = ast.parse(path.read_text())
    skip = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript):
            skip.add(id(n.slice))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args:
            skip.add(id(n.args[0]))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_get" and len(n.args) == 2:
            skip.add(id(n.args[1]))
        elif isinstance(n, ast.Dict):
            skip.update(id(k) for k in n.keys if k is not None)
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def _offenders(root: Path = ROOT) -> list[str]:
    out = []
    for path in _sources(root):
        rel = path.relative_to(root).as_posix()
        for line, text in _literals(path):
            kinds = [k for k, names in NAMES.items() if text in names]
            kinds += ["constraint"] if text in CONSTRAINT_IDS else []
            kinds += ["signature"] if text in SIGNATURE_IDS else []
            for kind in kinds:
                if rel not in HOMES[kind] and (rel, text) not in OTHER_MEANING:
                    out.append(f"{rel}:{line}: the {kind} name {text!r} belongs to {sorted(HOMES[kind])[0]}")
    for path in sorted((root / "rules").glob("*.smk")) + [p for p in [root / "Snakefile"] if p.exists()]:
        for k, line in enumerate(path.read_text().splitlines(), start=1):
            for text in re.findall(r"[\"']([A-Za-z_-]+)[\"']", line):
                if text in NAMES["verdict"] | NAMES["outcome"] | CONSTRAINT_IDS:
                    out.append(f"{path.relative_to(root)}:{k}: {text!r} is spelled outside the vocabulary")
    return out


def test_every_name_is_spelled_in_its_one_place():
    assert _offenders() == []


def test_the_check_sees_a_misplaced_name(tmp_path):
    # the test itself can fail: a module that spells a verdict is reported. The probe lives in a copy of the tree's
    # shape, not in graphsweep/ (a second pytest-xdist worker scanning the package would see it there)
    (tmp_path / "graphsweep").mkdir()
    (tmp_path / "graphsweep" / "_vocabulary_probe.py").write_text('VERDICT = "speedup"\n')
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "probe.smk").write_text('rule probe:\n    params: v="invalid"\n')
    found = _offenders(tmp_path)
    assert any("graphsweep/_vocabulary_probe.py:1: the verdict name 'speedup'" in o for o in found), found
    assert any("rules/probe.smk:2: 'invalid' is spelled outside the vocabulary" in o for o in found), found


def test_constraint_and_signature_ids_are_unique():
    assert len(CONSTRAINT_IDS) == len(CONSTRAINTS)
    ids = [s.id for s in SIGNATURES if s.id not in CONSTRAINT_IDS]
    assert len(ids) == len(set(ids))
