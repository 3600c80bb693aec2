"""The report's words: how a speedup, a reason, a cell and the caveats read in both reports (user text is never
interpreted as markup: Markdown is escaped here, HTML by its renderer).
"""

from __future__ import annotations

import html
import re
from typing import Any, Sequence

import numpy as np
import pandas as pd

from graphsweep.vocab import TIMING_VERDICTS
from graphsweep.report.data import Cost, Summary, SweepTables, as_number


def cell_label(row: pd.Series | dict[str, Any], axes: Sequence[str]) -> str:
    parts = [f"{a}={fmt_value(row.get(a))}" for a in axes if a in row]
    return " ".join(parts) if parts else str(row.get("shape_id"))


def fmt_value(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (list, tuple, np.ndarray)):
        return "+".join(map(str, v))
    return str(v)


def fmt_speedup(row: pd.Series | dict[str, Any], ci: bool = True) -> str:
    s = as_number(row.get("speedup"))
    if s is None:
        return "—"
    lo, hi = as_number(row.get("ci_low")), as_number(row.get("ci_high"))
    if not ci or lo is None or hi is None:
        return f"{s:.2f}×"
    return f"{s:.2f}× [{lo:.2f}, {hi:.2f}]"


def fmt_number(v: Any, spec: str = ".1f", suffix: str = "") -> str:
    f = as_number(v)
    return "—" if f is None else f"{f:{spec}}{suffix}"


def fmt_q(v: Any) -> str:
    q = as_number(v)
    if q is None:
        return "—"
    return "<0.001" if q < 0.001 else f"{q:.3f}" if q < 0.1 else f"{q:.2f}"


_INTERVAL_SENTENCE = re.compile(r"^.*?(?:excludes|lies inside|straddles) 1 ± [0-9.]+:?\s*")


def short_reason(row: pd.Series | dict[str, Any]) -> str:
    """The reason without what the table already shows: for timing verdicts, drop the interval sentence.

    Keeps what follows it: the planning hint of an inconclusive cell, the memory price of a speedup,
    the single-repeat warning and any excluded runs.
    """
    reason = str(row.get("reason") or "").strip()
    if row.get("verdict") in TIMING_VERDICTS:
        m = _INTERVAL_SENTENCE.match(reason)
        if m:
            return reason[m.end() :].lstrip("; ").strip()
    return reason


# PyTorch >= 2.4 allocator message (megatron-reference.md §6; older builds print "capacty"): the numbers a reader
# needs fit in one line; the full text stays in comparison.parquet and in the HTML tooltip.
_TORCH_OOM = re.compile(
    r"(?:torch\.(?:cuda\.)?)?OutOfMemoryError: CUDA out of memory\. Tried to allocate ([\d.]+ [KMGT]i?B)\."
    r"(?: GPU (\d+) has a total capac(?:i)?ty of ([\d.]+ [KMGT]i?B) of which ([\d.]+ [KMGT]i?[B]) is free\.)?[^;]*"
)


def _compact_oom(m: re.Match[str]) -> str:
    if m.group(3):
        return f"CUDA OOM, tried to allocate {m.group(1)} (GPU {m.group(2)}: {m.group(3)} total, {m.group(4)} free)"
    return f"CUDA OOM, tried to allocate {m.group(1)}"


def display_reason(row: pd.Series | dict[str, Any]) -> str:
    """short_reason, made to fit a table cell: run ids without their shape, PyTorch's OOM text in one line."""
    text = short_reason(row)
    sid = str(row.get("shape_id") or "")
    if sid:
        text = text.replace(sid + ".", "")
    return _TORCH_OOM.sub(_compact_oom, text).strip()


def fmt_percent(x: float) -> str:
    return f"{x * 100:.0f}%" if x * 100 >= 1 or x == 0 else f"{x * 100:.1f}%"


def md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def truncate(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1].rstrip() + "…"


def cost_sentence(cost: Cost) -> str:
    parts = [f"{cost.spent_gpu_h:.2f} spent"]
    if cost.control_gpu_h:
        parts.append(f"of which {cost.control_gpu_h:.2f} on A/A control cells")
    if cost.blocked_runs:
        approx = f"≈{cost.avoided_blocked_gpu_h:.2f}"
        if cost.blocked_unestimated:
            approx += f" (+{cost.blocked_unestimated} runs without an estimate)"
        parts.append(f"{approx} avoided by {cost.blocked_runs} preflight-blocked runs")
    parts.append(f"{cost.avoided_shared_gpu_h:.2f} avoided by shared eager baselines")
    parts.append(f"the naive design (one eager run per variant, no preflight) would have cost ≈{cost.naive_gpu_h:.2f}")
    return "; ".join(parts) + "."


def caveats(t: SweepTables, s: Summary) -> list[str]:
    conf = f"{t.confidence * 100:.0f}%"
    out = [
        f"Speedup = eager step time / graph step time (>1: the graph is faster), median of each run's steady window; "
        f"`speedup`/`slowdown` only when the whole {conf} interval lies beyond 1 ± {t.margin:g} (the practical margin), "
        f"`neutral` when it lies inside, `inconclusive` when it straddles an edge (more repeats would decide).",
    ]
    if s.single_repeat_cells:
        out.append(
            f"{len(s.single_repeat_cells)} cell(s) had one usable run per arm: their interval is within-run only "
            "(bootstrap of iteration times) and understates job-to-job noise; rerun with `repeats: 3` or more to trust them."
        )
    elif any(v in TIMING_VERDICTS for v in s.counts if s.counts[v]):
        out.append("Every timed cell's interval comes from repeated jobs (jobs are the replicates).")
    else:
        out.append("No cell has a timing verdict: both arms must complete a steady window to be compared.")
    if s.bh_m:
        frag = (
            f" {len(s.fdr_fragile)} speedup/slowdown cell(s) have q > {1 - t.confidence:.2f}: "
            "they may not survive the correction across cells." if s.fdr_fragile
            else f" Every speedup/slowdown has q ≤ {1 - t.confidence:.2f}."
        )  # fmt: skip
        out.append(
            f"q-values: Benjamini–Hochberg across the {s.bh_m} timed cells of the sweep (A/A controls excluded); "
            f"verdicts use each cell's interval.{frag}"
        )
    if s.n_control:
        rate = f"{s.aa_fp / s.aa_judged:.0%}" if s.aa_judged else "n/a"
        out.append(
            f"A/A control (eager vs eager): {s.aa_fp} of {s.aa_judged} judged control cells flagged a difference "
            f"(measured false-positive rate {rate}; expected ≤ {1 - t.confidence:.0%})."
        )
    else:
        out.append("No A/A control cells were run: the cluster's false-positive rate was not measured (`aa_control: true`).")
    out.append("Memory: peak after capture, median across runs; Δ = graph − eager.")
    return out


def md_inline(text: str) -> str:
    """Escape, then render `code` spans of a caveat."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
