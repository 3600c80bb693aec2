"""Small helpers for the scripts that Snakemake rules call."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def logging_to(path: str | Path) -> Iterator[None]:
    """Send this script's stdout and stderr to the rule's log file (the snakemake-workflows idiom)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as log:
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = log
        try:
            yield
        finally:
            sys.stdout, sys.stderr = old_out, old_err
