"""graphsweep verify-archive FILE...: check sweep archives (sha256 of every file, manifest, spec hash, schema)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from graphsweep.commands import fail, say
from graphsweep.store.archive import verify_archive

NAME = "verify-archive"
HELP = "check a sweep archive (results/{sweep}/archive/*.tar.gz): every file against manifest.json's sha256"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="archive(s) written by `snakemake archive`")
    p.add_argument("--json", action="store_true", help="print one JSON object per archive")


def run(args: argparse.Namespace) -> int:
    for path in args.files:  # a mistyped path is bad input (exit 2), not a failed archive (exit 1)
        if not Path(path).is_file():
            return fail(NAME, f"{path}: " + ("not a file" if Path(path).exists() else "no such file"))
    bad = 0
    for path in args.files:
        v = verify_archive(path)
        bad += not v.ok
        man = v.manifest
        if args.json:
            print(json.dumps({"path": path, "ok": v.ok, "files_checked": v.checked, "problems": v.problems,
                              "sweep": man.get("sweep"), "created_utc": man.get("created_utc"),
                              "pipeline": man.get("pipeline"), "spec_hash": (man.get("spec") or {}).get("hash")}))
            continue
        # a member's name, the file's and the manifest's texts are anyone's: shown with control characters spelled
        if v.ok:
            pipe = man.get("pipeline") or {}
            sha = (pipe.get("git_sha") or "")[:10] + (" dirty" if pipe.get("git_dirty") else "")
            logs = "in" if man.get("logs_included") else "left out"
            say(f"OK {path}: sweep {man.get('sweep')}, {v.checked} files verified, created {man.get('created_utc')}, "
                f"graphsweep {pipe.get('version')} {sha}".rstrip() + f", logs {logs}")
        else:
            say(f"FAILED {path}:")
            for problem in v.problems:
                say(f"  - {problem}")
    return 1 if bad else 0
