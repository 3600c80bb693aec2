"""The Parquet type of every column of every table: one explicit pyarrow schema per table, so every sweep writes
the same types (a column empty in one sweep is still its type, not Parquet's `null`), timestamps are timestamps and
lists are lists, and pandas, DuckDB and polars read many sweeps as one table without relaxing types
(tests/store/test_tables_readers.py; docs/tables.md lists each column and its type).

Axis columns (one per key of the spec's `axes`) are the sweep's own: their type is their values' (int64, float64,
bool or string; never `null`). A column no table declares is written the same way, so a new field of summary.json
reaches runs.parquet at once; tests/store/test_tables_readers.py fails until it is declared here.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from graphsweep import provenance
from graphsweep.vocab import EAGER, GRAPH

S, I, F, B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
UTC = pa.timestamp("us", tz="UTC")  # ISO 8601 times in run.json (whole seconds there; microseconds lose nothing)
STRS = pa.list_(pa.string())
INTS = pa.list_(pa.int64())
SPANS = pa.list_(pa.list_(pa.float64()))  # [[first iteration, last iteration, value], ...]
# records.GraphOverrides: what a graph run's command sets that its shape's eager command does not
OVERRIDES = pa.struct([("what", S), ("paste", STRS), ("shared", STRS)])
JSON = pa.string()  # a nested record of open-ended keys, as JSON text (JSON_COLUMNS: why each is one)
# judge/work.py WorkDifference: a training-configuration key on which a cell's runs differ, each arm's values
WORK_DIFFERENCES = pa.list_(pa.struct([("key", S), (EAGER, STRS), (GRAPH, STRS)]))

PLAN: dict[str, pa.DataType] = {
    "sweep": S, "run_id": S, "shape_id": S, "cell_id": S, "arm": S, "variant": S, "impl": S, "scope": S,
    "repeat": I, "warmup": I, "iterations": I, "gpus": I, "workload": S, "status": S, "rule_id": S,
    "rule_message": S, "rule_source": S, "command": S, "seed": I, "est_gpu_seconds": F, "graph_overrides": OVERRIDES,
    "look": I,
}  # fmt: skip
ITERATIONS: dict[str, pa.DataType] = {
    "run_id": S, "iteration": I, "elapsed_ms": F, "tflops": F, "loss": F, "grad_norm": F, "mem_allocated_gb": F,
    "mem_max_allocated_gb": F, "mem_max_reserved_gb": F, "mem_reserved_gb": F, "source_file": S,
    "line": I,  # line number of the iteration line in source_file (1-based)
    "skipped_iterations": F,  # Megatron's `number of skipped iterations` on the line (NaN: not printed)
}  # fmt: skip
# a pair job's arm (graphsweep/parse/pairs.py): its segment, the iteration's number in it, inside its window
PAIR_ITERATION: dict[str, pa.DataType] = {"segment": S, "segment_iteration": I, "steady": B}
ITERATIONS.update(PAIR_ITERATION)
# runs.parquet: where each run's wall time went, in seconds and GPU-seconds (graphsweep/store/timeparts.py)
RUN_TIME: dict[str, pa.DataType] = {
    **{f"{unit}_{part}_s": F for unit in ("time", "gpu")
       for part in ("startup", "warmup", "steady", "after", "untimed", "teardown", "outside")},
    "time_split": S,
}  # fmt: skip
# run.json's job facts
JOB: dict[str, pa.DataType] = {
    "executor": S, "job_id": S, "host": S, "start_utc": UTC, "end_utc": UTC, "wall_s": F, "exit_code": I, "state": S,
    "attempt": I, "gpu_seconds": F, "slurm_nodelist": S, "previous_attempts": JSON, "provenance": JSON,
}  # fmt: skip
PROVENANCE: dict[str, pa.DataType] = {
    **{c: S for c in provenance.COLUMNS}, "prov_gpu_count": I,
    **{c: B for c in provenance.COLUMNS if c.endswith("_dirty")}, "prov_env": JSON, "prov_key": S,
}  # fmt: skip
# summary.json (graphsweep/parse/records.py RunSummary; a pair arm's adds pair_id and its segments)
SUMMARY: dict[str, pa.DataType] = {
    "outcome": S, "error_class": S, "phase": S, "signature": S, "signature_line": I, "signature_file": S,
    "reason": S, "oom_request": S, "n_iterations": I, "steady_first": I, "steady_last": I, "steady_n": I,
    "steady_reason": S, "step_ms_median": F, "step_ms_mean": F, "step_ms_p10": F, "step_ms_p90": F,
    "elapsed_resolution_ms": F, "peak_mem_gb": F, "peak_mem_before_capture_gb": F, "steady_mem_allocated_gb": F,
    "steady_mem_reserved_gb": F, "steady_mem_peak_gb": F, "capture_seen": B, "replay_seen": B, "capture_s": F,
    "capture_iteration_excess_s": F, "graphable_layers": I, "graphs_captured": I, "gpu_busy_ms": F,
    "gpu_busy_share": F, "graph_ceiling": F, "gpu_busy_note": S, "host_step_ms": F, "host_time_rank": I,
    "host_time_ranks": I, "host_time_note": S, "transient": S, "signature_id": S, "signature_source": S,
    "failed_iteration": I, "capture_iteration": I, "train_iters": I, "last_iteration": I, "measurement_usable": B,
    "infrastructure": B, "end_marker": S, "slurm_state": S, "device": S, "files": STRS, "notes": STRS,
    "log_path": S, "pair_id": S, "segments": STRS,
}  # fmt: skip
# summary.json too: what the run trained and the work of a step (graphsweep/parse/work.py; schema version 6)
WORK: dict[str, pa.DataType] = {
    "train_config": JSON, "train_config_source": S, "global_batch": I, "seq_length": I, "tokens_per_step": I,
}  # fmt: skip
SUMMARY.update(WORK)
RUNS: dict[str, pa.DataType] = {**PLAN, **JOB, **PROVENANCE, **SUMMARY, **RUN_TIME}
COMPARISON: dict[str, pa.DataType] = {
    "sweep": S, "cell_id": S, "shape_id": S, "variant": S, "impl": S, "scope": S, "verdict": S, "reason": S,
    "eager_step_ms": F, "graph_step_ms": F, "speedup": F, "ci_low": F, "ci_high": F, "alpha": F, "margin": F,
    "p_beyond": F, "p_within": F, "q_value": F, "df": F, "design": S, "eager_spread": S, "graph_spread": S,
    "thin": B, "resolution_limited": B, "repeats_needed": I, "n_eager": I, "n_graph": I,
    "eager_resolution_ms": F, "graph_resolution_ms": F, "mem_metric": S, "eager_mem_gb": F, "graph_mem_gb": F,
    "mem_delta_gb": F, "paired_outcome": S, "failure_run_id": S, "failure_detail": S, "failure_class": S,
    "excluded_run_ids": STRS, "loss_parity": S, "loss_iteration": I, "loss_graph": F, "loss_eager": F,
    "loss_rel_diff": F, "loss_level": F, "loss_tolerance": F, "loss_worst_excess": F, "loss_run_id": S,
    "loss_departed": I, "loss_checked": I, "loss_runs": I, "loss_spread": F, "loss_references": I,
    "loss_references_excluded": STRS, "loss_confirmed": B, "loss_band": SPANS, "loss_band_min": F, "loss_band_max": F,
    "loss_compared": I, "loss_print_every": I, "loss_bias": B, "family_gated": B,
    "eager_gpu_busy_ms": F, "gpu_busy_share": F, "graph_ceiling": F, "eager_host_step_ms": F, "host_shares_of": S,
    "host_covered": S, "host_covered_share": F, "host_estimate_speedup": F, "graphs_captured": I, "control": B,
    "rule_id": S,
    "eager_run_id": S, "graph_run_id": S, "eager_run_ids": STRS, "graph_run_ids": STRS, "gpu_seconds": F,
    "gpu_names": S, "eager_outcomes": STRS, "graph_outcomes": STRS, "not_comparable_fields": STRS, "pair_ids": STRS,
    "loss_unseeded": I, "loss_graph_seeds": INTS, "loss_eager_seeds": INTS,
    "look": I, "loop_status": S, "loop_repeats": I, "repeats_to_decide": I, "gpu_hours_to_decide": F,
}  # fmt: skip
COMPARISON_V6: dict[str, pa.DataType] = {
    "beyond_ceiling": B, "crashed_run_ids": STRS, "work_differences": WORK_DIFFERENCES, "loss_agreement": F,
}  # fmt: skip
COMPARISON.update(COMPARISON_V6)
# the catalog's index of the archives in it (store/catalog.py): one row per archive, from its manifest
ARCHIVES: dict[str, pa.DataType] = {
    "sweep": S, "archive_file": S, "created_utc": UTC, "graphsweep_version": S, "graphsweep_sha": S,
    "graphsweep_dirty": B, "schema_version": I, "spec_hash": S, "logs_included": B, "margin": F, "files": I,
}  # fmt: skip
# Columns one per region of the host-time line (entry/host_time.py REGIONS: ms_column, wait_column, events_column in
# runs, share_column in comparison), by their names' pattern: a region added there is typed here without an edit.
PATTERNS: dict[str, list[tuple[re.Pattern[str], pa.DataType]]] = {
    "runs": [(re.compile(r"host_[a-z_]+_(ms|wait_ms|events)"), F)],
    "comparison": [(re.compile(r"host_[a-z_]+_share"), F)],
}
TYPES: dict[str, dict[str, pa.DataType]] = {"plan": PLAN, "runs": RUNS, "iterations": ITERATIONS,
                                            "comparison": COMPARISON, "archives": ARCHIVES}  # fmt: skip
# The columns kept as JSON text, and why no typed column fits them:
JSON_COLUMNS = {
    "provenance": "run.json's whole provenance record: nested, open-ended keys (the prov_* columns are its typed view)",
    "previous_attempts": "earlier attempts' whole run.json records (transient retries): nested, open-ended keys",
    "prov_env": "the environment both arms must share, as ONE canonical value (sorted keys): compared whole",
    "train_config": "the training configuration a run ran (parse/work.py TrainConfig): open-ended Bridge config paths "
                    "with their values, Megatron Core's defaults and the summary's sections",
}


def _missing(v: Any) -> bool:
    if v is None or v is pd.NaT:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return isinstance(v, (np.floating,)) and bool(np.isnan(v))


def _as_list(v: Any) -> list[str] | None:
    if isinstance(v, str):  # a version 4 file's JSON text
        v = json.loads(v) if v.strip() else None
    if v is None or (not isinstance(v, (list, tuple, np.ndarray)) and _missing(v)):
        return None
    return [str(x) for x in v]


def _as_nested(v: Any, typ: pa.DataType) -> Any:
    """A list column's value as plain Python lists of its element type (a Parquet reader gives arrays)."""
    if isinstance(v, str):  # a version 4 file's JSON text
        v = json.loads(v) if v.strip() else None
    if v is None or (not isinstance(v, (list, tuple, np.ndarray)) and _missing(v)):
        return None
    if pa.types.is_list(typ):
        return [_as_struct(x, typ.value_type) if pa.types.is_struct(typ.value_type) else _as_nested(x, typ.value_type)
                for x in v]
    if _missing(v):
        return None
    return int(v) if pa.types.is_integer(typ) else float(v) if pa.types.is_floating(typ) else v


def _as_struct(v: Any, typ: pa.StructType) -> dict[str, Any] | None:
    """A struct element of a list column (WORK_DIFFERENCES) as a dict of its fields' plain values."""
    if not isinstance(v, dict):
        return None
    out: dict[str, Any] = {}
    for f in typ:
        x = v.get(f.name)
        out[f.name] = _as_list(x) if f.type == STRS else _as_text(x) if f.type == S else _as_nested(x, f.type)
    return out


def _as_overrides(v: Any) -> dict[str, Any] | None:
    if isinstance(v, str):  # a version 4 file's JSON text (records.GraphOverrides.to_json)
        v = json.loads(v) if v.strip() else None
    if not isinstance(v, dict):
        return None
    return {"what": str(v["what"]), "paste": _as_list(v.get("paste")) or [], "shared": _as_list(v.get("shared")) or []}


def _as_text(v: Any) -> str | None:
    if isinstance(v, (list, tuple, dict, np.ndarray)):  # a record kept whole (JSON_COLUMNS)
        return json.dumps(v.tolist() if isinstance(v, np.ndarray) else v, sort_keys=True, default=str)
    return None if _missing(v) else v if isinstance(v, str) else str(v)


def declared_type(table: str, name: str) -> pa.DataType | None:
    """The type store/schema.py gives a column of a table, None for an axis or an undeclared column."""
    if name in TYPES[table]:
        return TYPES[table][name]
    return next((t for pattern, t in PATTERNS.get(table, []) if pattern.fullmatch(name)), None)


def _present(v: Any) -> bool:
    return isinstance(v, (list, tuple, dict, np.ndarray)) or not _missing(v)


def column_type(table: str, name: str, values: pd.Series) -> pa.DataType:
    """A column's declared type; for an axis or undeclared column, its values' type (string when they are all
    empty: never `null`)."""
    declared = declared_type(table, name)
    if declared is not None:
        return declared
    present = [v for v in values if _present(v)]
    if not present:
        return S
    if all(isinstance(v, (bool, np.bool_)) for v in present):
        return B
    numbers = [v for v in present if isinstance(v, (int, float, np.integer, np.floating))
               and not isinstance(v, (bool, np.bool_))]  # fmt: skip
    if len(numbers) == len(present):
        return I if all(isinstance(v, (int, np.integer)) for v in numbers) else F
    if all(isinstance(v, (list, tuple, np.ndarray)) for v in present):
        return STRS
    return S


def column_array(values: pd.Series, typ: pa.DataType) -> pa.Array:
    """One column's values as the Arrow array of its type (a version 4 file's JSON text parsed where the column is
    a list or a struct now)."""
    if typ == UTC:
        times = pd.to_datetime(values, utc=True, format="ISO8601", errors="coerce")
        return pa.array(times, type=UTC, from_pandas=True)
    if typ == STRS:
        return pa.array([_as_list(v) for v in values], type=typ)
    if pa.types.is_list(typ):
        return pa.array([_as_nested(v, typ) for v in values], type=typ)
    if typ == OVERRIDES:
        return pa.array([_as_overrides(v) for v in values], type=typ)
    if typ == S:
        return pa.array([_as_text(v) for v in values], type=typ)
    if typ in (I, F):
        numbers = values if values.dtype.kind in "iuf" else pd.to_numeric(
            values.map(lambda v: None if _missing(v) else v), errors="coerce")  # fmt: skip
        return pa.array(numbers, type=typ, from_pandas=True)
    if typ == B:
        return pa.array([None if _missing(v) else bool(v) for v in values], type=typ)
    return pa.array(values, type=typ, from_pandas=True)


def to_arrow(df: pd.DataFrame, table: str) -> pa.Table:
    """A table's frame as Arrow with every column of its declared type, in the frame's column order."""
    fields, arrays = [], []
    for name in df.columns:
        values = df[name]
        typ = column_type(table, name, values)
        arrays.append(column_array(values, typ))
        fields.append(pa.field(name, typ))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def conform(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """A frame read from an older schema version with its declared columns as the current version reads them
    (lists and structs from their JSON text, times as times)."""
    return to_arrow(df, table).to_pandas()
