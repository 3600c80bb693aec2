"""report.md: the summary that goes into a pull request.
"""

from __future__ import annotations

from typing import Any

from graphsweep.judge import interval as iv
from graphsweep.judge import prose
from graphsweep.vocab import SLOWDOWN, SPEEDUP, TIMING_VERDICTS
from graphsweep.report import gpu_time, recommend
from graphsweep.report.data import Cost, Summary, SweepTables, VERDICT_ORDER, flag, is_control
from graphsweep.report.text import caveats, cost_sentence, display_reason, level, fmt_number, fmt_q, fmt_value, md_escape, md_text, truncate
from graphsweep.report.captured import graphs_held


def render_markdown(t: SweepTables, cost: Cost, s: Summary) -> str:
    conf = level(t)
    out = [f"## graphsweep: {t.sweep}", ""]
    if t.description:
        out += [md_text(t.description), ""]  # the spec's words, never raw HTML
    counts = ", ".join(f"**{n}** {v}" for v, n in s.counts.items() if n)
    out.append(f"{s.n_cells} cells ({counts}); {s.n_runs} runs; margin ±{t.margin:g}, {conf} intervals.")
    out.append("")
    out += recommend.render_markdown(t, recommend.recommend(t))
    out += ["### Cells", ""]
    axes = [a for a in t.axes if a in t.comparison.columns]
    head = [*axes, "variant", "verdict", f"speedup [{conf} CI]", "q", "eager ms", "graph ms", "Δ mem GB", "graphs",
            "reason"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join("---:" if h in ("q", "eager ms", "graph ms", "Δ mem GB", "graphs") else "---"
                              for h in head) + "|")
    for _, r in t.comparison.iterrows():
        verdict = r.verdict if r.verdict not in (SPEEDUP, SLOWDOWN) else f"**{r.verdict}**"
        if is_control(r):
            verdict += " (A/A)"
        cells = [fmt_value(r.get(a)) for a in axes] + [
            str(r.variant), verdict, prose.speedup_text(r) + _thin_mark(r), fmt_q(r.get("q_value")), fmt_number(r.get("eager_step_ms"), ".2f"),
            fmt_number(r.get("graph_step_ms"), ".2f"), fmt_number(r.get("mem_delta_gb"), "+.2f"), graphs_held(r),
            truncate(display_reason(r), 160),
        ]  # fmt: skip
        out.append("| " + " | ".join(md_escape(c) for c in cells) + " |")
    if any(_thin_mark(r) for _, r in t.comparison.iterrows()):
        out += ["", f"¹ an arm of fewer than {iv.MIN_OWN_JOBS} jobs: its spread is the allowance, not measured "
                "(Read with care)."]
    out += ["", "**GPU-hours**: " + cost_sentence(cost), ""]
    if cost.per_verdict_gpu_h:
        per = ", ".join(
            f"{v} {cost.per_verdict_gpu_h[v]:.2f}" for v in dict.fromkeys([*VERDICT_ORDER, *cost.per_verdict_gpu_h])
            if v in cost.per_verdict_gpu_h
        )  # fmt: skip
        out += [f"Per verdict (graph runs + the cell's share of its shape's eager runs): {per}.", ""]
    out += gpu_time.render_markdown(gpu_time.gpu_time(t.runs))
    out += ["**Read with care**", ""]
    out += [f"- {c}" for c in caveats(t, s)]
    out.append("")
    return "\n".join(out)


def _thin_mark(r: Any) -> str:
    return "¹" if r.get("verdict") in TIMING_VERDICTS and flag(r.get("thin")) else ""
