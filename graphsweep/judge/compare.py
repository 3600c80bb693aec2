"""Judge every cell: graph runs against the eager baseline of their shape -> comparison.parquet.

Works from the plan and the run tables alone (no spec), so logs ingested from elsewhere compare the same way.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from graphsweep import logformat as lf
from graphsweep import provenance
from graphsweep.judge import host
from graphsweep.judge import interval as iv
from graphsweep.judge import loop
from graphsweep.judge import parity as lp
from graphsweep.judge import prose
from graphsweep.judge import verdict as stats
from graphsweep.judge import work as jw
from graphsweep.judge.design import Design
from graphsweep.store.tables import COMPARISON_COLUMNS, PLAN_COLUMNS, read_table, write_table
from graphsweep.store.timeparts import spent_by_run
from graphsweep.vocab import (
    AA, BLOCKED, COMPARING_VERDICTS, CONTROL, EAGER, FAILED, GRAPH, INCONCLUSIVE, INVALID, LOOP_BUDGET, LOOP_LIVE,
    LOOP_UNTIMED, NOT_COMPARABLE, PAIR, SLOWDOWN, SPEEDUP, TIMING_VERDICTS, NO_GRAPH, UNPARSEABLE, USABLE_OUTCOMES,
    UNVERIFIED, pair_run_id,
)  # fmt: skip


GATED_VERDICTS = (SPEEDUP, SLOWDOWN, UNVERIFIED)  # the claims of a difference the family gate checks


def _steady_times(by_run: dict[str, pd.DataFrame], run: pd.Series) -> list[float]:
    """The elapsed times of the run's recorded steady window."""
    first, last = run.get("steady_first"), run.get("steady_last")
    it = by_run.get(run.run_id)
    if it is not None and _is_paired(run) and "steady" in it.columns:  # a pair arm: two segments, two windows
        return it[it.steady.fillna(False).astype(bool)].elapsed_ms.dropna().astype(float).tolist()
    if it is None or pd.isna(first) or pd.isna(last):
        return []
    it = it[(it.iteration >= first) & (it.iteration <= last)]
    return it.elapsed_ms.dropna().astype(float).tolist()


def _is_paired(run: pd.Series) -> bool:
    pair = run.get("pair_id")
    return isinstance(pair, str) and bool(pair)


def _pair_arms(runs: pd.DataFrame, jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The measured arms of a cell's pair jobs, both in repeat order (judge_cell pairs them by position)."""
    if not len(runs) or "pair_id" not in runs.columns:
        return runs.iloc[:0], runs.iloc[:0]
    mine = runs[runs.pair_id.isin(jobs.run_id)]
    order = {rid: k for rid, k in zip(jobs.run_id, jobs["repeat"])}
    mine = mine.assign(_order=mine.pair_id.map(order)).sort_values("_order").drop(columns="_order")
    return mine[mine.arm == EAGER], mine[mine.arm != EAGER]


def _losses(by_run: dict[str, pd.DataFrame], run: pd.Series) -> tuple[dict[int, float], int]:
    """(iteration -> lm loss, the iterations each value averages) of a run; a pair arm's first segment, numbered
    within it (both arms start there).

    Only what the log printed: a line without the `lm loss` key reads NaN in iterations.parquet, and that is a NaN
    only where the log's own print pattern expects a loss (logformat.loss_broken_from; from the parser's NaN
    iteration on, too); a log that prints its loss every N iterations is compared on the iterations it printed. A
    log that prints a line every N iterations holds the mean over them there (parity.on_grid)."""
    it = by_run.get(run.run_id)
    if it is None or "loss" not in it.columns:
        return {}, 1
    if "segment" in it.columns and "segment_iteration" in it.columns and it.segment.notna().any():
        first = it.segment.dropna().iloc[0]
        it = it[it.segment == first].assign(iteration=lambda d: d.segment_iteration)
    rows = sorted((int(i), float(x)) for i, x in zip(it.iteration, it.loss) if pd.notna(i))
    # lines whose every iteration was skipped (an fp16 loss-scale skip) hold no loss: neither a NaN nor a value
    skipped = lf.whole_lines_skipped(sorted(zip(it.iteration.astype(int), it.skipped_iterations.astype(float)))) \
        if "skipped_iterations" in it.columns else set()
    rows = [(i, x) for i, x in rows if i not in skipped]
    broken = lf.loss_broken_from(rows)
    failed = _number(run, "failed_iteration")
    if run.get("error_class") == stats.NAN_CLASS and failed is not None and any(math.isfinite(x) for _, x in rows):
        broken = int(failed) if broken is None else min(broken, int(failed))
    loss = {i: x for i, x in rows if math.isfinite(x) and (broken is None or i < broken)}
    if broken is not None:  # from there on the training is NaN: what it printed after means nothing
        after = {i: x for i, x in rows if i >= broken and not math.isfinite(x)}
        loss.update(after or {broken: math.nan})
    return loss, lf.print_interval([i for i, _ in rows])


def _gpu_names(*arms: pd.DataFrame) -> str | None:
    """The GPUs the cell's runs ran on, as each job recorded them (prov_gpu_name): one name, or a list when mixed."""
    names = sorted({str(n) for a in arms if "prov_gpu_name" in a.columns for n in a.prov_gpu_name.dropna()})
    return ", ".join(names) or None


def memory_figure(eager_runs: pd.DataFrame, graph_runs: pd.DataFrame) -> str | None:
    """The first of MEMORY_FIGURES that both arms have for at least one run (for a graph-only OOM: eager alone)."""
    for col in stats.MEMORY_FIGURES:
        have_e = col in eager_runs.columns and eager_runs[col].notna().any()
        have_g = col in graph_runs.columns and graph_runs[col].notna().any()
        graph_ran = "outcome" in graph_runs.columns and graph_runs.outcome.isin(USABLE_OUTCOMES).any()
        if have_e and (have_g or not graph_ran):
            return col
    return None


def _number(run: pd.Series, key: str) -> float | None:
    v = run.get(key)
    return None if v is None or pd.isna(v) else float(v)


def _plan_seeds(plan: pd.DataFrame) -> dict[str, int]:
    """run id -> the seed its command set (a pair job's arms share their job's)."""
    if "seed" not in plan.columns:
        return {}
    out = {}
    for rid, arm, seed in zip(plan.run_id, plan.arm, plan.seed):
        if seed is not None and pd.notna(seed):
            out[rid] = int(seed)
            if arm == PAIR:
                out.update({pair_run_id(rid, a): int(seed) for a in (EAGER, GRAPH, CONTROL)})
    return out


def arm_runs(runs: pd.DataFrame, by_run: dict[str, pd.DataFrame], seeds: Mapping[str, int],
             mem: str | None) -> list[stats.ArmRun]:
    """The judge's record of each run of an arm, from its runs.parquet row and its iteration rows.

    Every run brings its loss, usable or not: a run that NaN'd is a result about the model, not a lost run.
    """
    out = []
    for _, r in runs.iterrows():
        usable = r.get("outcome") in USABLE_OUTCOMES
        loss, span = _losses(by_run, r)
        seed = _number(r, "seed")  # the seed the log states, else the one its command set
        seed = seeds.get(r.run_id) if seed is None else seed
        out.append(
            stats.ArmRun(
                run_id=r.run_id,
                outcome=str(r.get("outcome") or UNPARSEABLE),
                step_ms=_steady_times(by_run, r) if usable else [],
                resolution_ms=_number(r, "elapsed_resolution_ms"),
                mem_gb=_number(r, mem) if mem else None,
                reason=str(r.get("reason") or ""),
                error_class=None if pd.isna(r.get("error_class")) else r.get("error_class"),
                seed=None if seed is None else int(seed),
                loss=loss,
                loss_span=span,
                steady_reason=str(r.get("steady_reason") or ""),
                gpu_busy_ms=_number(r, "gpu_busy_ms"),
                graphs_captured=None if (n := _number(r, "graphs_captured")) is None else int(n),
                transient=isinstance(r.get("transient"), str) and bool(r.get("transient")),
                capture_iteration=None if (c := _number(r, "capture_iteration")) is None else int(c),
            )
        )
    return out


def judge_runs(eager_runs: pd.DataFrame, graph_runs: pd.DataFrame, by_run: dict[str, pd.DataFrame],
               seeds: Mapping[str, int], *, margin: float, alpha: float, paired: bool = False,
               control: bool = False, reference_runs: pd.DataFrame | None = None, pool: bool = False,
               may_differ: Sequence[str] = (), look: iv.Look | None = None,
               design: Design | None = None) -> stats.Verdict:
    """One cell from its runs' table rows: the memory figure, the arms' records, the verdict, and whether the arms may
    be compared at all (check_comparable: one environment, the same work; `may_differ`: configuration keys allowed to
    differ beyond the graph settings, judge/work.py).

    The one path from runs to a verdict: the workflow's compare (below) and `graphsweep compare` (commands/compare.py,
    from logs) both call it. `reference_runs` are more eager-like runs of the shape of the same seeds (the workflow:
    its A/A control runs; `graphsweep compare --reference`): loss references, checked against the eager runs like each
    other (parity.check_references); a NaN/Inf in one breaks the baseline. With `pool` (the workflow's A/A control
    runs) they are also part of the eager arm's timing: the same command as the eager runs, so the baseline of the
    shape's cells is all its eager runs. `look`: the decision loop's look the interval is for.
    """
    mem = memory_figure(eager_runs, graph_runs)
    ref = arm_runs(reference_runs, by_run, seeds, mem if pool else None) \
        if reference_runs is not None and len(reference_runs) else []
    v = stats.judge_cell(arm_runs(eager_runs, by_run, seeds, mem), arm_runs(graph_runs, by_run, seeds, mem),
                         margin=margin, alpha=alpha, paired=paired, control=control, mem_metric=mem, reference=ref,
                         pool_reference=pool, look=look, design=design)
    both = pd.concat([eager_runs, reference_runs]) if pool and reference_runs is not None else eager_runs
    check_comparable(v, both, graph_runs, may_differ)
    return v


def _judging(plan_path: Path) -> tuple[float, Mapping[str, Any], str]:
    """(margin, the spec as planned, its path) of the spec the plan was made from (plan.parquet's metadata)."""
    meta = pq.read_schema(plan_path).metadata or {}
    extra = json.loads(meta.get(b"graphsweep.extra", b"{}"))
    spec = extra.get("spec", {})
    return float(spec["margin"]), spec, str(extra.get("spec_path") or "")


def may_differ_of(spec: Mapping[str, Any]) -> list[str]:
    """The spec's arms_may_differ (a plan written before the key existed allowed no key to differ: its fact)."""
    return [str(k) for k in spec.get("arms_may_differ") or []]


def loop_of(spec: Mapping[str, Any], decide: Mapping[str, Any] | None) -> tuple[Design | None, int]:
    """(the looks, the budget in jobs per arm) of a planned sweep: its `decide` block as the plan recorded it (the
    budget as more-repeats raised it); (None, repeats) for a sweep judged once (no loop, or ingested logs, or a plan
    written before the loop)."""
    if not decide or not decide.get("enabled"):
        return None, int(spec.get("repeats") or 1)
    first = int(spec["repeats"])
    return (Design(first, int(decide["step"]), max(int(decide["horizon"]), first)),
            max(first, int(decide["max_repeats"])))


@dataclass
class CellRuns:
    """A cell's plan rows, before a look picks how many of its repeats are judged."""

    row: dict[str, Any]  # the cell's fixed columns (ids, axes)
    first: pd.Series  # its first graph plan row
    eager_plan: pd.DataFrame  # the shape's eager runs (a paired cell: its pair jobs)
    graph_plan: pd.DataFrame  # the cell's graph (or control) runs
    control_plan: pd.DataFrame  # the shape's A/A control runs (the baseline's second half; none in an A/A cell)
    paired: bool
    control: bool  # an A/A cell

    @property
    def cell_id(self) -> str:
        return str(self.row["cell_id"])

    @property
    def shape_id(self) -> str:
        return str(self.first.shape_id)

    def blocked(self) -> pd.Series | None:
        """The plan row that blocks the cell before any run (its graph arm's, else its eager baseline's)."""
        for part in (self.graph_plan, self.eager_plan):
            hit = part[(part.status == BLOCKED) & (part["look"] <= 1)] if "look" in part.columns else \
                part[part.status == BLOCKED]
            if len(hit):
                return hit.iloc[0]
        return None

    def plans(self, n: int | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """(eager, graph, control) plan rows of repeats <= n (None: every repeat)."""
        def upto(df: pd.DataFrame) -> pd.DataFrame:
            return df if n is None else df[df["repeat"] <= n]
        return upto(self.eager_plan), upto(self.graph_plan), upto(self.control_plan)


def cells_of(plan: pd.DataFrame) -> list[CellRuns]:
    """Every cell of the plan (graph variants and A/A controls), in plan order."""
    axis_cols = [c for c in plan.columns if c not in set(PLAN_COLUMNS)]
    out = []
    for cell_id, graph_plan in plan[plan.arm != EAGER].groupby("cell_id", sort=False):
        first = graph_plan.iloc[0]
        eager_plan = plan[(plan.shape_id == first.shape_id) & (plan.arm == EAGER)]
        pair_jobs = graph_plan[graph_plan.arm == PAIR]
        control = first.arm == CONTROL or first.impl == NO_GRAPH
        control_plan = plan.iloc[:0] if control or len(pair_jobs) else \
            plan[(plan.shape_id == first.shape_id) & (plan.arm == CONTROL)]
        if len(pair_jobs):  # pairing: the cell's jobs ran both arms; its runs are their measured arms
            eager_plan = pair_jobs
        row = {"sweep": first.sweep, "cell_id": cell_id, "shape_id": first.shape_id, "variant": first.variant,
               "impl": first.impl, "scope": first.scope, **{c: first[c] for c in axis_cols}}
        out.append(CellRuns(row, first, eager_plan, graph_plan, control_plan, bool(len(pair_jobs)), control))
    return out


def judge_look(cell: CellRuns, n: int | None, runs_by_id: pd.DataFrame, runs: pd.DataFrame,
               by_run: dict[str, pd.DataFrame], seeds: Mapping[str, int], *, margin: float, alpha: float,
               look: iv.Look | None, design: Design | None, may_differ: Sequence[str] = ()) -> dict[str, Any]:
    """The cell's comparison row judged on its repeats <= n at `look` (None: one look at alpha)."""
    eager_plan, graph_plan, control_plan = cell.plans(n)
    row = dict(cell.row)
    row.update(eager_run_ids=list(eager_plan.run_id) + list(control_plan.run_id),
               graph_run_ids=list(graph_plan.run_id),
               eager_run_id=eager_plan.run_id.iloc[0] if len(eager_plan) else None,
               graph_run_id=cell.first.run_id, margin=margin)
    if cell.paired:
        other = CONTROL if cell.first.impl == NO_GRAPH else GRAPH
        row.update(eager_run_ids=[pair_run_id(j, EAGER) for j in graph_plan.run_id],
                   graph_run_ids=[pair_run_id(j, other) for j in graph_plan.run_id], pair_ids=list(graph_plan.run_id))
        row.update(eager_run_id=row["eager_run_ids"][0], graph_run_id=row["graph_run_ids"][0])
        eager_runs, graph_runs = _pair_arms(runs, graph_plan)
        if not len(eager_runs) and not len(graph_runs):
            row.update(verdict=FAILED, failure_detail="no run of this cell was recorded (runs.parquet has none)")
            return row
    controls = None
    if not cell.paired:
        def ran(ids: pd.Series) -> pd.DataFrame:
            return runs_by_id.loc[runs_by_id.run_id.isin(ids)] if len(runs) else runs
        # the baseline of a shape is all its eager runs: the eager arm and the A/A control's (the same command)
        eager_runs, graph_runs, controls = ran(eager_plan.run_id), ran(graph_plan.run_id), ran(control_plan.run_id)
    # what the graph command sets beyond eager's may differ (the graph switch, a variant's own overrides)
    planned = jw.graph_override_keys(cell.first.get("graph_overrides")) if "graph_overrides" in cell.first else []
    v = judge_runs(eager_runs, graph_runs, by_run, seeds, margin=margin, alpha=alpha, paired=cell.paired,
                   control=cell.control, reference_runs=controls, pool=controls is not None and len(controls) > 0,
                   may_differ=[*may_differ, *planned], look=look, design=design)
    row.update(asdict(v))
    row["look"] = look.k if look else 1
    row["loop_repeats"] = n
    if not cell.control:  # how much of the eager step's host time this variant's graphs take off the host
        row.update(host.cover(eager_runs, cell.first.impl, cell.first.scope))
    row["gpu_seconds"] = float(graph_runs.get("gpu_seconds", pd.Series(dtype=float)).fillna(0).sum())
    if cell.paired:  # the pair is the unit: both arms' share of the jobs belongs to the cell
        row["gpu_seconds"] += float(eager_runs.get("gpu_seconds", pd.Series(dtype=float)).fillna(0).sum())
    row["gpu_names"] = _gpu_names(eager_runs, graph_runs)
    if cell.first.arm == CONTROL:
        row["variant"] = AA
    return row


def _looked(row: Mapping[str, Any]) -> loop.Judged:
    return loop.Judged(str(row.get("verdict")), row.get("speedup"), row.get("ci_low"), row.get("ci_high"),
                       row.get("p_beyond"), more_helps=row.get("loss_parity") == lp.UNCALIBRATED)


def _fresh(cell: CellRuns, before: int, n: int) -> bool:
    """Whether the cell's own arm has a run planned to run (not blocked) with a repeat in (before, n]."""
    _, graph_plan, _ = cell.plans(n)
    new = graph_plan[(graph_plan["repeat"] > before) & (graph_plan.status != BLOCKED)]
    return bool(len(new))


def _complete(cell: CellRuns, n: int, done: set[str]) -> bool:
    """Whether every run a look at n jobs per arm judges has finished (blocked runs never run)."""
    eager_plan, graph_plan, control_plan = cell.plans(n)
    want = pd.concat([eager_plan, graph_plan, control_plan])
    want = want[want.status != BLOCKED]
    return bool(set(want.run_id) <= done)


@dataclass
class SweepJudgement:
    """Every cell's row at its last look, and where the loop has each cell."""

    rows: dict[str, dict[str, Any]]
    states: dict[str, loop.CellState]
    design: Design | None
    max_repeats: int
    next_n: int | None  # jobs per arm the next look needs (None: the loop is over)


def judge_sweep(plan: pd.DataFrame, runs: pd.DataFrame, by_run: dict[str, pd.DataFrame], *, margin: float,
                spec: Mapping[str, Any], decide: Mapping[str, Any] | None, loop_over: bool = False,
                upto: int | None = None) -> SweepJudgement:
    """The decision loop replayed on the runs that exist: look 1 on the first repeats, then look k on the repeats
    up to the k-th look's count, for the cells still live, as long as those runs all finished. The workflow's looks
    (plan/decide.py) and compare both call this, so they cannot disagree. Without a loop (an ingested sweep, the
    loop off, `graphsweep compare`) every cell is judged once, on all its runs, at the look their count completes.
    `loop_over`: the workflow's loop has ended (plan/decide.py), so a cell still live is out of budget; `upto`: the
    last look the loop took (runs of later looks that happen to be there are not judged: the loop did not see them)."""
    seeds = _plan_seeds(plan)
    may_differ = may_differ_of(spec)
    runs_by_id = runs.set_index("run_id", drop=False) if len(runs) else runs
    cells = cells_of(plan)
    design, max_repeats = loop_of(spec, decide)
    states = loop.new_states({c.cell_id: (c.shape_id, c.control) for c in cells})
    rows: dict[str, dict[str, Any]] = {}
    alpha = iv.ALPHA

    for c in cells:  # blocked before any run: no look changes that
        if (src := c.blocked()) is not None:
            row = dict(c.row)
            e, g, _ = c.plans(None if design is None else design.first)
            row.update(eager_run_ids=list(e.run_id), graph_run_ids=list(g.run_id), verdict=BLOCKED,
                       failure_detail=src.rule_message, rule_id=src.rule_id, gpu_seconds=0.0, margin=margin, look=1,
                       loop_repeats=None)
            rows[c.cell_id] = row
            states[c.cell_id].status = LOOP_UNTIMED
    if design is None:  # one look on everything there is
        judged = {}
        for c in cells:
            if c.cell_id in rows:
                continue
            n = int(c.graph_plan["repeat"].max()) if len(c.graph_plan) else 1
            once = one_look(n, spec.get("decide"))
            rows[c.cell_id] = judge_look(c, None, runs_by_id, runs, by_run, seeds, margin=margin, alpha=alpha,
                                         look=once, design=once.design if once else None, may_differ=may_differ)
            judged[c.cell_id] = _looked(rows[c.cell_id])
        loop.step(states, judged, 1, margin=margin, alpha=alpha)
        loop.close(states)
        return SweepJudgement(rows, states, None, max_repeats, None)

    done = set(runs.run_id) if len(runs) else set()
    if len(runs) and "pair_id" in runs.columns:  # a pair job's arms are rows of their own; the plan names the job
        done |= set(runs.pair_id.dropna())
    by_id = {c.cell_id: c for c in cells}
    next_n = None
    previous = 0
    for k, n in enumerate(design.looks, start=1):
        # look 1 judges every cell that is not blocked, on what ran (the workflow's compare comes after every run);
        # a later look, each live cell (and its shape's A/A control) whose round has run: all its runs up to the
        # look's count finished, and at least one of them is new (a round that cannot run here has none)
        if k == 1:
            todo = [c for c in by_id if c not in rows]
        elif n > max_repeats:
            break
        elif upto is not None and k > upto:  # the loop has not looked there (yet)
            next_n = n if any(s.live for s in states.values()) else None
            break
        else:
            todo = [c for c in loop.judged_now(states) if _complete(by_id[c], n, done) and
                    _fresh(by_id[c], previous, n)]
        if not todo:
            next_n = n if any(s.live for s in states.values()) else None
            break
        judged = {}
        for c in todo:
            rows[c] = judge_look(by_id[c], n, runs_by_id, runs, by_run, seeds, margin=margin, alpha=alpha,
                                 look=iv.Look(design, k), design=design, may_differ=may_differ)
            judged[c] = _looked(rows[c])
        loop.step(states, judged, k, margin=margin, alpha=alpha)
        previous = n
    else:
        next_n = None
    if next_n is None or loop_over:
        loop.close(states)
    return SweepJudgement(rows, states, design, max_repeats, next_n)


def one_look(n: int, decide: Mapping[str, Any] | None) -> iv.Look | None:
    """The look a cell judged once on n jobs per arm sits at (ingested logs, `graphsweep compare`): the look at which
    the workflow's loop, with this decide block, would have had n jobs, so that both give the same interval on the
    same runs. None (one look at alpha) when the loop is off, or for a plan written before it."""
    if not decide or not decide.get("enabled"):
        return None
    first = min(FIRST_LOOK, n)
    design = Design(first, int(decide["step"]), max(int(decide["horizon"]), n))
    return iv.Look(design, design.look_of(n))


FIRST_LOOK = 3  # jobs per arm at the first look of a cell judged once (the shipped specs' repeats)


def compare(plan_path: Path, runs_path: Path, iterations_path: Path, out: Path,
            margin: float | None = None, loop_over: bool = True, upto: int | None = None,
            loop_end: str | None = None) -> pd.DataFrame:
    """comparison.parquet of a sweep; `upto` the decision loop's last look and `loop_end` why it ended there
    (vocab LOOP_ENDS; None: no loop ran, ingested logs or one look)."""
    plan = read_table(plan_path, "plan")
    runs = read_table(runs_path, "runs") if Path(runs_path).exists() else pd.DataFrame(columns=["run_id"])
    iterations = read_table(iterations_path, "iterations")
    by_run = {rid: g for rid, g in iterations.groupby("run_id")} if len(iterations) else {}
    spec_margin, spec, spec_path = _judging(plan_path)
    meta = pq.read_schema(plan_path).metadata or {}
    decide = json.loads(meta.get(b"graphsweep.extra", b"{}")).get("decide")
    margin = spec_margin if margin is None else margin
    paired = bool(len(plan) and (plan.arm == PAIR).any())
    if "look" not in plan.columns:
        plan = plan.assign(look=1)
    sj = judge_sweep(plan, runs, by_run, margin=margin, spec=spec, decide=decide, loop_over=loop_over, upto=upto)
    df = finish_rows(sj, plan, runs)
    undecided = bool(len(df)) and df.loop_status.isin([LOOP_BUDGET, LOOP_LIVE]).any()
    results = Path(out).parent.parent  # results/{sweep}/comparison.parquet
    write_table(df, out, "comparison", extra={
        "margin": margin, "paired": paired, "decide": decide, "spec_path": spec_path,
        "continue_command": continue_command(spec_path, results, ingest="source" in spec) if undecided else "",
        "loop_end": loop_end})
    return df


def continue_command(spec_path: str, results: str | Path, ingest: bool = False) -> str:
    """The one command that takes an undecided sweep on: more-repeats raises the decision loop's budget and runs the
    workflow (commands/more_repeats.py); for ingested logs it lists the jobs to run where the logs came from."""
    return shlex.join(["graphsweep", "more-repeats", *([] if ingest else ["--run"]), "--results", str(results),
                       spec_path])


def finish_rows(sj: SweepJudgement, plan: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The comparison frame: each cell's row at its last look with its loop status, what deciding it would take, the
    family gate on the smallest repeated p-values, in COMPARISON_COLUMNS order."""
    rows = []
    cost = _repeat_cost(plan, runs)
    for cell_id, row in sj.rows.items():
        st = sj.states[cell_id]
        row = dict(row)
        row["loop_status"] = st.status
        if st.p_min is not None:
            row["p_beyond"] = st.p_min  # the family gate's p: the smallest repeated p over the cell's looks
        need = row.get("repeats_needed")
        if st.status in (LOOP_BUDGET, LOOP_LIVE) and need:
            have = int(row.get("loop_repeats") or 0)
            row["repeats_to_decide"] = int(need)
            row["gpu_hours_to_decide"] = max(0, int(need) - have) * cost.get(cell_id, math.nan) / 3600.0
        rows.append(row)
    for row in rows:
        row.setdefault("family_gated", False)
    df = pd.DataFrame(rows)
    if len(df):
        df = family_gate(df)
    axis_cols = [c for c in plan.columns if c not in set(PLAN_COLUMNS)]
    for c in COMPARISON_COLUMNS:
        if c not in df.columns:
            df[c] = None
    ordered = COMPARISON_COLUMNS[:6] + axis_cols + [c for c in COMPARISON_COLUMNS[6:]]
    rest = [c for c in df.columns if c not in ordered]
    return df[ordered + rest]


def _repeat_cost(plan: pd.DataFrame, runs: pd.DataFrame) -> dict[str, float]:
    """GPU-seconds one more repeat of each cell costs: its graph run, its shape's eager and A/A control runs (what
    they took when they ran, else the plan's estimate)."""
    took = spent_by_run(runs)  # by planned run: a pair job's two arms together
    def per_run(rows: pd.DataFrame) -> float:
        vals = [took[r] for r in rows.run_id if r in took]
        return float(np.median(vals)) if vals else float(pd.to_numeric(rows.est_gpu_seconds).median())
    out = {}
    for cell_id, g in plan[plan.arm.isin([GRAPH, PAIR])].groupby("cell_id"):
        shape = plan[(plan.shape_id == g.shape_id.iloc[0]) & plan.arm.isin([EAGER, CONTROL])]
        out[cell_id] = per_run(g) + sum(per_run(shape[shape.arm == a]) for a in (EAGER, CONTROL)
                                        if (shape.arm == a).any())
    return out


def family_gate(df: pd.DataFrame) -> pd.DataFrame:
    """One family per sweep: every cell that claims a difference beyond the margin (p_beyond) shares the shape's
    eager baseline with its neighbours, so a decided speedup or slowdown needs its Benjamini-Hochberg q below the
    alpha it was judged at, not only its own p (docs/statistics.md "Many variants, one baseline"). A cell that
    fails the gate is inconclusive, and its reason says why."""
    testable = df.verdict.isin(TIMING_VERDICTS) & (df.variant != AA)
    none = pd.Series([None] * len(df), index=df.index)  # a sweep of blocked cells only has no timing columns
    p = df["p_beyond"] if "p_beyond" in df.columns else none
    df["q_value"] = iv.benjamini_hochberg([x if t and pd.notna(x) else None for x, t in zip(p, testable)])
    q = pd.to_numeric(df["q_value"], errors="coerce")
    alpha = pd.to_numeric(df["alpha"] if "alpha" in df.columns else none, errors="coerce")
    gated = df.verdict.isin(GATED_VERDICTS) & (df.variant != AA) & (q >= alpha)
    df["family_gated"] = gated.to_numpy()
    df.loc[gated, "verdict"] = INCONCLUSIVE
    df["reason"] = [prose.reason(r) for r in df.to_dict("records")]  # the sentence follows the final verdict
    return df


# verdicts that rest on comparing the arms beyond their step times: refused too when the arms differ
REFUSED_OUTCOMES = (stats.GRAPH_LOSS_DIVERGED, stats.GRAPH_LOSS_NONFINITE, stats.BEYOND_CEILING)


def check_comparable(v: stats.Verdict, eager_runs: pd.DataFrame, graph_runs: pd.DataFrame,
                     may_differ: Sequence[str] = ()) -> None:
    """Arms made with another container, GPU, driver or library versions (provenance.py, anchors idea 12), or that do
    other work (judge/work.py: another training configuration or global batch), are not compared: a verdict that
    compares them becomes not-comparable, naming the fields and each arm's values. A blocked, failed or otherwise
    invalid cell keeps its verdict; its reason notes the difference."""
    e = [r for _, r in eager_runs.iterrows()] if len(eager_runs) else []
    g = [r for _, r in graph_runs.iterrows()] if len(graph_runs) else []
    prov = provenance.differences(e, g) if e and g else []
    work = jw.differences(e, g, may_differ) if e and g else []
    v.not_comparable_fields = [d.field for d in prov] + [d.key for d in work] or None
    v.work_differences = [d.to_record() for d in work] or None
    if not prov and not work:
        return
    if v.verdict in COMPARING_VERDICTS or (v.verdict == INVALID and v.paired_outcome in REFUSED_OUTCOMES):
        why = ([provenance.not_comparable_reason(prov)] if prov else []) + (
            [prose.not_same_work(v.work_differences or [])] if work else [])
        v.verdict, v.failure_detail = NOT_COMPARABLE, "; ".join(why)
        v.speedup = v.ci_low = v.ci_high = v.p_beyond = v.p_within = None
        v.paired_outcome = f"not-comparable ({v.paired_outcome})"
