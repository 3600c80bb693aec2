"""What each cell's graph runs held (comparison.parquet `graphs_captured`): the report's `graphs` column."""

from __future__ import annotations

from typing import Any

from graphsweep.report.data import as_number, is_control


def graphs_held(row: Any) -> str:
    """'8', '0' or '' (an A/A cell, or no graph run said)."""
    n = as_number(row.get("graphs_captured"))
    return "" if n is None or is_control(row) else str(int(n))
