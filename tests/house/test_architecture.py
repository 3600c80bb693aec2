"""The house's shape, from the code's own imports (docs/architecture.md draws it): floors that import only
downward, no import circle, no import hidden in a function unless its library is optional where the code runs,
and no module a newcomer cannot read in one sitting."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGE = ROOT / "graphsweep"

# Bottom to top. A module imports from its own package or from packages on lower floors, never from above or
# from a sibling on its own floor.
FLOORS: list[set[str]] = [
    {"__init__", "vocab", "records", "layout", "fileio", "logformat", "harness", "provenance", "resources", "smk", "textsafe"},  # ground: standard library only
    {"constraints", "entry", "store"},
    {"workloads", "parse", "judge"},
    {"sweepspec", "report"},
    {"plan", "run"},
    {"commands"},
    {"cli"},  # the `graphsweep` command: its sub-commands
]
GROUND = FLOORS[0]
# Imported inside functions on purpose: absent on the controller (Megatron, TE, torch live in the job's container).
OPTIONAL = {"megatron", "torch", "transformer_engine"}
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module imported, line, inside a function?) for every import in the file, `from x import y` resolved to
    x.y when x.y is a module of ours."""
    tree = ast.parse(path.read_text())
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside |= {id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in inside) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.append((full if full in MODULES else node.module, node.lineno, id(node) in inside))
    return out


def _floor_of(module: str) -> tuple[int, str]:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for i, floor in enumerate(FLOORS):
        if top in floor:
            return i, top
    raise AssertionError(f"{module}: its package {top!r} is on no floor of FLOORS; put it on one")


def _graph() -> dict[str, set[str]]:
    return {
        name: {m for m, _, _ in _imports(path) if m in MODULES and m != name}
        for name, path in MODULES.items()
    }


def test_every_module_is_on_a_floor() -> None:
    for name in MODULES:
        _floor_of(name)


def test_imports_only_run_down_the_house() -> None:
    upward = []
    for name, path in MODULES.items():
        floor, package = _floor_of(name)
        for target, line, _ in _imports(path):
            if target not in MODULES:
                continue
            t_floor, t_package = _floor_of(target)
            if t_package == package or t_floor < floor or (t_floor == 0 and floor == 0):
                continue
            upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} (floor {t_floor} >= {floor})")
    assert not upward, "imports that run up or sideways:\n" + "\n".join(upward)


def test_ground_floor_is_standard_library_only() -> None:
    """The entry programs import these inside the user's container, where only Python itself is certain."""
    outside = []
    for name in sorted(n for n in MODULES if _floor_of(n)[0] == 0):
        for target, line, in_function in _imports(MODULES[name]):
            top = target.split(".")[0]
            if top == "graphsweep" or top in sys.stdlib_module_names or top == "__future__":
                continue
            if in_function and top in OPTIONAL:
                continue
            outside.append(f"{name}:{line} imports {target}")
    assert not outside, outside


def test_no_import_circle() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1 on the path, 2 done
    circles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_no_hidden_imports() -> None:
    hidden = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} inside a function"
        for path in MODULES.values()
        for target, line, in_function in _imports(path)
        if in_function and target.split(".")[0] not in OPTIONAL
    ]
    assert not hidden, "\n".join(hidden)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_fits_one_sitting(name: str) -> None:
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines; split it by concern (limit {MAX_LINES})"


def test_the_checks_see_a_real_upward_import(tmp_path: Path) -> None:
    """The checker itself can fail: an import from report into store is caught."""
    fake = tmp_path / "x.py"
    fake.write_text("from graphsweep.report import write\n\ndef f():\n    import pandas\n")
    found = _imports(fake)
    assert ("graphsweep.report.write", 1, False) in found
    assert ("pandas", 4, True) in found
    assert _floor_of("graphsweep.report.write")[0] > _floor_of("graphsweep.store.tables")[0]


# Where a module may compute a path from its own __file__ (resources.py is the place for it). The programs run by path
# put the folder that holds graphsweep on sys.path before they can import resources; the Bridge worker starts itself.
OWN_PATH_ALLOWED = {
    "graphsweep.entry.megatron_entry": "run by path inside the user's container: graphsweep onto sys.path first",
    "graphsweep.workloads.bridge_check": "the worker runs by path: graphsweep onto sys.path first, and starts itself",
    "graphsweep.workloads.core_check": "the per-release worker runs by path beside a Core release: the same",
}


def own_path_uses(name: str) -> list[str]:
    """Lines of a module that name __file__ (repository-root arithmetic like Path(__file__).resolve().parents[2])."""
    lines = MODULES[name].read_text().splitlines()
    return [f"{MODULES[name].relative_to(PACKAGE.parent)}:{i}: {line.strip()}" for i, line in enumerate(lines, 1)
            if "__file__" in line and not line.lstrip().startswith("#")]


def test_only_resources_knows_where_the_package_lies() -> None:
    found = [hit for name in MODULES if name not in OWN_PATH_ALLOWED and name != "graphsweep.resources"
             for hit in own_path_uses(name)]
    assert not found, "paths from __file__ outside graphsweep/resources.py (use resources.SOURCE_ROOT or a " \
                      "package-data name there):\n" + "\n".join(found)
    for name in OWN_PATH_ALLOWED:
        assert own_path_uses(name), f"{name} no longer names __file__: drop it from OWN_PATH_ALLOWED"


# Test modules share helpers through tests/support.py (and the preflight case table through
# tests/support_preflight.py) only, never by importing each other.
TEST_IMPORTS_ALLOWED: set[tuple[str, str]] = set()


def _not_through_support(target: str) -> bool:
    """An import of another test module, of conftest, or of a benchmark script."""
    parts = target.split(".")
    inner = parts[1:] if parts[0] == "tests" else parts
    benchmark = parts[0] == "benchmarks" or (PACKAGE.parent / "benchmarks" / f"{parts[0]}.py").is_file()
    return benchmark or any(p == "conftest" or p.startswith("test_") for p in inner)


def test_tests_share_helpers_through_support_only(tmp_path: Path) -> None:
    tests = PACKAGE.parent / "tests"
    found = [f"{path.relative_to(tests.parent)}:{line} imports {target}"
             for path in sorted(tests.rglob("test_*.py")) for target, line, _ in _imports(path)
             if _not_through_support(target) and (path.stem, target) not in TEST_IMPORTS_ALLOWED]
    assert not found, "test modules import helpers from tests/support.py, not from each other:\n" + "\n".join(found)
    fake = tmp_path / "test_x.py"  # the check itself can fail
    fake.write_text("from test_report import build_sweep\nfrom tests.conftest import ROOT\nimport realjobs\n"
                    "from tests.support import ROOT\n")
    assert [_not_through_support(t) for t, _, _ in _imports(fake)] == [True, True, True, False]


def test_the_report_reads_tables_not_workloads() -> None:
    """The report is made from the four tables alone: what a workload knows (the overrides to paste) is in the plan."""
    found = [f"{name}:{line} imports {target}" for name, path in MODULES.items() if name.startswith("graphsweep.report")
             for target, line, _ in _imports(path) if target.startswith("graphsweep.workloads")]
    assert not found, found


FACTS = ROOT / "docs" / "megatron-facts.md"
# A path into the folder of notes, logs and recipes kept beside a developer's checkout (`shared/docs/...`,
# `../shared/...`, `/work/shared`): users and CI do not have it. `tests/shared/x` would be a path inside the repository.
OUTSIDE_SHARED = re.compile(r"(?<![\w.~/-])(?:(?:\.\./)*|/work/)shared/")
# Evidence kept as it was written (run folders, measured data, real logs) may quote such paths
KEPT_AS_WRITTEN = ("results/", "benchmarks/data/", "tests/fixtures/logs/")


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout, no tracked files to read: {exc}")
    return [ROOT / p for p in out.decode().split("\0") if p and not p.startswith(KEPT_AS_WRITTEN)]


def test_no_tracked_file_points_at_the_shared_folder_outside_the_repository() -> None:
    """References a user can follow: no tracked file (but the evidence kept as written) points at `shared/`, the
    folder beside a developer's checkout; the facts taken from it are in docs/megatron-facts.md, tests/fixtures/README.md
    and tests/slurm/README.md."""
    files = [f for f in _tracked_files() if f.is_file() and f != Path(__file__).resolve()]
    assert len(files) > 100 and ROOT / "graphsweep" / "constraints" / "field.py" in files  # it reads the checkout
    found = [f"{f.relative_to(ROOT)}:{n}: {line.strip()[:100]}" for f in files
             for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1) if OUTSIDE_SHARED.search(line)]
    assert not found, "pointers at shared/ outside the repository:\n" + "\n".join(found)
    # the check itself can fail: each form the old pointers took is found, a path inside the repository is not
    bad = ["(shared/docs/field-failures.md, its rows)", "`../shared/fixtures/` (see its README)",
           'ROOT.parent / "shared/fixtures/megatron-h200/te_attn.log"', "# Recipe: ../../shared/docs/local-slurm.md",
           "/work/shared/recipes/megatron-h200/deps.txt"]
    good = ["tests/fixtures/logs/megatron-h200/te_attn.log", "docs/megatron-facts.md §7.1", "tests/shared/x.py",
            "unshared/ state", "a shared folder"]
    assert [bool(OUTSIDE_SHARED.search(t)) for t in bad + good] == [True] * len(bad) + [False] * len(good)


def test_megatron_fact_pointers_name_sections_of_the_repositorys_own_doc() -> None:
    """Every `§N.M` the code, tests and docs cite is a section of docs/megatron-facts.md; none points at a research
    note outside the repository (the old `ref §x.y`), and no text a user sees says `ref §`."""
    sections = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)[. ]", FACTS.read_text(), re.M))
    tracked = [ROOT / p for p in ("graphsweep", "tests", "docs", "rules", "scripts", "benchmarks", "configs", "tools")]
    files = [f for d in tracked for f in d.rglob("*") if f.suffix in (".py", ".md", ".smk", ".yaml", ".sh")
             and "fixtures/logs" not in f.as_posix() and f not in (FACTS, Path(__file__).resolve())] + [ROOT / "README.md"]
    stale, unknown = [], []
    for f in files:
        text = f.read_text(errors="replace")
        stale += [f"{f.relative_to(ROOT)}: {m}" for m in re.findall(r"\bref §[\d.]+|megatron-reference", text)]
        for first, last in re.findall(r"§(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?", text):  # every § is that file's
            unknown += [f"{f.relative_to(ROOT)}: §{s}" for s in (first, last) if s and s not in sections]
    assert not stale, stale
    assert not unknown, f"no such section in {FACTS.name}: {unknown}"
    assert {"3.1", "4.4", "5.3", "5.8", "6.2"} <= sections  # the check reads the headings it is meant to


def _undefined_names(paths: list[Path]) -> list[str]:
    from pyflakes import api, messages, reporter

    class Collect(reporter.Reporter):
        def __init__(self) -> None:
            self.found: list[str] = []

        def flake(self, message) -> None:  # noqa: ANN001 (pyflakes' own message type)
            if isinstance(message, messages.UndefinedName):
                self.found.append(str(message))

        def syntaxError(self, filename, msg, lineno, offset, text) -> None:  # noqa: ANN001, N802
            self.found.append(f"{filename}:{lineno}: {msg}")

    collect = Collect()
    for path in paths:
        api.checkPath(str(path), collect)
    return collect.found


def test_no_module_uses_a_name_it_never_defined() -> None:
    """A name a merge left without its import fails only on the path that reaches it (an onerror hook, a resumed
    local job): pyflakes finds it in every module at once. scripts/ is left out: Snakemake injects `snakemake`."""
    paths = sorted(ROOT.glob("graphsweep/**/*.py")) + sorted(ROOT.glob("tools/*.py")) + \
        sorted(ROOT.glob("benchmarks/*.py")) + sorted(ROOT.glob("snakemake_executor_plugin_graphsweep/*.py"))
    assert _undefined_names(paths) == []


def test_the_undefined_name_check_sees_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    return Path('x')\n")
    assert [m for m in _undefined_names([bad]) if "undefined name 'Path'" in m]
