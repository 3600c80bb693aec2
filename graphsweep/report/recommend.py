"""Recommendations: per shape, which graph setting to use. The fastest variant whose speedup is decided (verdict
speedup; of several, the highest speedup, saying when intervals overlap so the ranking is not certain), with its
memory price and the overrides to paste; else "stay eager", saying which verdicts kept every variant out.

Reads the verdict fields of comparison.parquet and plan.parquet's graph_overrides, never a reason's text. The same
sentences make the Markdown list and the HTML table.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import pandas as pd

from graphsweep.constraints.rules import FULL_ITERATION_DROPLESS_MOE
from graphsweep.judge import parity as lp
from graphsweep.judge import prose
from graphsweep.judge import verdict as vd
from graphsweep.report.colours import VERDICT_COLORS
from graphsweep.vocab import AA, BASELINE_FAILED, BLOCKED, INCONCLUSIVE, NEUTRAL, SLOWDOWN, SPEEDUP, VERDICTS
from graphsweep.report.data import GATE_CLASS, SweepTables, as_number, flag
from graphsweep.report.shapes import Overrides, graph_overrides, shape_axes
from graphsweep.report.text import cell_label, level, md_code, md_inline, md_text


@dataclass
class Recommendation:
    shape_id: str
    cells: list[pd.Series]  # the shape's graph cells (A/A control excluded), in table order
    choice: pd.Series | None  # the recommended cell, None: stay eager (or nothing to compare)
    overrides: Overrides | None  # what the choice's command adds to eager (None: not in the plan)

    @property
    def baseline_failed(self) -> bool:
        """The shape's eager runs failed: there is nothing to stay with, and nothing was compared."""
        return self.choice is None and any(c.verdict == BASELINE_FAILED for c in self.cells)

    @property
    def baseline_broken(self) -> bool:
        """An eager-like run of the shape went NaN/Inf: the baseline trains nothing to compare with."""
        return any(c.verdict == BASELINE_FAILED and c.get("paired_outcome") == vd.BASELINE_LOSS_NONFINITE
                   for c in self.cells)

    def rivals(self) -> list[pd.Series]:
        """Other timed cells whose interval reaches the choice's: the data do not rank the choice above them."""
        if self.choice is None:
            return []
        lo = as_number(self.choice.get("ci_low"))
        out = []
        for c in self.cells:
            hi = c.get("ci_high")  # an open interval (ci_high inf) reaches every speedup
            hi = math.inf if isinstance(hi, float) and math.isinf(hi) and hi > 0 else as_number(hi)
            eligible = c.verdict == INCONCLUSIVE or (c.verdict == SPEEDUP and c.get("loss_parity") == lp.PARITY_OK)
            if c.cell_id != self.choice.cell_id and eligible and lo is not None and hi is not None and hi >= lo:
                out.append(c)
        return out


def recommend(t: SweepTables) -> list[Recommendation]:
    """One recommendation per shape that has a graph cell, in the comparison table's order."""
    c = t.comparison
    if not len(c):
        return []
    main = c[c.variant != AA]
    out = []
    for sid in dict.fromkeys(main.shape_id):
        cells = [r for _, r in main[main.shape_id == sid].iterrows()]
        # only a decided speedup whose every graph run trains the eager model (parity ok) is recommended
        fast = [r for r in cells if r.verdict == SPEEDUP and as_number(r.get("speedup")) is not None
                and r.get("loss_parity") == lp.PARITY_OK]
        choice = max(fast, key=lambda r: as_number(r.get("speedup")) or 0.0) if fast else None
        found = graph_overrides(t, choice) if choice is not None else None
        out.append(Recommendation(str(sid), cells, choice, found if found and found.paste else None))
    return out


# --------------------------------------------------------------------------------------------------
# Words (plain text; `code` spans marked with backticks, rendered by each report)
def launch_line(rec: Recommendation) -> str:
    """The shape's launch-boundness from its eager arm, and how close the measured graphs came to it."""
    row = next((c for c in rec.cells if as_number(c.get("graph_ceiling")) is not None), None)
    if row is None:
        return ""
    text = prose.launch(row)
    full = [c for c in rec.cells if as_number(c.get("speedup")) is not None and c.verdict in (SPEEDUP, NEUTRAL,
                                                                                            SLOWDOWN, INCONCLUSIVE)]
    best = max(full, key=lambda c: as_number(c.get("speedup")) or 0.0) if full else None
    if best is not None:
        text += f"; the best graph measured {as_number(best.get('speedup')):.2f}x ({best.variant})"
    return text


def host_lines(rec: Recommendation) -> list[str]:
    """Per scope of the shape: how much of the eager step's host time its graphs take off the host and what stays
    eager (judge/host.py); and, where a full-iteration graph is blocked on a dropless MoE, what could reach the
    GPU-busy ceiling instead."""
    out = [text for c in rec.cells if c.get("variant") != AA and (text := prose.host(c))]
    blocked = [c for c in rec.cells if c.verdict == BLOCKED and FULL_ITERATION_DROPLESS_MOE in str(c.get("rule_id") or "")]
    if blocked:
        ceiling = next((as_number(c.get("graph_ceiling")) for c in rec.cells
                        if as_number(c.get("graph_ceiling")) is not None), None)
        reach = f"the GPU-busy ceiling ({ceiling:.2f}x)" if ceiling is not None else "the GPU-busy ceiling"
        out.append(f"{blocked[0].variant} is blocked on this dropless MoE; what could reach {reach}: a drop-and-pad "
                   "MoE (`model.moe_expert_capacity_factor` with `model.moe_pad_expert_input_to_capacity=true`) "
                   "captured whole with full_iteration takes every region off the host, but dropping tokens "
                   "changes the model: its loss parity must be established again against a drop-and-pad eager "
                   "baseline, not this one")
    return out


def _group(verdict: str, cells: list[pd.Series], margin: float) -> str:
    gated = verdict == BLOCKED and all(c.get("failure_class") == GATE_CLASS for c in cells)
    return prose.group(verdict, cells, margin, gated=gated)


def headline(rec: Recommendation) -> str:
    """'use full_iteration', 'stay eager' or 'no recommendation'."""
    if rec.choice is not None:
        return f"use {rec.choice.variant}"
    if rec.baseline_broken:
        return "no recommendation: broken baseline"
    return "no recommendation" if rec.baseline_failed else "stay eager"


def details(rec: Recommendation, t: SweepTables) -> list[str]:
    """What qualifies the headline: the ranking, the other variants' verdicts, what more repeats would decide."""
    out: list[str] = []
    ch = rec.choice
    others = [c for c in rec.cells if ch is None or c.cell_id != ch.cell_id]
    if ch is not None:
        rivals = rec.rivals()
        if rivals:
            out.append(
                f"not certain: {ch.variant}'s interval overlaps {'that' if len(rivals) == 1 else 'those'} of "
                f"{prose.named_speedups(rivals)}: the data do not rank them for certain"
            )
        also = [c for c in others if c.verdict == SPEEDUP and c.get("loss_parity") == lp.PARITY_OK
                and c.cell_id not in {r.cell_id for r in rivals}]  # a drifting run's cell is said below, not here
        if also:
            out.append("also faster, by less: " + prose.named_speedups(also))
        alpha = 1 - t.confidence
        q = as_number(ch.get("q_value"))
        if q is not None and q >= alpha:
            out.append(f"q = {q:.2g} ≥ {alpha:g}: the speedup may not survive the correction across the sweep's cells")
        if flag(ch.get("thin")):
            out.append(f"{prose.THIN}: more repeats would narrow it")
        if where := prose.band(ch):
            out.append(f"its lm loss follows eager's within the {where}")
        widest = as_number(ch.get("loss_band_max"))
        if widest is not None and widest > 2 * lp.LOSS_FLOOR:
            out.append(f"where this shape's eager runs part (up to ±{widest:.0%} of each other), the loss checks "
                       "little: the early iterations carry the check (docs/statistics.md \"Loss parity\"); check the "
                       "graph's numerics on a reproducible run before relying on them")
    elif not rec.baseline_failed and rec.cells:
        unproven = any(c.verdict == SPEEDUP for c in rec.cells)  # faster, but a graph run left eager's loss
        out.append("no variant is decided faster" + (" with the eager model's loss" if unproven else ""))
    launch = [x for x in (launch_line(rec), *host_lines(rec)) if x]  # after a broken baseline, when there is one
    groups: dict[str, list[pd.Series]] = {}
    for c in others:
        if c.verdict == SPEEDUP and c.get("loss_parity") != lp.PARITY_OK:
            groups.setdefault(prose.DRIFTED, []).append(c)  # faster, but a graph run left eager's loss
            continue
        if ch is not None and c.verdict == SPEEDUP:
            continue
        if ch is not None and c.verdict == INCONCLUSIVE and c.cell_id in {r.cell_id for r in rec.rivals()}:
            groups.setdefault(INCONCLUSIVE, []).append(c)  # said as a rival; its repeats still belong here
            continue
        groups.setdefault(str(c.verdict), []).append(c)
    order = [*[v for v in VERDICTS if v in groups], *[v for v in groups if v not in VERDICTS]]
    if rec.baseline_failed:  # the reason there is nothing to recommend comes first, before the launch line
        order = [v for v in order if v != BASELINE_FAILED]
        out.insert(0, _group(BASELINE_FAILED, groups[BASELINE_FAILED], t.margin))
    out += launch + [_group(v, groups[v], t.margin) for v in order]
    return out


def paste_words(rec: Recommendation) -> tuple[str, str]:
    """(what the overrides are called, the line to paste) for the choice; ('', '') when there is none."""
    o = rec.overrides
    if rec.choice is None or o is None:
        return "", ""
    return o.what, o.line  # what the workload calls them, recorded in the plan


# --------------------------------------------------------------------------------------------------
# The section in both reports
NO_COMMAND = ("the plan does not record this variant's overrides (planned before graphsweep recorded them): see its "
              "runs' config.yaml, or write the plan again (snakemake --forcerun plan --rerun-triggers mtime)")


def _shape_name(rec: Recommendation, t: SweepTables) -> str:
    return cell_label(rec.cells[0], shape_axes(t)) or rec.shape_id


def intro(t: SweepTables) -> str:
    return (f"Per shape: the fastest graph variant whose speedup is decided (its whole {level(t)} interval above "
            f"1 + {t.margin:g}), with its memory cost and what to paste into the training command; else eager, "
            "and why.")


def render_markdown(t: SweepTables, recs: list[Recommendation]) -> list[str]:
    if not recs:
        return []
    out = ["### Recommendations", "", intro(t), ""]
    for rec in recs:
        head = f"- **{md_text(_shape_name(rec, t))}**: "
        ch = rec.choice
        notes = details(rec, t)
        if ch is not None:
            cost = prose.memory_cost(ch)
            gain = [f"{prose.speedup_text(ch)} faster", prose.step_times(ch), cost and f"for {cost}"]
            head += f"**{md_text(headline(rec))}**: " + md_text(", ".join(x for x in gain if x))
        else:
            head += f"**{headline(rec)}**" + (f": {_md_words(notes.pop(0))}" if notes else "")
        out.append(head)
        what, line = paste_words(rec)
        if line:
            out.append(f"  - {what} to paste: {md_code(line)}")
            if rec.overrides and rec.overrides.shared:
                out.append(f"  - both arms also ran with {md_code(rec.overrides.shared_line)} (as measured)")
        elif ch is not None:
            out.append(f"  - {NO_COMMAND}")
        out += [f"  - {_md_words(d)}" for d in notes]
    out.append("")
    return out


def _md_words(text: str) -> str:
    """Plain words with `code` spans kept as code and everything else escaped."""
    parts = text.split("`")
    return "".join(md_code(p) if k % 2 else md_text(p) for k, p in enumerate(parts))


def _paste_html(rec: Recommendation) -> str:
    what, line = paste_words(rec)
    if not line:
        return f'<span class="muted">{html.escape(NO_COMMAND)}</span>' if rec.choice is not None else ""
    out = f'<div class="muted">{html.escape(what)}</div><code class="paste">{html.escape(line)}</code>'
    if rec.overrides and rec.overrides.shared:
        out += ('<div class="muted">both arms also ran with</div>'
                f'<code class="paste shared">{html.escape(rec.overrides.shared_line)}</code>')
    return out


def render_html(t: SweepTables, recs: list[Recommendation]) -> str:
    if not recs:
        return ""
    show_paste = any(rec.choice is not None for rec in recs)
    head = (f"<th>shape</th><th>use</th><th class='num'>speedup [{html.escape(level(t))} CI]</th>"
            "<th class='num'>step ms<br>eager → graph</th><th class='num'>Δ mem GB</th>"
            + ("<th>paste</th>" if show_paste else "") + "<th>why</th>")
    rows = []
    for rec in recs:
        ch = rec.choice
        if ch is not None:
            use = f'<span class="badge" style="background:{VERDICT_COLORS[SPEEDUP]}">{html.escape(str(ch.variant))}</span>'
            ci = f' <span class="ci">{prose.ci_text(ch)}</span>' if prose.ci_text(ch) else ""
            speed = f"<b>{html.escape(prose.speedup_text(ch, ci=False))}</b>{ci}"
            e, g = as_number(ch.get("eager_step_ms")), as_number(ch.get("graph_step_ms"))
            steps = f"{e:.2f} → {g:.2f}" if e is not None and g is not None else "—"
            d = as_number(ch.get("mem_delta_gb"))
            mem = f"{d:+.2f}" if d is not None else "—"
        else:
            use = f'<span class="rec-eager">{html.escape(headline(rec))}</span>'
            eager = [as_number(c.get("eager_step_ms")) for c in rec.cells]
            eager = [x for x in eager if x is not None]
            speed, mem = '<span class="muted">—</span>', ""
            steps = f"{eager[0]:.2f} (eager)" if eager else ""
        why = "".join(f"<li>{md_inline(x)}</li>" for x in details(rec, t))
        rows.append(
            f'<tr data-shape="{html.escape(rec.shape_id)}"><td class="shape">{html.escape(_shape_name(rec, t))}</td>'
            f'<td>{use}</td><td class="num">{speed}</td><td class="num">{steps}</td><td class="num">{mem}</td>'
            + (f'<td class="rec-paste">{_paste_html(rec)}</td>' if show_paste else "")
            + f'<td class="rec-why"><ul>{why}</ul></td></tr>'
        )
    return (f'<h2 id="recommendations">Recommendations</h2><p class="note">{html.escape(intro(t))}</p>'
            f'<table class="cells recs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
