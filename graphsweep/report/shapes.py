"""The sweep's shapes as the plan has them: the axes that tell them apart, whether they form a full grid, and what a
graph variant's command sets that its shape's eager command does not (the overrides a user pastes).

Reads plan.parquet only: the axis columns, and `graph_overrides`, which the workload that built each command
recorded (graphsweep/workloads); no command line is taken apart here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from graphsweep.records import GraphOverrides
from graphsweep.report.data import SweepTables


def fmt_value(v: Any) -> str:
    """An axis value as the reader typed it; '' for a value the shape does not set (None, NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (list, tuple, np.ndarray)):
        return "+".join(map(str, v))
    return str(v)


def shapes(t: SweepTables) -> pd.DataFrame:
    """One row per shape of the plan (its first run), in plan order."""
    if "shape_id" not in t.plan.columns:
        return t.plan.iloc[:0]
    return t.plan.drop_duplicates("shape_id").reset_index(drop=True)


def _keys(frame: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    return pd.DataFrame({a: frame[a].map(fmt_value) for a in axes}, index=frame.index)


def varying_axes(t: SweepTables) -> list[str]:
    """The axes whose value differs between the sweep's shapes (a shape that leaves an axis unset counts as a value)."""
    sh = shapes(t)
    return [a for a in t.axes if a in sh.columns and sh[a].map(fmt_value).nunique() > 1]


def full_grid(t: SweepTables, axes: list[str]) -> bool:
    """Whether the shapes are every combination of these axes' values (at least two axes): a grid, not a list."""
    sh = shapes(t)
    if len(axes) < 2 or not len(sh) or any(a not in sh.columns for a in axes):
        return False
    keys = _keys(sh, axes)
    return len(keys.drop_duplicates()) == len(sh) == math.prod(keys[a].nunique() for a in axes)


def shape_axes(t: SweepTables) -> list[str]:
    """The axes that name a shape in labels: the varying ones, or every set axis when the sweep has one shape."""
    varying = varying_axes(t)
    if varying:
        return varying
    sh = shapes(t)
    return [a for a in t.axes if a in sh.columns and sh[a].map(fmt_value).ne("").any()]


# --------------------------------------------------------------------------------------------------
# The overrides to paste
Overrides = GraphOverrides  # what a graph variant's command adds to its shape's eager command (records.GraphOverrides)


def graph_overrides(t: SweepTables, cell: pd.Series | dict[str, Any]) -> Overrides | None:
    """The settings a cell's graph runs add to its shape's eager runs, as the workload recorded them when it planned
    the commands (plan.parquet `graph_overrides`). None when the plan has no record for the cell: a plan written
    before the column existed (the report then points at the runs' config.yaml)."""
    plan = t.plan
    if not {"cell_id", "graph_overrides"} <= set(plan.columns):
        return None
    for record in plan.loc[plan.cell_id == cell.get("cell_id"), "graph_overrides"]:
        if found := GraphOverrides.from_record(record):
            return found
    return None
