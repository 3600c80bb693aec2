"""Many sweeps, one table: every committed sweep's tables (results/examples/*) read as one table by pandas, DuckDB
and polars without relaxing a type (store/schema.py gives every column one type in every sweep), with times as
times and lists as lists; and a version 4 file (types as pandas guessed them) reads as the current version."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphsweep.store import schema
from graphsweep.store.tables import PLAN_COLUMNS, SCHEMA_VERSION, read_table, table_info
from tests.support import ROOT

SWEEPS = sorted(p for p in (ROOT / "results" / "examples").iterdir() if (p / "comparison.parquet").is_file())
TABLES = ("plan", "runs", "iterations", "comparison")


def _files(table: str) -> list[Path]:
    return [s / f"{table}.parquet" for s in SWEEPS]


def test_there_are_several_committed_sweeps():
    assert len(SWEEPS) >= 4, SWEEPS


@pytest.mark.parametrize("table", TABLES)
def test_every_committed_sweep_is_written_with_the_current_schema(table):
    assert {str(f): table_info(f)["schema_version"] for f in _files(table)} == {
        str(f): SCHEMA_VERSION for f in _files(table)}


@pytest.mark.parametrize("table", TABLES)
def test_polars_stacks_every_sweep_without_relaxing(table):
    frames = [pl.read_parquet(f) for f in _files(table)]
    stacked = pl.concat(frames, how="diagonal")  # not diagonal_relaxed: a column of two types raises here
    assert stacked.height == sum(f.height for f in frames)
    assert not [c for c, t in stacked.schema.items() if t == pl.Null], "a column of Parquet's null type"


@pytest.mark.parametrize("table", TABLES)
def test_duckdb_reads_every_sweep_as_one_table_with_one_type_per_column(table):
    files = [str(f) for f in _files(table)]
    con = duckdb.connect()
    n = con.execute(f"select count(*) from read_parquet({files}, union_by_name = true)").fetchone()[0]
    assert n == sum(pq.read_metadata(f).num_rows for f in files)
    types: dict[str, set[str]] = {}
    for f in files:
        for name, typ, *_ in con.execute(f"describe select * from read_parquet('{f}')").fetchall():
            types.setdefault(name, set()).add(typ)
    assert {c: t for c, t in types.items() if len(t) > 1} == {}
    assert not [c for c, t in types.items() if "NULL" in t]


@pytest.mark.parametrize("table", TABLES)
def test_pandas_reads_every_sweep_with_the_declared_types(table):
    frames = [read_table(f, table) for f in _files(table)]
    stacked = pd.concat(frames, ignore_index=True)
    assert len(stacked) == sum(len(f) for f in frames)
    for f in _files(table):
        got = {fld.name: fld.type for fld in pq.read_schema(f)}
        declared = {c: schema.declared_type(table, c) for c in got}
        assert {c: str(t) for c, t in got.items() if declared[c] is not None and t != declared[c]} == {}, f


def test_times_are_times_and_lists_are_lists():
    runs = pl.concat([pl.read_parquet(f) for f in _files("runs")], how="diagonal")
    assert runs.schema["start_utc"] == pl.Datetime("us", "UTC") and runs.schema["end_utc"] == pl.Datetime("us", "UTC")
    assert runs["start_utc"].null_count() == 0 and (runs["end_utc"] >= runs["start_utc"]).all()
    assert runs.schema["files"] == pl.List(pl.String) and runs["files"].list.len().min() >= 1
    plan = pl.concat([pl.read_parquet(f) for f in _files("plan")], how="diagonal")
    overrides = plan.filter(pl.col("arm") == "graph")["graph_overrides"]
    assert overrides.struct.field("paste").list.len().min() >= 1  # a graph run's words to paste


def test_every_column_of_the_committed_sweeps_is_declared_or_an_axis():
    for sweep in SWEEPS:
        axes = [c for c in pq.read_schema(sweep / "plan.parquet").names if c not in PLAN_COLUMNS]
        for table in TABLES:
            names = pq.read_schema(sweep / f"{table}.parquet").names
            undeclared = [c for c in names if schema.declared_type(table, c) is None and c not in axes]
            assert undeclared == [], (sweep.name, table)


def _version_4(df: pd.DataFrame, path: Path, table: str) -> None:
    """A file as version 4 wrote it: pandas' own types, JSON text for records, times as text."""
    arrow = pa.Table.from_pandas(df, preserve_index=False)
    meta = {**(arrow.schema.metadata or {}), b"graphsweep.schema_version": b"4", b"graphsweep.table": table.encode()}
    pq.write_table(arrow.replace_schema_metadata(meta), path)


def test_a_version_4_runs_file_reads_as_the_current_version(tmp_path):
    path = tmp_path / "runs.parquet"
    _version_4(pd.DataFrame({
        "run_id": ["a", "b"], "cell_id": ["a", "b"], "shape_id": ["s", "s"], "arm": ["eager", "graph"],
        "variant": ["eager", "g"], "outcome": ["completed", "completed"],
        "start_utc": ["2026-12-01T20:42:15+00:00", None], "files": ['["a/log.txt"]', "[]"],
        "graph_overrides": [None, json.dumps({"what": "trainer flags", "paste": ["--variant", "x"], "shared": []})],
        "rule_id": [None, None], "steady_first": [5.0, None]}), path, "runs")  # fmt: skip
    df = read_table(path, "runs")
    assert str(df["start_utc"].dtype).startswith("datetime64") and df["start_utc"].iloc[0].hour == 20
    assert list(df["files"].iloc[0]) == ["a/log.txt"] and list(df["files"].iloc[1]) == []
    assert df["graph_overrides"].iloc[0] is None and list(df["graph_overrides"].iloc[1]["paste"]) == ["--variant", "x"]
    assert df["steady_first"].iloc[0] == 5


# docs/tables.md "Reading the tables in pandas": the reading it documents, and what each Parquet type becomes
DOCUMENTED_READ = 'pd.read_parquet("results/default/comparison.parquet", dtype_backend="numpy_nullable")'
NULLABLE = {"int64": "Int64", "bool": "boolean", "double": "Float64", "string": "string",
            "timestamp[us, tz=UTC]": "datetime64[us, UTC]"}


def test_docs_show_the_reading_that_keeps_the_types():
    assert DOCUMENTED_READ in (ROOT / "docs" / "tables.md").read_text()


@pytest.mark.parametrize("table", TABLES)
def test_pandas_nullable_reading_keeps_every_int_and_bool_column_of_every_sweep(table):
    lost = []  # columns plain read_parquet turns into float64 or object
    for f in _files(table):
        df = pd.read_parquet(f, dtype_backend="numpy_nullable")
        want = {fld.name: NULLABLE.get(str(fld.type), "object") for fld in pq.read_schema(f)}
        assert {c: str(df[c].dtype) for c in df.columns} == want, f
        plain = pd.read_parquet(f)
        lost += [c for c, t in want.items() if t in ("Int64", "boolean") and str(plain[c].dtype) != t.lower()]
    stacked = pd.concat([pd.read_parquet(f, dtype_backend="numpy_nullable") for f in _files(table)], ignore_index=True)
    assert not [c for c in stacked.columns if str(stacked[c].dtype) in ("float64", "Float64") and c in lost]
    if table in ("runs", "comparison"):  # what the docs warn of: plain reading loses them where a value is empty
        assert lost, "plain read_parquet kept every int and bool: the docs' warning is out of date"


def test_nullable_reading_keeps_an_empty_int_empty_and_the_rest_exact():
    f = next(s / "comparison.parquet" for s in SWEEPS if s.name == "megatron-tiny-moe")
    arrow = pq.read_table(f)  # its failed cell leaves these empty
    df = pd.read_parquet(f, dtype_backend="numpy_nullable")
    for name in ("n_eager", "loss_iteration", "thin"):
        want = arrow.column(name).to_pylist()
        assert None in want, name
        assert [None if v is pd.NA else v for v in df[name].tolist()] == want, name
