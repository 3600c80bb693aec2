"""graphsweep ingest SPEC [--results DIR]: runs, comparison and report from logs that already exist; submits nothing."""

from __future__ import annotations

import argparse
import sys

from graphsweep.ingest import IngestError, ingest
from graphsweep.spec import SpecError

NAME = "ingest"
HELP = "build runs/iterations/comparison/report from existing logs (spec with a source block); nothing is submitted"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec with source: {logs: DIR, pattern: REGEX}")
    p.add_argument("--results", default="results", help="results root (default results)")


def run(args: argparse.Namespace) -> int:
    try:
        ingest(args.spec, args.results)
    except (SpecError, IngestError) as exc:
        print(f"graphsweep ingest: {exc}", file=sys.stderr)
        return 2
    return 0
