"""The `graphsweep` subcommands, one module each."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import yaml
from rich.console import Console
from rich.text import Text

from graphsweep import resources
from graphsweep.smk import unwritable
from graphsweep.textsafe import for_terminal

# Wide enough that a log path with its line number, or a Megatron message, stays on one line.
PIPE_WIDTH = 200


def plain(value: Any) -> Text:
    """User text (a spec value, a command, a Megatron message) as rich Text: never interpreted as markup, so
    `[attn]` stays `[attn]` and `[/b]` cannot break a table, and its control characters spelled out (a log line's
    escape sequence would recolour or retitle the terminal). Missing values (None, NaN) print as nothing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Text("")
    return Text(for_terminal(str(value)))


@contextlib.contextmanager
def broken_pipe_quiet() -> Iterator[None]:
    """Output piped into `head` (or any reader that stops early): end quietly, as `cat | head` does.

    Python's own advice (docs: signal, "Note on SIGPIPE"): point stdout at /dev/null so the flush at exit cannot
    raise again, and leave with status 141 (128 + SIGPIPE), as a shell tool killed by SIGPIPE does."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(141) from None


def cluster_choices() -> list[str]:
    """The workflow's `cluster` setting's values (its config schema), for a command that plans as the workflow does."""
    schema = yaml.safe_load(resources.read_text(resources.CONFIG_SCHEMA))
    return list(schema["properties"]["cluster"]["enum"])


def say(line: Any, err: bool = False) -> None:
    """One line of a command's plain output (a file's or a member's name, a log line, a spec value in it), its control
    characters spelled out (`\x1b`): an escape sequence in a name would recolour, move or retitle the terminal."""
    print(for_terminal(str(line)), file=sys.stderr if err else sys.stdout)


def fail(command: str, message: str) -> int:
    """A command-line input graphsweep cannot use: one plain line on stderr, exit status 2."""
    print(f"graphsweep {command}: {for_terminal(' '.join(str(message).split()))}", file=sys.stderr)
    return 2


def _blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of path when it is a file (then nothing below it can be made)."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def output_file_problem(path: str | Path) -> str | None:
    """Why a file cannot be written at path (a folder is there, or a file stands where a folder must be)."""
    p = Path(path)
    if p.is_dir():
        return f"output {p} is a folder; give a file name"
    if blocker := _blocking_file(p):
        return f"output {p}: {blocker} is a file, not a folder"
    if problem := unwritable(p.parent):  # tried, not guessed: root passes permission bits, /proc refuses anyway
        return f"output {p}: {problem}"
    return None


def output_dir_problem(path: str | Path) -> str | None:
    """Why a folder cannot be made at path (a file is there, or above it)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        return f"output folder {p} is a file"
    if blocker := _blocking_file(p):
        return f"output folder {p}: {blocker} is a file, not a folder"
    if problem := unwritable(p):
        return f"output folder {p}: {problem}"
    return None


def console(stderr: bool = False) -> Console:
    """A rich console: the terminal's width on a terminal, PIPE_WIDTH when piped or captured.

    Rich falls back to 80 columns without a terminal and folds long cells, which splits
    `…/invalid_full.log:40` across lines and breaks `grep` on the output. The stderr console never wraps: an error
    is one line, however long.
    """
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, width=max(160, Console(stderr=stderr).width), soft_wrap=stderr)
    return Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=stderr)
