"""Same work: the arms of a cell are judged against each other only when they train the same thing.

Every run records the training configuration it ran and its global batch (runs.parquet `train_config`,
`global_batch`: graphsweep/parse/work.py). The runs of a cell (both arms, every repeat) must agree on every key of it
but those a graph arm is meant to change:

- the graph settings: every CUDA-graph field of Megatron Core and Bridge (constraints/graph.py GRAPH_FIELDS, matched by
  its last part, so Megatron-LM's argument of the same name counts too) and the NaN checks a full-iteration graph runs
  without (NAN_KEYS);
- what the plan's graph command sets beyond eager's (plan.parquet `graph_overrides`: a variant's own `overrides`);
- what names a run rather than its work: its seed (loss parity pairs seeds), where it writes;
- the keys the spec allows to differ (`arms_may_differ`, `graphsweep compare --may-differ`: fnmatch patterns).

A key whose value a run does not show is unknown and never differs: a run whose log printed no configuration summary
is compared on what its config.yaml gave it, and on its global batch. A difference makes the cell `not-comparable`,
naming the keys and each arm's values (judge/compare.py applies it; judge/prose.py words it).
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from graphsweep.constraints.graph import GRAPH_FIELDS, NAN_KEYS
from graphsweep.vocab import EAGER, GRAPH

GRAPH_LEAVES = frozenset(k.rsplit(".", 1)[-1] for k in (*GRAPH_FIELDS, *NAN_KEYS))
# What names a run, not its work: the seed (runs of a sweep's repeats may train from their own; loss parity pairs
# runs by seed), and where it writes or reads its checkpoints and logs
RUN_IDENTITY = (
    "rng.seed", "dataset.random_seed", "seed", "checkpoint.save", "checkpoint.load", "checkpoint.pretrained_checkpoint",
    "logger.tensorboard_dir", "logger.wandb_*", "logger.mlflow_*", "logger.save_config_filepath",
    "dataset.path_to_cache", "save", "load", "tensorboard_dir", "wandb_*",
)  # fmt: skip
GLOBAL_BATCH = "global_batch"  # runs.parquet: the global batch size the steady window's iteration lines print


@dataclass(frozen=True)
class WorkDifference:
    """One key on which the runs of a cell disagree (comparison.parquet `work_differences`)."""

    key: str
    eager: tuple[str, ...]  # distinct known values among the eager runs
    graph: tuple[str, ...]  # ... and among the graph runs

    def to_record(self) -> dict[str, Any]:
        return {"key": self.key, EAGER: list(self.eager), GRAPH: list(self.graph)}


def _config(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A runs.parquet row's train_config record (a mapping, or its JSON text), {} when it has none."""
    raw = row.get("train_config")
    if isinstance(raw, str) and raw.strip():
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, Mapping) else {}


def _value(cfg: Mapping[str, Any], key: str, defaults: Mapping[str, str]) -> str | None:
    """The key's value in one run: printed, or known from its summary where it leaves the key out (a Megatron Core
    field at its default, given by the defaults any run printed; another config's field at None); None: unknown."""
    values = cfg.get("values") or {}
    if key in values:
        return str(values[key])
    section = key.split(".", 1)[0] if "." in key else None
    if section in (cfg.get("mcore_sections") or []):
        found = (cfg.get("defaults") or {}).get(key, defaults.get(key))
        return None if found is None else str(found)
    if section in (cfg.get("sections") or []):
        return "null"
    return None


def allowed(key: str, may_differ: Iterable[str] = ()) -> bool:
    """The key may differ between the arms: a graph setting, a run's identity, or one the spec allows."""
    if key.rsplit(".", 1)[-1] in GRAPH_LEAVES:
        return True
    return any(fnmatch.fnmatchcase(key, p) for p in (*RUN_IDENTITY, *may_differ))


def graph_override_keys(overrides: Any) -> list[str]:
    """The keys a plan's graph_overrides record sets (`key=value` words; a trainer flag names no key)."""
    if not isinstance(overrides, Mapping):
        return []
    words = [*list(overrides.get("paste") if overrides.get("paste") is not None else []),
             *list(overrides.get("shared") if overrides.get("shared") is not None else [])]
    return [str(w).split("=", 1)[0].lstrip("+~") for w in words if "=" in str(w)]


def differences(eager_runs: Sequence[Mapping[str, Any]], graph_runs: Sequence[Mapping[str, Any]],
                may_differ: Iterable[str] = ()) -> list[WorkDifference]:
    """The keys with more than one known value across the runs of a cell (each a runs.parquet row), in key order."""
    may_differ = tuple(may_differ)
    runs = [*eager_runs, *graph_runs]
    configs = [_config(r) for r in runs]
    defaults: dict[str, str] = {}
    for cfg in configs:
        for k, v in (cfg.get("defaults") or {}).items():
            defaults.setdefault(k, str(v))
    keys = sorted({k for cfg in configs for k in (cfg.get("values") or {})})
    out = []
    for key in keys:
        if allowed(key, may_differ):
            continue
        seen = [_value(cfg, key, defaults) for cfg in configs]
        e = tuple(sorted({v for v in seen[: len(eager_runs)] if v is not None}))
        g = tuple(sorted({v for v in seen[len(eager_runs):] if v is not None}))
        if len(set(e) | set(g)) > 1:
            out.append(WorkDifference(key, e, g))
    if not allowed(GLOBAL_BATCH, may_differ):
        e, g = (tuple(sorted({str(int(b)) for r in arm if (b := _number(r.get(GLOBAL_BATCH))) is not None}))
                for arm in (eager_runs, graph_runs))
        if len(set(e) | set(g)) > 1:
            out.append(WorkDifference(GLOBAL_BATCH, e, g))
    return out


def _number(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)
