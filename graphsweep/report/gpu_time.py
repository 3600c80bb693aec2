"""Where a sweep's GPU-hours went: start-up, warmup and capture, the steady windows, teardown, and the share of the
sweep that measured something; a section of both reports, from runs.parquet's time_*/gpu_* columns
(graphsweep/store/timeparts.py; docs/tables.md says how each is derived and how precise it is)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from graphsweep.store.tables import RUN_TIME_COLUMNS

TITLE = "Where the GPU-hours went"
H = 1 / 3600.0


@dataclass
class GpuTime:
    """A sweep's GPU-hours in parts, over its runs that have a job wall time."""

    runs: int = 0  # runs with a job wall time: the parts below are theirs
    total_h: float = 0.0  # their GPU-hours (runs.parquet gpu_seconds): the report's "spent"
    parts: list[tuple[str, float]] = field(default_factory=list)  # (what, GPU-hours), in the order a run goes
    measured_h: float = 0.0  # steady windows of runs whose measurement is usable
    measured_runs: int = 0
    stamped_runs: int = 0  # runs split at their iteration lines' time stamps
    no_wall_runs: int = 0  # ingested logs: no job, so no start-up or teardown
    no_wall_loop_h: float = 0.0  # their iterations' GPU-hours
    no_wall_steady_h: float = 0.0
    missing: bool = False  # runs.parquet was written before these columns existed


def _true(x: Any) -> bool:
    return x is True or (not isinstance(x, str) and bool(x) and x == x)


def _sum(frame: pd.DataFrame, col: str) -> float:
    return float(pd.to_numeric(frame[col], errors="coerce").sum()) * H if len(frame) else 0.0


def gpu_time(runs: pd.DataFrame) -> GpuTime:
    """The breakdown of runs.parquet's GPU-hours (every run that ran; preflight-blocked runs never did)."""
    if not len(runs):
        return GpuTime()
    if any(c not in runs.columns for c in RUN_TIME_COLUMNS):
        return GpuTime(missing=True)
    cost = pd.to_numeric(runs.get("gpu_seconds"), errors="coerce")
    walled, no_wall = runs[cost.notna()], runs[cost.isna()]
    usable = walled.get("measurement_usable", pd.Series(False, index=walled.index)).map(_true).astype(bool)
    split = walled[pd.to_numeric(walled["gpu_startup_s"], errors="coerce").notna()]
    unsplit = walled[pd.to_numeric(walled["gpu_startup_s"], errors="coerce").isna()]
    unknown = unsplit[pd.to_numeric(unsplit["gpu_outside_s"], errors="coerce").isna()]
    parts = [
        ("start-up: job start to the first iteration", _sum(split, "gpu_startup_s")),
        ("warmup and capture: iterations before the steady window", _sum(walled, "gpu_warmup_s")),
        ("steady windows: what the verdicts measured", _sum(walled[usable], "gpu_steady_s")),
        ("steady windows of runs with no usable measurement", _sum(walled[~usable], "gpu_steady_s")),
        ("iterations after the steady window", _sum(walled, "gpu_after_s")),
        ("inside the loop, in no iteration's elapsed time (evaluation, checkpoints)", _sum(split, "gpu_untimed_s")),
        ("teardown: the last iteration's end to the job's end", _sum(split, "gpu_teardown_s")),
        (f"start-up and teardown, not split ({len(unsplit) - len(unknown)} runs: pair jobs, iteration lines without "
         "time stamps)", _sum(unsplit, "gpu_outside_s")),
    ]
    total = float(cost.sum()) * H
    rest = total - sum(h for _, h in parts)
    if len(unknown):
        parts.append((f"not split: {len(unknown)} runs whose iterations do not fit their job's wall time", rest))
    return GpuTime(
        runs=len(walled), total_h=total, parts=[(k, h) for k, h in parts if round(h, 4)],
        measured_h=parts[2][1], measured_runs=int(usable.sum()), stamped_runs=len(split),
        no_wall_runs=len(no_wall),
        no_wall_loop_h=sum(_sum(no_wall, c) for c in ("gpu_warmup_s", "gpu_steady_s", "gpu_after_s")),
        no_wall_steady_h=_sum(no_wall, "gpu_steady_s"),
    )  # fmt: skip


def _share(h: float, total: float) -> str:
    return f"{h / total:.1%}" if total else "—"


def _sentences(g: GpuTime) -> list[str]:
    out = []
    if g.runs:
        out.append(f"{_share(g.measured_h, g.total_h)} of the sweep's {g.total_h:.3f} GPU-hours measured something: "
                   f"the steady windows of {g.measured_runs} of its {g.runs} runs.")
        if g.stamped_runs:
            out.append(f"Start-up and teardown of {g.stamped_runs} runs are split at their first iteration line's time "
                       "stamp (±1 s per run); the iterations' parts are their elapsed times.")
    if g.no_wall_runs:
        out.append(f"{g.no_wall_runs} runs have no job wall time (ingested logs) and are not in the table: their "
                   f"iterations took {g.no_wall_loop_h:.3f} GPU-hours, {g.no_wall_steady_h:.3f} of them in steady "
                   "windows.")
    return out


def render_markdown(g: GpuTime) -> list[str]:
    """The section of report.md (lines), empty when no run ran."""
    if g.missing:
        return [f"**{TITLE}**: runs.parquet has no time_* columns (written by an older graphsweep): "
                "`snakemake --forcerun aggregate` adds them.", ""]
    if not g.runs and not g.no_wall_runs:
        return []
    out = [f"**{TITLE}**", ""]
    if g.runs:
        out += ["| part | GPU-hours | share |", "|---|---:|---:|"]
        out += [f"| {what} | {h:.3f} | {_share(h, g.total_h)} |" for what, h in g.parts]
        out += [f"| total ({g.runs} runs) | {g.total_h:.3f} | 100% |", ""]
    return out + [" ".join(_sentences(g)), ""]


def render_html(g: GpuTime) -> str:
    """The section of report.html, empty when no run ran."""
    if g.missing:
        return (f"<h2>{TITLE}</h2><p class='note'>runs.parquet has no time_* columns (written by an older graphsweep): "
                "<code>snakemake --forcerun aggregate</code> adds them.</p>")
    if not g.runs and not g.no_wall_runs:
        return ""
    table = ""
    if g.runs:
        rows = "".join(f"<tr><td>{html.escape(what, quote=False)}</td><td class='num'>{h:.3f}</td>"
                       f"<td class='num'>{_share(h, g.total_h)}</td></tr>" for what, h in g.parts)
        rows += (f"<tr><td><b>total</b> ({g.runs} runs)</td><td class='num'><b>{g.total_h:.3f}</b></td>"
                 "<td class='num'>100%</td></tr>")
        table = ("<table class='costs' id='gpu-time' style='width:auto;min-width:420px'><thead><tr><th>part</th>"
                 f"<th class='num'>GPU-hours</th><th class='num'>share</th></tr></thead><tbody>{rows}</tbody></table>")
    note = "".join(f"{html.escape(s, quote=False)} " for s in _sentences(g)).strip()
    return f"<h2>{TITLE}</h2>{table}<p class='note'>{note}</p>"
