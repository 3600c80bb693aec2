"""What each cell's graph runs held, in the report's words (comparison.parquet `graphs_captured`)."""

from __future__ import annotations

from typing import Any

from graphsweep.report.data import as_number, is_control

GRAPHS_TITLE = ("CUDA graphs the cell's graph runs captured (graphed layers for TE scopes, 1 for a full-iteration "
                "graph, +1 for the optimizer's), the fewest of its runs; 0: it trained eager")


def graphs_held(row: Any) -> str:
    """'8', '0' or '' (an A/A cell, or no graph run said)."""
    n = as_number(row.get("graphs_captured"))
    return "" if n is None or is_control(row) else str(int(n))
