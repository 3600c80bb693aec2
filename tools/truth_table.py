#!/usr/bin/env python3
"""The rule x release table of docs/megatron.md, from the recorded truth checks (no Megatron needed):

    .venv/bin/python tools/truth_table.py

Columns: Megatron Core 0.17.1, 0.18.2, 0.19.2 (tests/fixtures/core_validator.json, each release's TransformerConfig)
and Bridge 0.6.2 / Core 0.19.2 (tests/fixtures/bridge_validator.json, runtime_config_update). The classification of
each rule is the tests' own (tests/constraints/test_preflight_releases.py, tests/constraints/test_bridge_agreement.py),
so the table says what those tests assert. tests/constraints/test_preflight_releases.py checks that docs/megatron.md
holds this output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.constraints import test_bridge_agreement as bridge  # noqa: E402
from tests.constraints import test_preflight_releases as releases  # noqa: E402


def bridge_column() -> dict[str, str]:
    data = json.loads(bridge.FIXTURE.read_text())
    problems = bridge.disagreements(data["records"])
    out = {}
    for rule in [r.id for r in bridge.catalogue.PREFLIGHT]:
        if any(k.startswith(f"{rule}/") and k not in bridge.MESSAGE_DIFFERS for k in problems):
            out[rule] = "DISAGREE"
        elif rule in bridge.REFUSED_FIRST_BY:
            out[rule] = f"agree (refused first by {bridge.REFUSED_FIRST_BY[rule]})"
        elif rule in bridge.CONFIG_TIME:
            out[rule] = "agree (checks it)" + (" (verdict only)" if f"{rule}/bad" in bridge.MESSAGE_DIFFERS else "")
        elif rule in bridge.NOT_AT_CONFIG_TIME:
            out[rule] = "not at config time; accepts both"
        else:
            out[rule] = "n/a (not comparable)"
    return out


def table() -> str:
    core = dict(releases.truth_table(json.loads(releases.FIXTURE.read_text())))
    br = bridge_column()
    head = ["rule", *[f"Core {r}" for r in releases.RELEASES], "Bridge 0.6.2 / Core 0.19.2"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rule, row in core.items():
        lines.append("| " + " | ".join([f"`{rule}`", *[row[r] for r in releases.RELEASES], br[rule]]) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table())
