"""The report's words: every sentence report.md and report.html show, made here from the report's numbers (a verdict's
own sentences are judge/prose.py's). Plain text in which backticks mark `code` spans; report/markup.py renders them
per format, and every name and line in them is escaped there, never here.
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from graphsweep.constraints.catalogue import BY_ID
from graphsweep.constraints.runtime import NO_CUDA
from graphsweep.judge import interval as iv
from graphsweep.judge import parity as lp
from graphsweep.judge import prose
from graphsweep.judge import verdict as vd
from graphsweep.report import gpu_time as gt
from graphsweep.report.data import Cost, Summary, SweepTables, as_number, flag
from graphsweep.report.shapes import fmt_value
from graphsweep.report.recommend import Answer, Crash, Recommendation, gated, \
    rule_ids
from graphsweep.vocab import (
    BASELINE_FAILED, BLOCKED, INCONCLUSIVE, LOOP_BUDGET, LOOP_LIVE, LOOP_NO_ROUNDS, LOOP_NOTHING_TO_RUN, LOOP_OUT_OF_GPU_HOURS, LOOP_OUT_OF_REPEATS,
    SPEEDUP, TIMING_VERDICTS, UNVERIFIED, VERDICTS,
)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Numbers and names
def fmt_number(v: Any, spec: str = ".1f", suffix: str = "") -> str:
    f = as_number(v)
    return "—" if f is None else f"{f:{spec}}{suffix}"


def fmt_q(v: Any) -> str:
    q = as_number(v)
    if q is None:
        return "—"
    return "<0.001" if q < 0.001 else f"{q:.3f}" if q < 0.1 else f"{q:.2f}"


def fmt_percent(x: float) -> str:
    return f"{x * 100:.0f}%" if x * 100 >= 1 or x == 0 else f"{x * 100:.1f}%"


def fmt_pair(eager: Any, graph: Any) -> str:
    """'10.50 → 10.00' (eager → graph), '—' without either."""
    e, g = as_number(eager), as_number(graph)
    if e is None and g is None:
        return "—"
    return f"{fmt_number(e, '.2f')} → {fmt_number(g, '.2f')}"


def cell_label(row: pd.Series | dict[str, Any], axes: Sequence[str]) -> str:
    """'hidden=256 heads=4': the given axes that the row sets (an axis a shape leaves unset is left out)."""
    parts = [f"{a}={fmt_value(row.get(a))}" for a in axes if a in row and fmt_value(row.get(a))]
    return " ".join(parts)


def level(t: SweepTables) -> str:
    """'95%' or '97.5%': the level of the sweep's intervals."""
    return f"{t.confidence * 100:g}%"


def memory_figure(t: SweepTables) -> str:
    """What the sweep's memory columns measure ('steady-state reserved memory'), from comparison `mem_metric`."""
    metrics = t.comparison["mem_metric"].dropna().unique() if "mem_metric" in t.comparison.columns else []
    return " / ".join(vd.MEMORY_FIGURES.get(m, m) for m in metrics) or "the runs' memory figure"


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


# --------------------------------------------------------------------------------------------------
# A cell's reason in the table
def judged_by_fields(comparison: pd.DataFrame) -> bool:
    """Whether a comparison table carries the fields its reasons are made from (schema version 3 on)."""
    return "paired_outcome" in comparison.columns


def reason(row: pd.Series | dict[str, Any], fields: bool = True) -> str:
    """A cell's whole sentence, made here from its fields (judge/prose.py), as comparison.parquet stores it; a table
    judged before schema version 3 (`fields` False) has no such fields: its stored sentence is shown as it is."""
    return prose.reason(row).strip() if fields else str(row.get("reason") or "").strip()


def short_reason(row: pd.Series | dict[str, Any], fields: bool = True) -> str:
    """The reason without what the table already shows: for a timing verdict, only what its interval does not say
    (the planning hint, the memory price, thin or coarse data, excluded runs), from the fields (judge/prose.py)."""
    if row.get("verdict") in TIMING_VERDICTS and fields and as_number(row.get("alpha")) is not None:
        # thin data is marked ¹ next to the figures and explained once under the table, not in every row
        return "; ".join(prose.notes(dict(row, thin=False)))
    return reason(row, fields)


def display_reason(row: pd.Series | dict[str, Any], fields: bool = True) -> str:
    """short_reason, made to fit a table cell: run ids without their shape (a run's own reason is the parser's
    sentence from its fields, e.g. a CUDA OOM's `allocating 20.00 MiB`: nothing here reads a log's text)."""
    text = short_reason(row, fields)
    sid = str(row.get("shape_id") or "")
    if sid:
        text = text.replace(sid + ".", "")
    return text.strip()


AA_NOTE = "A/A control: eager vs eager, any speedup/slowdown is a false positive"
THIN_MARK = f"an arm of fewer than {iv.MIN_OWN_JOBS} jobs: its spread is the allowance, not measured"
GRAPHS_TITLE = ("CUDA graphs the cell's graph runs captured (graphed layers for TE scopes, 1 for a full-iteration "
                "graph, +1 for the optimizer's), the fewest of its runs; 0: it trained eager")
HEADROOM_TITLE = "GPU memory left above the graph arm's figure"


# --------------------------------------------------------------------------------------------------
# GPU-hours
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


def per_verdict_sentence(cost: Cost, order: Sequence[str]) -> str:
    per = ", ".join(f"{v} {cost.per_verdict_gpu_h[v]:.2f}" for v in order)
    return f"Per verdict (graph runs + the cell's share of its shape's eager runs): {per}."


def cards(cost: Cost, s: Summary) -> list[tuple[str, str, str]]:
    """The cost figures at the top of report.html: (what, value, detail)."""
    spent = f"{s.n_runs} runs, setup and capture included" + (f"; {estimate_words(cost)}" if cost.estimated_gpu_h else "")
    blocked = (f"{cost.blocked_runs} preflight-blocked runs, estimated" if cost.blocked_runs else
               "no run was blocked by preflight")
    if cost.blocked_unestimated:
        blocked += f"; {cost.blocked_unestimated} without estimate"
    out = [
        ("GPU-hours spent", f"{cost.spent_gpu_h:.2f}", spent),
        ("avoided by preflight", f"≈{cost.avoided_blocked_gpu_h:.2f}", blocked),
        ("avoided by shared baselines", f"{cost.avoided_shared_gpu_h:.2f}",
         f"vs one eager run per variant (naive ≈{cost.naive_gpu_h:.2f})"),
    ]
    if cost.gated_runs:
        out.append(("avoided by the launch gate", f"≈{cost.avoided_gate_gpu_h:.2f}",
                    f"{cost.gated_runs} graph runs skipped on their eager arm's GPU-busy diagnostic"))
    return out


def aa_card(t: SweepTables, s: Summary) -> tuple[str, str, str]:
    """The A/A control's figure at the top of report.html: the false-positive rate it measured."""
    if not s.n_control:
        return "A/A false-positive rate", "—", "no A/A control cells were run (aa_control: true)"
    rate = f"{s.aa_fp / s.aa_judged:.0%}" if s.aa_judged else "n/a"
    return ("A/A false-positive rate", rate,
            f"{s.aa_fp} of {s.aa_judged} eager-vs-eager cells flagged; expected ≤ {(1 - t.confidence) * 100:g}%")


GPU_TIME_TITLE = "Where the GPU-hours went"
GPU_TIME_MISSING = ("runs.parquet has no time_* columns (written by an older graphsweep): `snakemake --forcerun "
                    "aggregate` adds them.")
GPU_PARTS = {
    gt.STARTUP: "start-up: job start to the first iteration",
    gt.WARMUP: "warmup and capture: iterations before the steady window",
    gt.STEADY: "steady windows: what the verdicts measured",
    gt.STEADY_UNUSABLE: "steady windows of runs with no usable measurement",
    gt.AFTER: "iterations after the steady window",
    gt.UNTIMED: "inside the loop, in no iteration's elapsed time (evaluation, checkpoints)",
    gt.TEARDOWN: "teardown: the last iteration's end to the job's end",
    gt.UNSPLIT: "start-up and teardown, not split ({n} runs: pair jobs, iteration lines without time stamps)",
    gt.UNKNOWN: "not split: {n} runs whose iterations do not fit their job's wall time",
}


def gpu_part(part: str, runs: int) -> str:
    return GPU_PARTS[part].format(n=runs)


def share(h: float, total: float) -> str:
    return f"{h / total:.1%}" if total else "—"


def gpu_time_sentences(g: gt.GpuTime) -> list[str]:
    out = []
    if g.runs:
        out.append(f"{share(g.measured_h, g.total_h)} of the sweep's {g.total_h:.3f} GPU-hours measured something: "
                   f"the steady windows of {g.measured_runs} of its {g.runs} runs.")
        if g.stamped_runs:
            out.append(f"Start-up and teardown of {g.stamped_runs} runs are split at their first iteration line's time "
                       "stamp (±1 s per run); the iterations' parts are their elapsed times.")
    if g.no_wall_runs:
        out.append(f"{g.no_wall_runs} runs have no job wall time (ingested logs) and are not in the table: their "
                   f"iterations took {g.no_wall_loop_h:.3f} GPU-hours, {g.no_wall_steady_h:.3f} of them in steady "
                   "windows.")
    return out


# --------------------------------------------------------------------------------------------------
# Read with care
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
        gated_ = (f" {len(s.gated)} cell(s) whose own interval excluded the band did not pass this check and read "
                  "inconclusive." if s.gated else "")
        out.append(
            f"Many variants, one baseline: every variant of a shape is compared with the same eager runs, so the "
            f"sweep's {s.bh_m} timed cells (A/A controls excluded) are one family. A speedup or slowdown is decided "
            f"only when its Benjamini–Hochberg q is below {1 - t.confidence:g} as well as its own interval. When no "
            f"variant has an effect, the chance that this sweep prints any false speedup or slowdown is then at most "
            f"{1 - t.confidence:g} (measured on real H200 jobs, within the resampling error); when some do, on average "
            f"at most {1 - t.confidence:g} of its decided speedups and slowdowns are false, and a real effect among "
            f"many variants without one may need more repeats to pass (docs/statistics.md, \"Many variants, one "
            f"baseline\").{gated_}"
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


# --------------------------------------------------------------------------------------------------
# Recommendations: a shape's headline, what it rests on, and what qualifies it
def intro(t: SweepTables) -> str:
    return (f"Per shape: the fastest graph variant whose speedup is decided (its whole {level(t)} interval above "
            f"1 + {t.margin:g}) and none of whose runs crashed, with its memory cost and what to paste into the training "
            "command; else what is known: the leading undecided variant and what would decide it, or why eager stays.")


NO_COMMAND = ("the plan does not record this variant's overrides (planned before graphsweep recorded them): see its "
              "runs' config.yaml, or write the plan again (snakemake --forcerun plan --rerun-triggers mtime)")
NO_CUDA_NOTE = ("No CUDA device here: the graph arms were blocked before any job and the eager baselines ran on this "
                f"machine's CPU; {NO_CUDA.advice}.")
HEADLINES = {
    Answer.UNDECIDED: "undecided", Answer.NOT_VERIFIED: "faster, not verified", Answer.NO_GPU: "no CUDA device here",
    Answer.CRASHED: "no recommendation",
    Answer.ALL_BLOCKED: "every graph variant blocked", Answer.STAY_EAGER: "stay eager",
    Answer.NO_BASELINE: "no recommendation", Answer.BROKEN_BASELINE: "no recommendation: broken baseline",
}


def headline(rec: Recommendation) -> str:
    """'use full_iteration', 'undecided', 'stay eager', 'no CUDA device here', ..."""
    return f"use {rec.choice.variant}" if rec.choice is not None else HEADLINES[rec.answer]


def gain(rec: Recommendation) -> str:
    """'6.89× [5.22, 9.11] faster, 9.42 → 1.37 ms per step, for +0.09 GB steady-state reserved memory (+58%)'."""
    ch = rec.choice
    if ch is None:
        return ""
    cost = prose.memory_cost(ch)
    return ", ".join(x for x in (f"{prose.speedup_text(ch)} faster", prose.step_times(ch), cost and f"for {cost}") if x)


def crash(c: Crash) -> str:
    """'not full: its run h.full.r2 crashed (crashed at steady (iteration 12): cuda_ima (...))'."""
    runs = f"its run {c.run_ids[0]}" if len(c.run_ids) == 1 else f"its runs {', '.join(c.run_ids)}"
    return f"not {c.variant}: {runs} crashed" + (f" ({c.cause})" if c.cause else "") + ": a setting that crashes is " \
        "never recommended"


# Why a leader is still undecided, by the loop's end (vocab LOOP_ENDS)
LOOP_STOPPED = {
    LOOP_OUT_OF_REPEATS: " when the loop reached its most repeats per arm (decide.max_repeats)",
    LOOP_OUT_OF_GPU_HOURS: " when the loop's GPU-hour budget ran out (decide.gpu_hours)",
    LOOP_NOTHING_TO_RUN: " (its next runs cannot run on this machine: blocked at plan time)",
    LOOP_NO_ROUNDS: " (the loop's next rounds were not run here: `--config rounds=false` judged the runs there are)",
}


def undecided(rec: Recommendation) -> str:
    """The leading undecided variant with its interval, what would decide it and what it costs."""
    row, td = rec.leader, rec.to_decide
    assert row is not None and td is not None
    head = f"{row.variant} leads at {prose.speedup_text(row)}"
    if td.status == LOOP_LIVE:
        head += ", still being measured"
    elif td.status == LOOP_BUDGET:
        head += LOOP_STOPPED.get(td.end or "", " when the budget ran out")
    hours = f" (≈{td.gpu_hours:.2f} GPU-hours)" if td.gpu_hours is not None else ""
    if td.repeats is not None and not flag(row.get("resolution_limited")):
        need = f"about {td.repeats} repeats per arm{hours} would decide it"
    elif flag(row.get("family_gated")):
        need = (f"decided on its own but not by the sweep's family check (q {fmt_q(row.get('q_value'))}): more "
                f"repeats lower its q{hours}")
    else:
        need = prose.repeats(row, hint=False) + hours
    how = "continue the sweep with" if td.command else "`graphsweep more-repeats` plans the repeats"
    return f"{head}; {need}; {how}"


def launch_line(rec: Recommendation) -> str:
    """The shape's launch-boundness from its eager arm, and how close the measured graphs came to it."""
    row = next((c for c in rec.cells if as_number(c.get("graph_ceiling")) is not None), None)
    if row is None:
        return ""
    text = prose.launch(row)
    timed = [c for c in rec.cells if as_number(c.get("speedup")) is not None and c.verdict in TIMING_VERDICTS
             and c.verdict != UNVERIFIED]
    best = max(timed, key=lambda c: as_number(c.get("speedup")) or 0.0) if timed else None
    if best is not None:
        text += f"; the best graph measured {as_number(best.get('speedup')):.2f}x ({best.variant})"
    return text


def host_lines(rec: Recommendation) -> list[str]:
    """Per scope of the shape: how much of the eager step's host time its graphs take off the host and what stays
    eager (judge/host.py); and, where a variant is blocked by a constraint that knows what could reach the GPU-busy
    ceiling instead (its `advice`, graphsweep/constraints), that."""
    out = [text for c in rec.cells if (text := prose.host(c))]
    ceiling = next((as_number(c.get("graph_ceiling")) for c in rec.cells if as_number(c.get("graph_ceiling")) is not None),
                   None)
    reach = f"the GPU-busy ceiling ({ceiling:.2f}x)" if ceiling is not None else "the GPU-busy ceiling"
    said: set[str] = set()
    for c in rec.cells:
        for rule in rule_ids(c) if c.verdict == BLOCKED else ():
            advice = BY_ID[rule].advice if rule in BY_ID and rule != NO_CUDA.id else ""
            if advice and rule not in said:
                said.add(rule)
                out.append(advice.format(variant=c.variant, reach=reach))
    return out


def _group(verdict: str, cells: list[pd.Series], margin: float) -> str:
    return prose.group(verdict, cells, margin, gated=verdict == BLOCKED and gated(cells))


def details(rec: Recommendation, t: SweepTables) -> tuple[str, list[str]]:
    """(what the headline rests on, what qualifies it): the ranking, the other variants' verdicts, the launch line,
    what more repeats would decide."""
    out: list[str] = []
    ch = rec.choice
    crashed = rec.crashed_ids()
    others = [c for c in rec.cells if (ch is None or c.cell_id != ch.cell_id) and c.cell_id not in crashed]
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
        if rec.answer is Answer.NO_GPU and c.verdict == BLOCKED and set(rule_ids(c)) == {NO_CUDA.id}:
            continue  # the headline says it
        if rec.leader is not None and c.cell_id == rec.leader.cell_id:
            continue  # so does the headline of the leading undecided variant
        groups.setdefault(str(c.verdict), []).append(c)
    order = [*[v for v in VERDICTS if v in groups], *[v for v in groups if v not in VERDICTS]]
    if rec.answer is Answer.NOT_VERIFIED:  # the faster, unverified variants rest the headline: said first
        order = [v for v in (UNVERIFIED, prose.DRIFTED) if v in groups] + \
            [v for v in order if v not in (UNVERIFIED, prose.DRIFTED)]
    if rec.answer is Answer.ALL_BLOCKED:
        order = [BLOCKED] + [v for v in order if v != BLOCKED]
    if rec.answer in (Answer.NO_BASELINE, Answer.BROKEN_BASELINE):  # why there is nothing to recommend comes first
        order = [BASELINE_FAILED] + [v for v in order if v != BASELINE_FAILED]
    sentences = [_group(v, groups[v], t.margin) for v in order]
    launch = [x for x in (launch_line(rec), *host_lines(rec)) if x]
    if ch is not None:
        return gain(rec), out + launch + sentences
    first = {
        Answer.UNDECIDED: undecided(rec) if rec.leader is not None else "",
        Answer.STAY_EAGER: "no graph variant measured faster than eager",
        Answer.NO_GPU: "graph arms blocked; the eager baselines ran",
        Answer.CRASHED: "",  # the crashed runs say why
    }.get(rec.answer)
    if first is None:  # the group the headline rests on
        first, sentences = (sentences[0], sentences[1:]) if sentences else ("", sentences)
    return first, out + launch + sentences
