"""Record the measuring-harness digest (harness.HARNESS) in run.json files written before graphsweep collected it,
from git: the harness's files at the graphsweep commit each run recorded. Only a run whose checkout was clean
(git_dirty false) gets one: a dirty checkout's files are not in any commit. Writes nothing it cannot derive.

    .venv/bin/python tools/backfill_harness.py results/examples/megatron-moe-128e-paired
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from graphsweep import harness

ROOT = Path(__file__).resolve().parents[1]


def harness_at(sha: str) -> str:
    """The harness digest of graphsweep at commit `sha` of this repository."""
    listing = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", sha, "graphsweep/"],
                             capture_output=True, text=True, check=True).stdout.split()
    rels = harness.harness_files(p.removeprefix("graphsweep/") for p in listing)
    files = {rel: subprocess.run(["git", "-C", str(ROOT), "show", f"{sha}:graphsweep/{rel}"], capture_output=True,
                                 check=True).stdout for rel in rels}
    return harness.harness_digest(files)


def main(sweep_dirs: list[str]) -> int:
    for sweep in sweep_dirs:
        for run_json in sorted(Path(sweep).glob("runs/*/run.json")):
            raw = run_json.read_text()
            record = json.loads(raw)
            indent = len(raw.splitlines()[1]) - len(raw.splitlines()[1].lstrip(" ")) if "\n" in raw.strip() else None
            gs = (record.get("provenance") or {}).get("graphsweep") or {}
            if gs.get("harness") or not gs.get("git_sha") or gs.get("git_dirty") is not False:
                print(f"{run_json}: left as it is ({'has one' if gs.get('harness') else 'no clean commit'})")
                continue
            gs["harness"] = harness_at(gs["git_sha"])
            run_json.write_text(json.dumps(record, indent=indent) + "\n")
            print(f"{run_json}: harness {gs['harness'][:12]} (graphsweep {gs['git_sha'][:7]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
