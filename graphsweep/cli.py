"""The `graphsweep` command: one sub-command per module in graphsweep.commands."""

from __future__ import annotations

import argparse
import sys

from graphsweep import __version__
from graphsweep.commands import (
    broken_pipe_quiet,
    catalog,
    check,
    check_spec,
    compare,
    ingest,
    more_repeats,
    parse,
    plan,
    status,
    verify_archive,
)

# Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`; this is the --help order.
COMMANDS = (check_spec, check, plan, parse, compare, status, more_repeats, verify_archive, ingest, catalog)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphsweep", description=__doc__)
    parser.add_argument("--version", action="version", version=f"graphsweep {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    args = parser.parse_args(argv)
    with broken_pipe_quiet():  # `graphsweep check --rules | head`: the reader left, no traceback
        return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
