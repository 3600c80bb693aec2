#!/usr/bin/env python3
"""How many live truth checks ran against each release in this CI run, and whether every expected one ran.

    python3 tools/live_checks.py LOG [bridge] [core:0.17.1 ...]

LOG holds the JSON lines the live tests append (GRAPHSWEEP_LIVE_CHECK_LOG: tests/constraints/test_bridge_agreement.py
and tests/constraints/test_preflight_releases.py, one line per release validated). The rest names what .ci/run built and
so expects to have run: ``bridge`` (the Megatron Bridge venv) and ``core:<version>`` (a Core release directory). Prints
one line per release with its case count; exits 1 when an expected check ran no case (built, yet its test skipped or was
deselected), 0 otherwise. Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def counts(log: Path) -> dict[str, int]:
    """`bridge` / `core:<version>` -> cases validated live (summed over lines)."""
    out: dict[str, int] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        if line.strip():
            rec = json.loads(line)
            key = "bridge" if rec["check"] == "bridge" else f"core:{rec['release']}"
            out[key] = out.get(key, 0) + int(rec["cases"])
            if rec["check"] == "bridge":
                out["bridge-label"] = rec["release"]  # type: ignore[assignment]
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    got = counts(Path(argv[0]))
    expected = argv[1:]
    label = got.pop("bridge-label", "Megatron Bridge")
    print("live truth checks run in this CI run (cases validated by Megatron's own code):")
    for key in sorted(set(got) | set(expected)):
        name = label if key == "bridge" else f"Megatron Core {key.split(':', 1)[1]} TransformerConfig"
        note = "" if key in expected else " (not expected: built outside this run)"
        print(f"  {name}: {got.get(key, 0)} cases{note}")
    if not expected:
        print("  none expected: this machine could build neither the Bridge venv nor the Core releases")
    missing = [k for k in expected if got.get(k, 0) == 0]
    if missing:
        print(f"::error:: built but no live truth check ran for {', '.join(missing)}: the tests marked megatron "
              "skipped or were deselected", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
