"""Plan a sweep: every run with its exact command and preflight verdict, before anything is submitted."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from graphsweep import abba, launch
from graphsweep.spec import RunSpec, Spec

if TYPE_CHECKING:  # pandas and pyarrow load only where a table is built: the Snakefile itself stays light
    import pandas as pd

# Rough cost of a builtin run when no estimate is known: setup plus a small step (seconds).
_BUILTIN_SETUP_S, _BUILTIN_STEP_S = 10.0, 0.05


def estimate_gpu_seconds(run: RunSpec) -> float:
    if run.is_pair:  # four segments: each arm twice (graphsweep/abba.py)
        return sum(2 * estimate_gpu_seconds(arm) for arm in run.pair_arms())
    if run.workload["kind"] == "megatron_bridge":
        from graphsweep import megatron

        return float(megatron.estimate_gpu_seconds(run))
    return run.gpus * (_BUILTIN_SETUP_S + _BUILTIN_STEP_S * run.total_iterations)


_BRIDGE_VERDICTS: dict[str, dict[str, list[launch.Violation]]] = {}  # per spec content: Bridge is asked once


def blocked_by(spec: Spec) -> dict[str, list[launch.Violation]]:
    """Preflight violations per run id (empty list: the run may be submitted)."""
    mode = spec.raw.get("preflight")
    if mode == "none":
        return {r.run_id: [] for r in spec.runs()}
    out = {r.run_id: launch.preflight(r) for r in spec.runs()}
    if mode == "megatron" and spec.workload["kind"] == "megatron_bridge":
        for run_id, violations in bridge_verdicts(spec).items():
            out[run_id] = out.get(run_id, []) + violations
    return out


def bridge_verdicts(spec: Spec) -> dict[str, list[launch.Violation]]:
    """`preflight: megatron`: Megatron Bridge's own runtime_config_update on every cell (graphsweep/bridge_check.py)."""
    import json
    import os

    from graphsweep import bridge_check
    from graphsweep.spec import SpecError

    key = json.dumps(spec.raw, sort_keys=True, default=str)
    if key not in _BRIDGE_VERDICTS:
        python = spec.workload.get("bridge_python") or os.environ.get("GRAPHSWEEP_MEGATRON_PYTHON")
        if not python:
            raise SpecError(
                spec.path,
                "workload.bridge_python",
                None,
                "preflight: megatron needs a Python with Megatron Bridge installed: set workload.bridge_python or "
                "GRAPHSWEEP_MEGATRON_PYTHON (tools/megatron-venv.sh builds one), or use preflight: rules",
            )
        _BRIDGE_VERDICTS[key] = bridge_check.preflight_runs(spec.runs(), python)
    return _BRIDGE_VERDICTS[key]


def plan_frame(spec: Spec) -> "pd.DataFrame":
    """One row per run (cell x arm x repeat), blocked runs included with the rule that blocks them."""
    import pandas as pd

    from graphsweep.tables import PLAN_COLUMNS

    rows: list[dict[str, Any]] = []
    blocked = blocked_by(spec)
    verify = bool(spec.raw.get("verify"))
    for run in spec.runs():
        violations = blocked[run.run_id]
        plan = launch.launch_plan(run)
        rec = run.to_record()
        shape, settings = rec.pop("shape"), rec.pop("settings")
        rec.update(
            status=("verify" if verify else "blocked") if violations else "submit",
            rule_id=";".join(v.rule for v in violations) or None,
            rule_message=" | ".join(v.message for v in violations) or None,
            rule_source=" | ".join(v.source for v in violations) or None,
            command=abba.shell(plan) if run.is_pair else plan.shell(),
            # kept for blocked runs too: the report shows the GPU time that preflight saved
            est_gpu_seconds=estimate_gpu_seconds(run),
        )
        rec.update({k: settings[k] for k in shape})  # one column per axis
        rows.append(rec)
    df = pd.DataFrame(rows)
    axis_cols = [c for c in df.columns if c not in PLAN_COLUMNS]
    return df[PLAN_COLUMNS + axis_cols]


def submitted_run_ids(spec: Spec) -> list[str]:
    """Runs the workflow submits: all but preflight-blocked ones (unless `verify` asks to confirm the rules)."""
    if spec.raw.get("verify"):
        return [r.run_id for r in spec.runs()]
    blocked = blocked_by(spec)
    return [r.run_id for r in spec.runs() if not blocked[r.run_id]]


def write_plan(spec: Spec, out: str | Path) -> "pd.DataFrame":
    from graphsweep.tables import write_table

    df = plan_frame(spec)
    write_table(df, out, "plan", extra={"spec": spec.raw, "spec_path": spec.path, "extra_repeats": dict(spec.extra_repeats)})
    return df


def run_config(run: RunSpec) -> dict[str, Any]:
    """Everything the run rule needs, written to runs/{run_id}/config.yaml: no run reads another run's files."""
    plan = launch.launch_plan(run)
    return {
        "run": run.to_record(),
        "launch": {
            "argv": list(plan.argv),
            "env": dict(plan.env),
            "shell": plan.shell(),
            "gpus": plan.gpus,
            "nodes": plan.nodes,
            "gpus_per_node": plan.gpus_per_node,
            "tasks_per_node": plan.tasks_per_node,
            "srun": plan.srun,
            "srun_args": list(plan.srun_args),
            "overrides": dict(plan.overrides),
        },
        "executor": dict(run.executor),
    }


def write_run_config(run: RunSpec, out: str | Path) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        yaml.safe_dump(run_config(run), f, sort_keys=False)


def dry_run_summary(df: "pd.DataFrame") -> dict[str, Any]:
    sub = df[df.status != "blocked"]
    return {
        "runs": int(len(df)),
        "to_submit": int(len(sub)),
        "blocked": int((df.status == "blocked").sum()),
        "gpu_hours": round(float(sub.est_gpu_seconds.sum()) / 3600.0, 3),
    }
