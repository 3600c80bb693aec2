"""Parquet tables: one place for each file's key columns, its schema version and how it is written.

Every file carries `graphsweep.schema_version` and `graphsweep.table` in its Parquet metadata, so a reader
years later knows what it holds (docs/tables.md documents the columns).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from graphsweep import __version__, provenance
from graphsweep.fileio import replacing
from graphsweep.store import schema
from graphsweep.fileio import UnusableFile

# History (docs/tables.md): 1 = first release; 2 = runs gains the prov_* columns and prov_key, comparison gains
# not_comparable_fields and the verdict `not-comparable`; 3 = comparison judges with a resolution floor and margin
# p-values (p_beyond, p_within replace p_value; the interval's design, spreads, alpha; loss parity columns), runs
# gains elapsed_resolution_ms and seed; 4 = comparison judges loss parity on the trajectory (loss_level,
# loss_departed, loss_checked, loss_runs, loss_spread), gates decided verdicts on the sweep's BH q (family_gated),
# has the verdict `unverified` and the eager arm's launch-boundness (eager_gpu_busy_ms, gpu_busy_share,
# graph_ceiling); runs gains gpu_busy_ms, gpu_busy_share, graph_ceiling, gpu_busy_note and where its wall time
# went (RUN_TIME_COLUMNS); 5 = every column has its declared type (store/schema.py): start_utc and end_utc are
# timestamps, graph_overrides a struct, files, notes, segments and not_comparable_fields lists, no column is
# Parquet's `null` type; 6 = runs gains what each run trained and the work of its step (train_config,
# train_config_source, global_batch, seq_length, tokens_per_step: parse/work.py), comparison gains beyond_ceiling,
# crashed_run_ids and work_differences, and `not-comparable` covers arms that did different work, `failed` a graph run
# that crashed of its own cause, `invalid` a speedup beyond the GPU-busy ceiling; and the decision loop: plan (and
# runs) gains `look` (the look that first needs a run), comparison gains look, loop_status, loop_repeats,
# repeats_to_decide, gpu_hours_to_decide, its intervals are repeated confidence intervals and p_beyond the smallest
# repeated p-value over a cell's looks; 7 = runs gains prov_graphsweep_harness (the digest of graphsweep's measuring
# harness, harness.HARNESS, compared in place of the checkout's commit). Files without graphsweep metadata count
# as version 0.
SCHEMA_VERSION = 7

# Columns every row of a table has (axis columns and extra fields come after these); their types: store/schema.py.
PLAN_COLUMNS = list(schema.PLAN)
ITERATION_COLUMNS = [c for c in schema.ITERATIONS if c not in schema.PAIR_ITERATION]  # a pair job's arms add those
RUN_TIME_COLUMNS = list(schema.RUN_TIME)  # runs.parquet: where each run's wall time went (store/timeparts.py)
COMPARISON_COLUMNS = list(schema.COMPARISON)
# summary.json fields (graphsweep/parse/records.py RunSummary) that aggregate turns into other runs.parquet columns
# (prov_* with run.json's provenance, RUN_TIME_COLUMNS), never columns of their own
SUMMARY_NOT_COLUMNS = ("provenance_lines", "first_iteration_stamp", "last_iteration_stamp")


# What a file must hold to be read at all: checked for files without graphsweep metadata (version 0, e.g. written
# by pandas by hand or by a pre-release), whose table name the caller gives.
KEY_COLUMNS = {
    "plan": ["run_id", "cell_id", "shape_id", "arm", "variant"],
    "runs": ["run_id", "cell_id", "shape_id", "arm", "variant", "outcome"],
    "iterations": ["run_id", "iteration", "elapsed_ms"],
    "comparison": ["cell_id", "variant", "verdict"],
}


class SchemaVersionError(UnusableFile):
    """A table of a schema version or kind this graphsweep does not read."""


# How to get each table back when its file is damaged (UnusableFile.fix): every one is made from files upstream
REBUILD = {
    "plan": "delete it: the next snakemake writes it again from the spec",
    "runs": "delete it: the next snakemake gathers it again from the run folders (no job is submitted)",
    "iterations": "delete it: the next snakemake gathers it again from the run folders (no job is submitted)",
    "comparison": "delete it: the next snakemake judges the cells again from runs.parquet (no job is submitted)",
}


def _provenance_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The prov_* columns (and prov_key) of each row, derived from its `provenance` JSON (None where it has none)."""
    raw = df["provenance"] if "provenance" in df.columns else pd.Series([None] * len(df), index=df.index)
    flat = [provenance.flatten(json.loads(x) if isinstance(x, str) and x else None) for x in raw]
    return pd.DataFrame(flat, index=df.index, columns=[*provenance.COLUMNS, "prov_key"])


def _runs_v1_to_v2(df: pd.DataFrame) -> pd.DataFrame:
    """Version 1 kept provenance only as JSON: derive the prov_* columns from it."""
    if "prov_key" in df.columns:
        return df
    return pd.concat([df, _provenance_columns(df)], axis=1)


def _comparison_v1_to_v2(df: pd.DataFrame) -> pd.DataFrame:
    if "not_comparable_fields" not in df.columns:
        df = df.assign(not_comparable_fields=None)
    return df


def _comparison_v2_to_v3(df: pd.DataFrame) -> pd.DataFrame:
    """Version 2 tested ratio = 1 (p_value) with no resolution floor: its verdicts stay as they were judged; the
    version 3 columns read as unknown. Re-judge from the runs for version 3 figures (snakemake --forcerun compare)."""
    df = df.rename(columns={"eager_peak_mem_gb": "eager_mem_gb", "graph_peak_mem_gb": "graph_mem_gb"})
    if "eager_mem_gb" in df.columns:
        df = df.assign(mem_metric="peak_mem_gb")  # version 2 compared the whole-run peaks
    new = [c for c in COMPARISON_COLUMNS if c not in df.columns]
    return df.assign(**{c: None for c in new})


def _comparison_v3_to_v4(df: pd.DataFrame) -> pd.DataFrame:
    """Version 3 judged parity iteration by iteration and had no family gate: its verdicts stay as they were
    judged; the version 4 columns read as unknown (re-judge with snakemake --forcerun compare)."""
    new = [c for c in COMPARISON_COLUMNS if c not in df.columns]
    return df.assign(**{c: None for c in new})


def _to_v5(table: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """Version 4 wrote each column with the type pandas guessed: the same columns, read as their declared types."""
    return lambda df: schema.conform(df, table)


def _to_v6(table: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """Version 5 had no decision loop (every run was of the first look, every cell judged once) and no record of the
    work a run did, nor the version 6 verdict fields: its rows keep their verdicts (judged without them) and read the
    new columns as unknown (re-judge with snakemake --forcerun parse compare)."""
    def up(df: pd.DataFrame) -> pd.DataFrame:
        if table in ("plan", "runs") and "look" not in df.columns:
            df = df.assign(look=1)
        new = {"runs": schema.WORK, "comparison": schema.COMPARISON_V6}.get(table, {})
        df = df.assign(**{c: None for c in new if c not in df.columns})
        return schema.conform(df, table)
    return up


def _runs_v6_to_v7(df: pd.DataFrame) -> pd.DataFrame:
    """Version 6 did not record the harness digest as a column: read it from each run's provenance (runs recorded
    before graphsweep collected it have none, and are compared by commit, as they were)."""
    if "prov_graphsweep_harness" in df.columns:
        return df
    harness = _provenance_columns(df)["prov_graphsweep_harness"]
    return schema.conform(df.assign(prov_graphsweep_harness=harness), "runs")


# (table, from version) -> function that turns a frame of that version into the next version's.
UPGRADES: dict[tuple[str, int], Callable[[pd.DataFrame], pd.DataFrame]] = {
    ("runs", 1): _runs_v1_to_v2,
    ("comparison", 1): _comparison_v1_to_v2,
    ("comparison", 2): _comparison_v2_to_v3,
    ("comparison", 3): _comparison_v3_to_v4,
    **{(table, 4): _to_v5(table) for table in schema.TYPES},
    **{(table, 5): _to_v6(table) for table in schema.TYPES},
    ("runs", 6): _runs_v6_to_v7,
}


def _arrow_problem(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"not a readable Parquet file ({first})"


def table_info(path: str | Path, fix: str = "") -> dict[str, Any]:
    """The graphsweep metadata of a Parquet file: schema_version (0 if none), table, version, extra.

    UnusableFile when the file is missing, not Parquet (garbage, truncated, empty) or its metadata is not graphsweep's."""
    try:
        meta = pq.read_schema(path).metadata or {}
    except FileNotFoundError:
        raise UnusableFile(path, "missing", fix) from None
    except IsADirectoryError:
        raise UnusableFile(path, "is a folder, not a Parquet file", fix) from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise UnusableFile(path, _arrow_problem(exc), fix) from None
    extra = meta.get(b"graphsweep.extra")
    try:
        return {
            "schema_version": int(meta.get(b"graphsweep.schema_version", b"0")),
            "table": meta.get(b"graphsweep.table", b"").decode() or None,
            "graphsweep_version": meta.get(b"graphsweep.version", b"").decode() or None,
            "extra": json.loads(extra) if extra else None,
        }
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnusableFile(path, f"its graphsweep metadata is damaged ({exc})", fix) from None


def write_table(df: pd.DataFrame, path: str | Path, table: str, extra: dict[str, Any] | None = None) -> None:
    """Write df as Parquet with graphsweep metadata and its table's column types (store/schema.py); atomically (a
    killed controller leaves no half file)."""
    arrow = schema.to_arrow(df.reset_index(drop=True), table)
    meta = dict(arrow.schema.metadata or {})
    meta[b"graphsweep.schema_version"] = str(SCHEMA_VERSION).encode()
    meta[b"graphsweep.table"] = table.encode()
    meta[b"graphsweep.version"] = __version__.encode()
    if extra:
        meta[b"graphsweep.extra"] = json.dumps(extra, default=str).encode()
    arrow = arrow.replace_schema_metadata(meta)
    with replacing(path) as tmp:
        pq.write_table(arrow, tmp)


def read_table(path: str | Path, table: str | None = None, upgrade: bool = True, fix: str | None = None) -> pd.DataFrame:
    """Read a graphsweep Parquet file as the current schema version.

    Older versions are upgraded in memory (UPGRADES); a file without graphsweep metadata (version 0) is read when it
    has the table's key columns; anything else (not Parquet, another table, key columns missing) is UnusableFile with a
    message that names the file, what is wrong and what to do (`fix`, by default how the workflow rebuilds that table).
    """
    fix = REBUILD.get(table or "", "") if fix is None else fix
    info = table_info(path, fix)
    version, kind = info["schema_version"], info["table"] or ""
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(path, f"written with table schema version {version}, this graphsweep reads up to "
                                 f"{SCHEMA_VERSION}", "upgrade graphsweep (pip install -U graphsweep) to read it")
    if table and kind and kind != table:
        raise SchemaVersionError(path, f"holds the '{kind}' table, expected '{table}'", fix)
    try:
        df = pd.read_parquet(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise UnusableFile(path, _arrow_problem(exc), fix) from None
    kind = kind or table or ""
    if version == 0 and kind not in KEY_COLUMNS:
        raise SchemaVersionError(path, "no graphsweep metadata (schema version 0) and no table name to check it "
                                 f"against", f"call read_table(path, table=...) with one of {', '.join(KEY_COLUMNS)}")
    missing = [c for c in KEY_COLUMNS.get(kind, []) if c not in df.columns]
    if missing and version == 0:
        raise SchemaVersionError(
            path, f"no graphsweep metadata (schema version 0) and the '{kind}' columns {', '.join(missing)} are "
            f"missing, so it is not a graphsweep {kind} table", "rebuild it from the run folders (snakemake --forcerun "
            "aggregate compare) or, for logs from elsewhere, with an ingest spec (docs/tables.md)")
    if missing and len(df):  # an empty table (a run without iteration lines) may lack them
        raise UnusableFile(path, f"the '{kind}' table lacks its column(s) {', '.join(missing)}", fix)
    if version == 0:
        version = 1
    if upgrade:
        for v in range(version, SCHEMA_VERSION):
            step = UPGRADES.get((kind, v))
            if step is not None:
                df = step(df)
    return df
