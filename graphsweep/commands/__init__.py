"""The `graphsweep` subcommands, one module each."""

from __future__ import annotations

import sys
import math
from typing import Any

from rich.console import Console
from rich.text import Text

# Wide enough that a log path with its line number, or a Megatron message, stays on one line.
PIPE_WIDTH = 200


def plain(value: Any) -> Text:
    """User text (a spec value, a command, a Megatron message) as rich Text: never interpreted as markup, so
    `[attn]` stays `[attn]` and `[/b]` cannot break a table. Missing values (None, NaN) print as nothing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Text("")
    return Text(str(value))


def console(stderr: bool = False) -> Console:
    """A rich console: the terminal's width on a terminal, PIPE_WIDTH when piped or captured.

    Rich falls back to 80 columns without a terminal and folds long cells, which splits
    `…/invalid_full.log:40` across lines and breaks `grep` on the output.
    """
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, width=max(160, Console(stderr=stderr).width))
    return Console(stderr=stderr, width=PIPE_WIDTH)
