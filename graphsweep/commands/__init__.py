"""The `graphsweep` subcommands, one module each."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

# Wide enough that a log path with its line number, or a Megatron message, stays on one line.
PIPE_WIDTH = 200


def console(stderr: bool = False) -> "Console":
    """A rich console: the terminal's width on a terminal, PIPE_WIDTH when piped or captured.

    Rich falls back to 80 columns without a terminal and folds long cells, which splits
    `…/invalid_full.log:40` across lines and breaks `grep` on the output.
    """
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, width=max(160, Console(stderr=stderr).width))
    return Console(stderr=stderr, width=PIPE_WIDTH)
