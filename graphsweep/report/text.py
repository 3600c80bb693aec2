"""The report's words: how a speedup, a reason, a cell and the caveats read in both reports (user text is never
interpreted as markup: Markdown is escaped here, HTML by its renderer).
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, Sequence

import numpy as np
import pandas as pd

from graphsweep.judge import interval as iv
from graphsweep.judge import parity as lp
from graphsweep.judge import prose
from graphsweep.judge import verdict as vd
from graphsweep.vocab import TIMING_VERDICTS
from graphsweep.report.data import Cost, Summary, SweepTables, as_number


def cell_label(row: pd.Series | dict[str, Any], axes: Sequence[str]) -> str:
    """'hidden=256 heads=4': the given axes that the row sets (an axis a shape leaves unset is left out)."""
    parts = [f"{a}={fmt_value(row.get(a))}" for a in axes if a in row and fmt_value(row.get(a))]
    return " ".join(parts)


def fmt_value(v: Any) -> str:
    """An axis value as the reader typed it; '' for a value the shape does not set (None, NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (list, tuple, np.ndarray)):
        return "+".join(map(str, v))
    return str(v)


def fmt_number(v: Any, spec: str = ".1f", suffix: str = "") -> str:
    f = as_number(v)
    return "—" if f is None else f"{f:{spec}}{suffix}"


def fmt_q(v: Any) -> str:
    q = as_number(v)
    if q is None:
        return "—"
    return "<0.001" if q < 0.001 else f"{q:.3f}" if q < 0.1 else f"{q:.2f}"


def short_reason(row: pd.Series | dict[str, Any]) -> str:
    """The reason without what the table already shows: for a timing verdict, only what its interval does not say
    (the planning hint, the memory price, thin or coarse data, excluded runs), from the fields (judge/prose.py).

    A table judged before schema version 3 has no such fields: its stored sentence is shown as it is.
    """
    if row.get("verdict") in TIMING_VERDICTS and as_number(row.get("alpha")) is not None:
        # thin data is marked ¹ next to the figures and explained once under the table, not in every row
        return "; ".join(prose.notes(dict(row, thin=False)))
    return str(row.get("reason") or "").strip()


def level(t: SweepTables) -> str:
    """'95%' or '97.5%': the level of the sweep's intervals."""
    return f"{t.confidence * 100:g}%"


def memory_figure(t: SweepTables) -> str:
    """What the sweep's memory columns measure ('steady-state reserved memory'), from comparison `mem_metric`."""
    metrics = t.comparison["mem_metric"].dropna().unique() if "mem_metric" in t.comparison.columns else []
    return " / ".join(vd.MEMORY_FIGURES.get(m, m) for m in metrics) or "the runs' memory figure"


def display_reason(row: pd.Series | dict[str, Any]) -> str:
    """short_reason, made to fit a table cell: run ids without their shape (a run's own reason is the parser's
    sentence from its fields, e.g. a CUDA OOM's `allocating 20.00 MiB`: nothing here reads a log's text)."""
    text = short_reason(row)
    sid = str(row.get("shape_id") or "")
    if sid:
        text = text.replace(sid + ".", "")
    return text.strip()


def fmt_percent(x: float) -> str:
    return f"{x * 100:.0f}%" if x * 100 >= 1 or x == 0 else f"{x * 100:.1f}%"


_HTML_OPENER = re.compile(r"<(?=[A-Za-z/!?])")  # what CommonMark reads as a tag, a comment or a declaration


def md_escape(s: str) -> str:
    """A table cell: one line, no column break, no raw HTML (`->`, `<0.001` and `>1` are text and stay as they are)."""
    return _HTML_OPENER.sub(r"\\<", s.replace("|", "\\|").replace("\n", " "))


def truncate(s: str, n: int) -> str:
    """At most n characters, cut at a word boundary (never inside a word or a `code` span) with an ellipsis."""
    if len(s) <= n:
        return s
    cut = s[: n - 1]
    space = cut.rfind(" ")
    if space > n // 2:  # a word boundary not too far back; else (one very long word) cut it
        cut = cut[:space]
    if cut.count("`") % 2:  # an open code span would swallow the rest of the line
        cut = cut[: cut.rfind("`")]
    return cut.rstrip(" ;,:(") + " …"


# Markup characters: emphasis, code, HTML, table pipes, and a `]` that would close a link; an underscore inside a
# word and a bracketed interval such as [1.51, 3.64] are literal in GitHub Markdown and stay readable as they are.
_MD_SPECIAL = re.compile(r"[\\`*<>|]|\](?=[(\[])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_text(s: str) -> str:
    """User text as literal Markdown: markup characters escaped (an underscore inside a word stays as it is)."""
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), str(s)).replace("\n", " ")


def md_code(s: str) -> str:
    """A Markdown code span that holds s literally, backticks included."""
    longest = max((len(r) for r in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def estimate_words(cost: Cost) -> str:
    """The plan's estimate of the runs that ran, against what they spent."""
    if not cost.estimated_gpu_h:
        return ""
    return (f"the plan estimated {cost.estimated_gpu_h:.2f} for these {cost.estimated_runs} runs: they took "
            f"{cost.spent_gpu_h / cost.estimated_gpu_h:.2f}x the estimate")


def cost_sentence(cost: Cost) -> str:
    parts = [f"{cost.spent_gpu_h:.2f} spent"]
    if cost.estimated_gpu_h:
        parts[0] += f" ({estimate_words(cost)})"
    if cost.control_gpu_h:
        parts.append(f"of which {cost.control_gpu_h:.2f} on A/A control cells")
    if cost.blocked_runs:
        approx = f"≈{cost.avoided_blocked_gpu_h:.2f}"
        if cost.blocked_unestimated:
            approx += f" (+{cost.blocked_unestimated} runs without an estimate)"
        parts.append(f"{approx} avoided by {cost.blocked_runs} preflight-blocked runs")
    if cost.gated_runs:
        parts.append(f"≈{cost.avoided_gate_gpu_h:.2f} avoided by {cost.gated_runs} graph runs the launch gate skipped")
    parts.append(f"{cost.avoided_shared_gpu_h:.2f} avoided by shared eager baselines")
    parts.append(f"the naive design (one eager run per variant, no preflight) would have cost ≈{cost.naive_gpu_h:.2f}")
    return "; ".join(parts) + "."


def _counts(states: dict[str, int], skip: str) -> str:
    return ", ".join(f"{n} {k}" for k, n in states.items() if k != skip)


def caveats(t: SweepTables, s: Summary) -> list[str]:
    conf = level(t)
    out = [
        f"Speedup = eager step time / graph step time (>1: the graph is faster), median of each run's steady window; "
        f"`speedup`/`slowdown` only when the whole {conf} interval lies beyond 1 ± {t.margin:g} (the practical margin), "
        f"`neutral` when it lies inside, `inconclusive` when it straddles an edge (more repeats would decide).",
    ]
    if s.thin_cells:
        out.append(
            f"{len(s.thin_cells)} timed cell(s) had fewer than {iv.MIN_OWN_JOBS} jobs in an arm: for that arm the "
            f"interval assumes a job-to-job spread of sd {iv.SPREAD_ALLOWANCE:g} of log step time (the largest seen on "
            "real H200 jobs) instead of a measured one, so only large effects are decided; run more repeats to "
            "measure it (docs/statistics.md)."
        )
    elif any(v in TIMING_VERDICTS for v in s.counts if s.counts[v]):
        out.append("Every timed cell's interval comes from repeated jobs (jobs are the replicates).")
    else:
        out.append("No cell has a timing verdict: both arms must complete a steady window to be compared.")
    if s.resolution_limited_cells:
        out.append(
            f"{len(s.resolution_limited_cells)} inconclusive cell(s) are limited by the logs' print step (0.1 ms for "
            "Megatron's elapsed time): a difference smaller than the rounding cannot be decided by more repeats."
        )
    if s.bh_m:
        gated = (f" {len(s.gated)} cell(s) whose own interval excluded the band did not pass this check and read "
                 "inconclusive." if s.gated else "")
        out.append(
            f"Many variants, one baseline: every variant of a shape is compared with the same eager runs, so the "
            f"sweep's {s.bh_m} timed cells (A/A controls excluded) are one family. A speedup or slowdown is decided "
            f"only when its Benjamini–Hochberg q is below {1 - t.confidence:g} as well as its own interval. When no "
            f"variant has an effect, the chance that this sweep prints any false speedup or slowdown is then at most "
            f"{1 - t.confidence:g} (measured on real H200 jobs, within the resampling error); when some do, on average "
            f"at most {1 - t.confidence:g} of its decided speedups and slowdowns are false, and a real effect among "
            f"many variants without one may need more repeats to pass (docs/statistics.md, \"Many variants, one "
            f"baseline\").{gated}"
        )
    if s.n_control:
        rate = f"{s.aa_fp / s.aa_judged:.0%}" if s.aa_judged else "n/a"
        aa_loss = ""
        if s.aa_parity:
            follow, left = s.aa_parity.get(lp.PARITY_OK, 0), sum(v for k, v in s.aa_parity.items() if k != lp.PARITY_OK)
            aa_loss = (f" Loss: in {follow} of {sum(s.aa_parity.values())} control cells the second eager arm follows "
                       f"the first's lm loss" + (f"; in {left} it does not ({_counts(s.aa_parity, lp.PARITY_OK)}): "
                       "the model is not reproducible between processes, which no graph can be blamed for" if left
                                                 else "") + ".")
        out.append(
            f"A/A control (eager vs eager): {s.aa_fp} of {s.aa_judged} judged control cells flagged a difference "
            f"(measured false-positive rate {rate}; expected ≤ {(1 - t.confidence) * 100:g}%).{aa_loss}"
        )
    else:
        out.append("No A/A control cells were run: the cluster's false-positive rate was not measured (`aa_control: true`).")
    if s.parity:
        ok = s.parity.get(lp.PARITY_OK, 0)
        bad = s.parity.get(lp.DIVERGED, 0) + s.parity.get(lp.NONFINITE, 0)
        worst = f" (closest: {s.parity_worst:.2f} of the band)" if s.parity_worst is not None else ""
        unchecked = s.parity.get(lp.UNCHECKED, 0) + s.parity.get(lp.UNCALIBRATED, 0)
        drift = s.parity.get(lp.RUN_DRIFT, 0)
        drifted = (f"; {drift} with one graph run drifting ({lp.RUN_DRIFT}: verdict kept, never recommended)"
                   if drift else "")
        out.append(
            f"Loss parity, judged on each graph run's trajectory against the eager runs of its seed: {ok} graph "
            f"cell(s) train the same model as eager{worst}; {bad} left it (invalid){drifted}"
            f"{f'; {unchecked} unchecked or uncalibrated (a speedup there reads unverified)' if unchecked else ''}. "
            f"{prose.rule()} Parity cannot tell a graph apart from the model's own non-determinism inside its band."
            + (f" Here the model's own spread widens it: {s.wide_parity}." if s.wide_parity else "")
        )
    out.append(f"Memory: {memory_figure(t)}, median across runs; Δ = graph − eager (docs/tables.md `mem_metric`).")
    return out


def md_inline(text: str) -> str:
    """Escape, then render `code` spans of a caveat."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
