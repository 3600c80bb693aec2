"""graphsweep catalog OUT --results results --archives A.tar.gz...: one hive-partitioned folder for all sweeps."""

from __future__ import annotations

import argparse
from pathlib import Path

from graphsweep.commands import fail, output_dir_problem
from graphsweep.store import catalog

NAME = "catalog"
HELP = "gather the tables of many sweeps and archives into one hive-partitioned folder (one DuckDB query spans all)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="catalog folder (created)")
    p.add_argument("--results", nargs="*", default=[], help="results roots (each holds {sweep}/ folders and archives)")
    p.add_argument("--archives", nargs="*", default=[], help="more archive files (*.tar.gz)")


def run(args: argparse.Namespace) -> int:
    if not args.results and not args.archives:
        return fail(NAME, "nothing to catalog: give --results ROOT (e.g. results) and/or --archives FILE...")
    for root in args.results:
        if not Path(root).is_dir():
            return fail(NAME, f"--results {root}: " + ("not a folder" if Path(root).exists() else "no such folder"))
    for archive in args.archives:
        if not Path(archive).is_file():
            return fail(NAME, f"--archives {archive}: " + ("not a file" if Path(archive).exists() else "no such file"))
    if problem := output_dir_problem(args.out):
        return fail(NAME, problem)
    return catalog.main([args.out, "--results", *args.results, "--archives", *args.archives])
