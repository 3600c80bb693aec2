"""Truth check per Megatron Core release: every preflight case through each release's own TransformerConfig.

The rule engine is told the release (`mcore=<release>`) and must agree with that release's
``TransformerConfig.__post_init__`` (graphsweep/workloads/core_check.py: no GPU, no TE, the release's wheel from
tools/core-releases.sh) on every case of tests/constraints/test_preflight.py (with
tests/constraints/test_bridge_agreement.py's CONTEXT):

- Core refused the config -> a rule that Core checks in that release (CORE_RULES) fires, with Core's message;
- Core accepted it -> none of those rules fires;
- a key the release's TransformerConfig does not have -> the engine says so (KEY_ABSENT_RULES), or the case is
  recorded as not applicable there (the table in docs/megatron.md shows it);
- a rule listed for a release refuses its own bad case there and accepts its good case.

Bridge-only rules (its validator, model build, capture, our own) are not Core's: their cases only have to agree on
what Core does check. Two layers, as tests/constraints/test_bridge_agreement.py:
- LIVE (marker ``megatron``): GRAPHSWEEP_CORE_RELEASES (the directory of tools/core-releases.sh) and
  GRAPHSWEEP_MEGATRON_PYTHON (a Python 3.12 with torch); rewrites tests/fixtures/core_validator.json.
- RECORDED (always): the engine re-judged now against the committed verdicts of each release.

Re-record after changing a rule or a case:
  GRAPHSWEEP_CORE_RELEASES=~/mcore-releases GRAPHSWEEP_MEGATRON_PYTHON=~/mbvenv/venv/bin/python \\
    .venv/bin/python -m pytest tests/constraints/test_preflight_releases.py -m megatron
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from graphsweep.constraints import catalogue
from graphsweep.workloads import core_check
from tests.support import ROOT
from tests.support_preflight import _inputs, _log_live_count, cases, engine, message_matches

FIXTURE = ROOT / "tests" / "fixtures" / "core_validator.json"
RELEASES = ("0.17.1", "0.18.2", "0.19.2")
OLD, NEW = ("0.17.1",), ("0.18.2", "0.19.2")
ALL = RELEASES

# Rules whose constraint TransformerConfig.__post_init__ checks, and in which releases (sources: each rule's own).
CORE_RULES: dict[str, tuple[str, ...]] = {
    "cuda_graph_impl_invalid": ALL, "cuda_graph_scope_unknown": ALL, "cuda_graph_scope_and_modules": NEW,
    "full_iteration_with_te": ALL, "full_iteration_exclusive": NEW, "moe_and_moe_router": ALL,
    "moe_preprocess_needs_router": ALL, "moe_preprocess_dtoh": ALL, "moe_scope_dense_model": ALL,
    "moe_scope_dropless": ALL, "mlp_scope_all_moe": ALL, "full_recompute_te_scope": ALL,
    "moe_recompute_moe_router": ALL, "cpu_offloading": ALL, "moe_a2a_overlap_with_graphs": ALL,
    "delay_wgrad_needs_ep_overlap": ALL,
    "fine_grained_offload_warmup": NEW, "fine_grained_offload_impl": NEW, "token_drop_offload": NEW,
    "fine_grained_offload_max_inflight": NEW, "fine_grained_offload_local_modules": ("0.19.2",),
    "fine_grained_offload_local_whole_layer": ("0.19.2",), "gtp_local_graph_shared_experts_recompute": ("0.19.2",),
}
# Rules that say "this key does not exist in this release" (Core: TransformerConfig has no such field)
KEY_ABSENT_RULES = {"cuda_graph_modules_before_0_18": {"cuda_graph_modules"}}
# Model settings Core needs before it reaches a rule's check, where BASE_MODEL (4 heads) cannot take the case: TP 3
# needs a head count it divides ("num_attention_heads (4) must be a multiple of tensor_model_parallel_size (3).").
# Given to Core and to the engine alike (no rule reads them).
CORE_CONTEXT: dict[str, dict[str, Any]] = {
    "parallel_sizes_divide_gpus": {"model.num_attention_heads": 12, "model.hidden_size": 768},
}
# Agreement on the verdict, not the words ((release, case id) -> why); must keep differing
MESSAGE_DIFFERS: dict[tuple[str, str], str] = {}
# Real disagreements ((release, case id) -> what is wrong); each must still disagree
KNOWN_DISAGREEMENTS: dict[tuple[str, str], str] = {}


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def says(rule: str, ours: str, exc_type: str | None, theirs: str | None) -> bool:
    """Core's text is the rule's message, or one of the texts the rule knows Megatron prints for it (its needles:
    Bridge and Core word some constraints differently, e.g. delayed wgrad without EP overlap)."""
    return message_matches(ours, exc_type, theirs) or any(n in (theirs or "") for n in catalogue.BY_ID[rule].needles)


def _core_rules(release: str) -> set[str]:
    return {rule for rule, where in CORE_RULES.items() if release in where}


def judge(release: str, r: dict[str, Any]) -> tuple[str, str | None]:
    """How the engine (told `release`) and Core `release` compare on one record: (verdict, problem or None).

    verdicts: agree, agree-absent (both say the key does not exist), n/a (a key this release lacks, about which no
    rule of ours speaks), disagree."""
    fired = {v.rule: v.message for v in engine(r, mcore=release)}
    core_fired = {k: m for k, m in fired.items() if k in _core_rules(release)}
    what = f"Core {release} {r['outcome']}" + (f" ({r['exc_type']}: {r['message']})" if r["exc_type"] else "")
    if r["outcome"] == core_check.NOT_A_FIELD:
        missing = {f.strip() for f in (r["message"] or "").split("field", 1)[-1].split(",")}
        if any(rule in fired and missing & keys for rule, keys in KEY_ABSENT_RULES.items()):
            return "agree-absent", None
        if r["kind"] == "bad" and r["rule"] in _core_rules(release):
            return "disagree", f"{what}: {r['rule']} is listed for {release} but its case names a key it lacks"
        return "n/a", None
    if r["outcome"] == core_check.REJECTED:
        if not core_fired:
            return "disagree", f"{what}, but no rule Core checks in {release} fires (engine: {sorted(fired) or 'nothing'})"
        if not any(says(k, m, r["exc_type"], r["message"]) for k, m in core_fired.items()):
            if (release, r["id"]) in MESSAGE_DIFFERS:
                return "agree", None
            return "disagree", f"message: {what}, but the engine says {core_fired}"
    elif core_fired:
        return "disagree", f"{what}, but the engine blocks it with {sorted(core_fired)}"
    if r["kind"] == "bad" and r["rule"] in _core_rules(release) and r["rule"] not in core_fired:
        return "disagree", f"the engine does not fire {r['rule']} on its own bad case for {release}"
    return "agree", None


def disagreements(data: dict[str, Any]) -> dict[tuple[str, str], str]:
    out = {}
    for release, rel in data["releases"].items():
        for r in rel["records"]:
            verdict, problem = judge(release, r)
            if problem:
                out[(release, r["id"])] = problem
    return out


def assert_agreement(data: dict[str, Any]) -> None:
    problems = disagreements(data)
    assert {k: v for k, v in problems.items() if k not in KNOWN_DISAGREEMENTS} == {}
    assert {k for k in KNOWN_DISAGREEMENTS if k not in problems} == set(), "fixed: remove from KNOWN_DISAGREEMENTS"


def test_core_rules_are_rules_and_releases_are_known():
    ids = {r.id for r in catalogue.PREFLIGHT}
    assert set(CORE_RULES) <= ids and set(KEY_ABSENT_RULES) <= ids
    assert all(set(where) <= set(RELEASES) for where in CORE_RULES.values())


# --------------------------------------------------------------------------------------------------
# LIVE


def core_cases() -> list[dict[str, Any]]:
    out = []
    for c in cases():
        out.append({**c, "settings": {**CORE_CONTEXT.get(c["rule"], {}), **c["settings"]}})
    return out


def run_live(python: str, releases_dir: Path) -> dict[str, Any]:
    all_cases = core_cases()
    cells = [core_check.cell_from_settings(c["id"], c["settings"], c["env"], te_version=c["te_version"])
             for c in all_cases]
    out: dict[str, Any] = {"about": "Megatron Core TransformerConfig(**model settings) per release, no GPU, no TE "
                                    "(tests/constraints/test_preflight_releases.py, "
                                    "graphsweep/workloads/core_check.py)",
                           "base_model": core_check.BASE_MODEL, "releases": {}}
    for release in RELEASES:
        report = core_check.validate_cells(cells, python, releases_dir / release)
        got = report.by_id()
        records = [{"id": c["id"], "rule": c["rule"], "kind": c["kind"], **_inputs(c),
                    "outcome": got[c["id"]].outcome, "exc_type": got[c["id"]].exc_type,
                    "message": got[c["id"]].message} for c in all_cases]
        out["releases"][release] = {"version": report.version, "python": report.python, "torch": report.torch,
                                    "records": records}
    return out


@pytest.mark.megatron
@pytest.mark.slow
@pytest.mark.skipif(not (_env("GRAPHSWEEP_CORE_RELEASES") and _env("GRAPHSWEEP_MEGATRON_PYTHON")),
                    reason="GRAPHSWEEP_CORE_RELEASES / GRAPHSWEEP_MEGATRON_PYTHON not set (tools/core-releases.sh)")
def test_live_each_core_release_agrees_with_the_rule_engine():
    data = run_live(_env("GRAPHSWEEP_MEGATRON_PYTHON"), Path(_env("GRAPHSWEEP_CORE_RELEASES")))
    FIXTURE.write_text(json.dumps(data, indent=1) + "\n")
    assert {r: d["version"] for r, d in data["releases"].items()} == {r: r for r in RELEASES}
    for release, d in data["releases"].items():
        _log_live_count("core", release, len(d["records"]))
    assert_agreement(data)


# --------------------------------------------------------------------------------------------------
# RECORDED


def _recorded() -> dict[str, Any]:
    if not FIXTURE.exists():
        pytest.fail(f"{FIXTURE} is missing: record it with the live test (see this file's docstring)")
    return json.loads(FIXTURE.read_text())


def test_recorded_releases_are_the_three_and_cover_every_case():
    data = _recorded()
    assert {r: d["version"] for r, d in data["releases"].items()} == {r: r for r in RELEASES}
    for release, d in data["releases"].items():
        recorded = {r["id"]: r for r in d["records"]}
        stale = [c["id"] for c in core_cases() if c["id"] not in recorded
                 or {k: recorded[c["id"]].get(k) for k in _inputs(c)} != _inputs(c)]
        assert not stale, f"{release}: cases changed since the recording: {stale}; re-record (docstring)"


def test_recorded_core_verdicts_agree_with_the_rule_engine_per_release():
    assert_agreement(_recorded())


def test_recorded_core_rules_refuse_their_bad_case_with_their_message():
    # the strong direction: each rule Core checks in a release raised there, with the rule's message
    data = _recorded()
    for release, d in data["releases"].items():
        recorded = {r["id"]: r for r in d["records"]}
        for rule in sorted(_core_rules(release)):
            bad, good = recorded[f"{rule}/bad"], recorded[f"{rule}/good"]
            assert bad["outcome"] == core_check.REJECTED, (release, rule, bad["outcome"], bad["message"])
            ours = {v.rule: v.message for v in engine(bad, mcore=release)}[rule]
            assert says(rule, ours, bad["exc_type"], bad["message"]), (release, rule, ours, bad["message"])
            # a good case written for the newest API may be refused by an older Core: then the engine agrees
            assert judge(release, good)[0] != "disagree", (release, rule, good["message"])
            if release == RELEASES[-1]:
                assert good["outcome"] == core_check.OK, (release, rule, good["message"])


def test_the_api_boundary_is_0_18_in_core_s_own_code():
    # what issue 22 found: 0.18 already has cuda_graph_modules and the full_iteration impl, 0.17.1 has neither
    data = _recorded()["releases"]

    def outcome(release: str, case_id: str) -> str:
        return next(r["outcome"] for r in data[release]["records"] if r["id"] == case_id)

    assert outcome("0.17.1", "cuda_graph_modules_before_0_18/bad") == core_check.NOT_A_FIELD
    assert outcome("0.18.2", "cuda_graph_modules_before_0_18/bad") == core_check.OK
    assert outcome("0.17.1", "full_iteration_exclusive/good") in (core_check.REJECTED, core_check.NOT_A_FIELD)
    assert outcome("0.18.2", "full_iteration_exclusive/good") == core_check.OK
    assert outcome("0.18.2", "cpu_offloading/good") == core_check.OK  # full_iteration impl + CPU offloading
    assert outcome("0.17.1", "cpu_offloading/good-local-full-iteration") == core_check.REJECTED


def truth_table(data: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """rule -> release -> what its cases showed: 'agree' (Core checks it and agrees), 'not Core's' (Core accepts
    both cases, the rule is Bridge's / run time / ours), 'n/a' (a key the release lacks), 'DISAGREE'."""
    rows = []
    for rule in [r.id for r in catalogue.PREFLIGHT]:
        row = {}
        for release, d in data["releases"].items():
            verdicts = {judge(release, r)[0] for r in d["records"] if r["rule"] == rule}
            if "disagree" in verdicts:
                row[release] = "DISAGREE"
            elif rule in _core_rules(release):
                row[release] = "agree (Core checks it)"
            elif "agree-absent" in verdicts:
                row[release] = "agree (key absent)"
            elif verdicts <= {"n/a"}:
                row[release] = "n/a (key absent)"
            else:
                row[release] = "not Core's; agrees" if "n/a" not in verdicts else "not Core's; agrees (some n/a)"
        rows.append((rule, row))
    return rows


def test_truth_table_has_every_rule_and_no_disagreement():
    rows = truth_table(_recorded())
    assert [r for r, _ in rows] == [c.id for c in catalogue.PREFLIGHT]
    assert not [(rule, rel) for rule, row in rows for rel, v in row.items() if v == "DISAGREE"]


def test_docs_table_is_the_truth_table_tool_output():
    import importlib.util

    spec = importlib.util.spec_from_file_location("truth_table", ROOT / "tools" / "truth_table.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    doc = (ROOT / "docs" / "megatron.md").read_text()
    shown = doc.split("<!-- truth-table:start -->\n", 1)[1].split("<!-- truth-table:end -->", 1)[0]
    assert shown == tool.table(), "docs/megatron.md: paste the output of .venv/bin/python tools/truth_table.py"


def test_ci_fails_when_a_built_check_ran_no_case(tmp_path):
    import subprocess
    import sys

    log = tmp_path / "live.log"
    log.write_text(json.dumps({"check": "bridge", "release": "Bridge 0.6.2 / Core 0.19.2", "cases": 98}) + "\n"
                   + json.dumps({"check": "core", "release": "0.17.1", "cases": 100}) + "\n")

    def ci(*expected: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "tools" / "live_checks.py"), str(log), *expected],
                              capture_output=True, text=True)

    ok = ci("bridge", "core:0.17.1")
    assert ok.returncode == 0 and "Bridge 0.6.2 / Core 0.19.2: 98 cases" in ok.stdout
    assert "Megatron Core 0.17.1 TransformerConfig: 100 cases" in ok.stdout
    missing = ci("bridge", "core:0.17.1", "core:0.18.2")
    assert missing.returncode == 1 and "core:0.18.2" in missing.stderr
    assert ci().returncode == 0  # nothing buildable here: nothing expected, said so
