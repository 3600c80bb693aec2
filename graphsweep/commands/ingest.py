"""graphsweep ingest SPEC [--results DIR]: runs, comparison and report from logs that already exist; submits nothing.

The workflow itself does it (Snakemake with rules/ingest.smk standing in for the run rule), so an ingested sweep is
parsed, judged, reported and archived exactly like a submitted one. The spec and its logs are checked first: a
problem is one line and exit 2, before Snakemake starts.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from graphsweep import resources
from graphsweep.commands import say
from graphsweep.run.ingest import IngestError, match_files, unseeded_note
from graphsweep.sweepspec.load import load_spec
from graphsweep.records import SpecError

NAME = "ingest"
HELP = "build runs/iterations/comparison/report from existing logs (spec with a source block); nothing is submitted"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec with source: {logs: DIR, pattern: REGEX}")
    p.add_argument("--results", default="results", help="results root (default results)")
    p.add_argument("--cores", type=int, default=1, help="Snakemake cores (default 1)")


def run(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec)
        if not spec.is_ingest:
            raise IngestError(f"{args.spec}: no source block: nothing to ingest (graphsweep ingest needs source.logs)")
        logmap = match_files(spec)
        repo = resources.workflow_dir()  # where the Snakefile is
    except (SpecError, IngestError, resources.WorkflowMissing) as exc:
        say(f"graphsweep ingest: {exc}", err=True)
        return 2
    if note := unseeded_note(logmap, args.spec):  # never silent: the report would show unverified speedups
        say(f"graphsweep ingest: warning: {note}", err=True)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--directory", str(repo),
           "--cores", str(args.cores), "--config", f"spec={Path(args.spec).resolve()}",
           f"results={Path(args.results).resolve()}"]
    return subprocess.call(cmd)
