"""The `graphsweep` command: one sub-command per module in graphsweep.commands."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`.
COMMANDS = [
    "check_spec",
    "check",
    "plan",
    "parse",
    "compare",
    "status",
    "more_repeats",
    "verify_archive",
    "ingest",
    "catalog",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphsweep", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for module_name in COMMANDS:
        try:
            module = importlib.import_module(f"graphsweep.commands.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"graphsweep.commands.{module_name}":
                continue  # command not built (yet)
            raise
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    args = parser.parse_args(argv)
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
