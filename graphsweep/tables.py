"""Parquet tables: one place for each file's key columns, its schema version and how it is written.

Every file carries `graphsweep.schema_version` and `graphsweep.table` in its Parquet metadata, so a reader
years later knows what it holds (docs/tables.md documents the columns).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from graphsweep import __version__

SCHEMA_VERSION = 1

# Columns every row of a table has (axis columns and extra fields come after these).
PLAN_COLUMNS = [
    "sweep", "run_id", "shape_id", "cell_id", "arm", "variant", "impl", "scope", "repeat", "warmup", "iterations",
    "gpus", "workload", "status", "rule_id", "rule_message", "rule_source", "command", "est_gpu_seconds",
]  # fmt: skip
COMPARISON_COLUMNS = [
    "sweep", "cell_id", "shape_id", "variant", "impl", "scope", "verdict", "reason", "eager_step_ms", "graph_step_ms",
    "speedup", "ci_low", "ci_high", "p_value", "q_value", "ci_method", "n_eager", "n_graph", "eager_peak_mem_gb",
    "graph_peak_mem_gb", "mem_delta_gb", "paired_outcome", "rule_id", "eager_run_id", "graph_run_id",
    "eager_run_ids", "graph_run_ids", "gpu_seconds",
]  # fmt: skip


class SchemaVersionError(RuntimeError):
    pass


def write_table(df: pd.DataFrame, path: str | Path, table: str, extra: dict[str, Any] | None = None) -> None:
    """Write df as Parquet with graphsweep metadata; atomically (a killed controller leaves no half file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrow = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(arrow.schema.metadata or {})
    meta[b"graphsweep.schema_version"] = str(SCHEMA_VERSION).encode()
    meta[b"graphsweep.table"] = table.encode()
    meta[b"graphsweep.version"] = __version__.encode()
    if extra:
        meta[b"graphsweep.extra"] = json.dumps(extra, default=str).encode()
    arrow = arrow.replace_schema_metadata(meta)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(arrow, tmp)
    tmp.replace(path)


def read_table(path: str | Path, table: str | None = None) -> pd.DataFrame:
    """Read a graphsweep Parquet file, refusing versions this code cannot read with a message that says what to do."""
    meta = pq.read_schema(path).metadata or {}
    version = int(meta.get(b"graphsweep.schema_version", b"0"))
    kind = meta.get(b"graphsweep.table", b"").decode()
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path}: written with table schema version {version}, this graphsweep reads up to {SCHEMA_VERSION}; "
            "upgrade graphsweep (pip install -U graphsweep) to read it"
        )
    if table and kind and kind != table:
        raise SchemaVersionError(f"{path}: holds the '{kind}' table, expected '{table}'")
    return pd.read_parquet(path)
