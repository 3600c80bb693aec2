"""graphsweep catalog OUT --results results --archives A.tar.gz...: one hive-partitioned folder for all sweeps."""

from __future__ import annotations

import argparse

from graphsweep.store import catalog

NAME = "catalog"
HELP = "gather the tables of many sweeps and archives into one hive-partitioned folder (one DuckDB query spans all)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="catalog folder (created)")
    p.add_argument("--results", nargs="*", default=[], help="results roots (each holds {sweep}/ folders and archives)")
    p.add_argument("--archives", nargs="*", default=[], help="more archive files (*.tar.gz)")


def run(args: argparse.Namespace) -> int:
    return catalog.main([args.out, "--results", *args.results, "--archives", *args.archives])
