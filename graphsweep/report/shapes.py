"""The sweep's shapes as the plan has them: the axes that tell them apart, whether they form a full grid, and what a
graph variant's command sets that its shape's eager command does not (the overrides a user pastes).

Reads plan.parquet only: `command` is each run's exact command line (a pair job's command holds both arms' plans as
JSON, graphsweep/run/abba.py); the run folders' config.yaml say the same.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from typing import Any

import pandas as pd

from graphsweep.constraints.graph import GRAPH_FIELDS, MODULES_API, graph_view
from graphsweep.vocab import EAGER, GRAPH, PAIR, LaunchPlan, Variant
from graphsweep.workloads import megatron_bridge as mb
from graphsweep.report.data import SweepTables
from graphsweep.report.text import fmt_value

# Graph settings a Megatron Bridge sweep gives both arms of a shape (so they are no difference between the arms, but
# part of how the graph was measured): the graph fields, and the NaN checks a full-iteration graph must turn off.
_SHARED_GRAPH_KEYS = frozenset((*GRAPH_FIELDS, *mb.NAN_KEYS))
_ENV_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")  # NAME=value before the program
_HYDRA_TOKEN = re.compile(r"^[+~]*([A-Za-z_][\w.\-/@]*)=")  # model.cuda_graph_impl=transformer_engine


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
@dataclass(frozen=True)
class Overrides:
    """What a graph variant's command adds to its shape's eager command."""

    paste: tuple[str, ...]  # tokens the graph run sets and the eager run does not, or sets otherwise
    shared: tuple[str, ...]  # graph settings both arms ran with (as measured; part of the paste when required)
    workload: str

    @property
    def line(self) -> str:
        return shlex.join(self.paste)

    @property
    def shared_line(self) -> str:
        return shlex.join(self.shared)


def _split(command: Any) -> list[str]:
    try:
        return shlex.split(str(command or ""))
    except ValueError:  # unbalanced quotes: not a command this module can read
        return []


def arm_argvs(row: pd.Series | dict[str, Any]) -> dict[str, list[str]]:
    """arm -> its command's tokens (environment first) for one plan row; a pair job gives both of its arms."""
    tokens = _split(row.get("command"))
    if row.get("arm") != PAIR:
        return {str(row.get("arm")): tokens} if tokens else {}
    opts = dict(zip(tokens, tokens[1:]))
    try:
        plans = json.loads(opts.get("--plans", ""))
    except json.JSONDecodeError:
        return {}
    arms = (opts.get("--arms") or f"{EAGER},{GRAPH}").split(",")
    out = {}
    for letter, arm in zip(("A", "B"), arms):
        if isinstance(plans, dict) and isinstance(plans.get(letter), dict):
            lp = LaunchPlan.from_dict(plans[letter])
            out[arm] = [f"{k}={v}" for k, v in sorted(lp.env.items())] + list(lp.argv)
    return out


def command_items(tokens: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """A command as (key, tokens) settings in order: `NAME=value` before the program, `--flag [value]`,
    `--flag=value`, Hydra `path=value`, and positional words (keyed by their position)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    i, n_pos, program = 0, 0, False
    while i < len(tokens):
        tok = tokens[i]
        if not program and _ENV_TOKEN.match(tok):
            out.append(("env:" + tok.split("=", 1)[0], (tok,)))
        elif tok.startswith("-") and len(tok) > 1:
            program = True
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if "=" not in tok and nxt is not None and not nxt.startswith("-") and not _HYDRA_TOKEN.match(nxt):
                out.append((tok, (tok, nxt)))
                i += 1
            else:
                out.append((tok.split("=", 1)[0], (tok,)))
        elif m := _HYDRA_TOKEN.match(tok):
            program = True
            out.append((m.group(1), (tok,)))
        else:
            program = True
            out.append((f"#{n_pos}", (tok,)))
            n_pos += 1
        i += 1
    return out


def _unstable(groups: list[list[dict[str, tuple[str, ...]]]]) -> set[str]:
    """Keys whose value differs between the runs of one arm (the seed of each repeat): no graph setting."""
    out: set[str] = set()
    for group in groups:
        for key in set().union(*group):
            if len({d.get(key) for d in group}) > 1:
                out.add(key)
    return out


def is_full_iteration(cell: pd.Series | dict[str, Any]) -> bool:
    """A full-iteration graph: impl full_iteration, or Bridge 0.6's local + [full_iteration] (constraints/graph.py)."""
    names = [n for n in str(cell.get("scope") or "").split("+") if n]
    view = graph_view({"model.cuda_graph_impl": str(cell.get("impl") or ""), "model.cuda_graph_scope": names}, MODULES_API)
    return Variant(str(cell.get("variant")), view.effective).is_full_iteration


def graph_overrides(t: SweepTables, cell: pd.Series | dict[str, Any]) -> Overrides | None:
    """The settings a cell's graph runs add to its shape's eager runs (None when the plan lacks either command)."""
    plan = t.plan
    if not {"cell_id", "shape_id", "arm", "command"} <= set(plan.columns):
        return None
    graph: list[list[str]] = []
    eager: list[list[str]] = []
    for _, row in plan[plan.cell_id == cell.get("cell_id")].iterrows():
        argvs = arm_argvs(row)
        graph += [argvs[GRAPH]] if GRAPH in argvs else []
        eager += [argvs[EAGER]] if row.get("arm") == PAIR and EAGER in argvs else []
    for _, row in plan[(plan.shape_id == cell.get("shape_id")) & (plan.arm == EAGER)].iterrows():
        eager += [v for k, v in arm_argvs(row).items() if k == EAGER]
    if not graph or not eager:
        return None
    g_items = [command_items(a) for a in graph]
    g_maps, e_maps = [dict(i) for i in g_items], [dict(command_items(a)) for a in eager]
    unstable = _unstable([g_maps, e_maps])
    ref = e_maps[0]
    workload = str(cell.get("workload") or _first(plan, "workload"))
    paste, shared = [], []
    for key, toks in g_items[0]:
        if key in unstable:
            continue
        if ref.get(key) != toks:
            paste += toks
        elif key in _SHARED_GRAPH_KEYS and workload == mb.KIND:
            shared += toks
    if workload == mb.KIND and is_full_iteration(cell):  # Bridge refuses a full-iteration graph with NaN checks on
        required = [tok for key, toks in g_items[0] if key in mb.NAN_KEYS and key not in unstable for tok in toks]
        paste += [tok for tok in required if tok not in paste]
        shared = [tok for tok in shared if tok not in required]
    return Overrides(tuple(paste), tuple(shared), workload)


def _first(frame: pd.DataFrame, col: str) -> str:
    s = frame[col].dropna() if col in frame.columns else pd.Series(dtype=str)
    return str(s.iloc[0]) if len(s) else ""
