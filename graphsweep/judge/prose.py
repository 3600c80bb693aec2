"""The one place a verdict becomes words: every sentence of comparison.parquet's `reason`, the CLI and the report
(its tables and its recommendations: `speedup_text`, `group`) is written here from a verdict's fields
(judge/verdict.py), so the numbers and their words cannot drift apart.

Each function takes a Mapping: a Verdict as a dict, or a row of comparison.parquet or a pandas Series of one (NaN
and numpy values allowed).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Mapping, Sequence

from graphsweep.judge import host as hs
from graphsweep.judge import interval as iv
from graphsweep.judge import parity as lp
from graphsweep.judge import verdict as vd
from graphsweep.vocab import (
    BASELINE_FAILED, BLOCKED, CONTROL, EAGER, FAILED, GRAPH, INCONCLUSIVE, INVALID, NEUTRAL, NOT_COMPARABLE, OOM,
    SLOWDOWN, SPEEDUP, TIMEOUT, UNCAPTURED, UNVERIFIED, USABLE_OUTCOMES,
)  # fmt: skip

# a group of a shape's cells in its recommendation: faster, but not with the eager model's loss
DRIFTED = "speedup, parity not ok"


def _get(row: Mapping[str, Any], key: str) -> Any:
    """The value, with NaN / missing as None and arrays as lists."""
    v = row.get(key)
    if v is None:
        return None
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _count(outcomes: list[str] | None) -> str:
    """'2 oom, 1 crashed' for an arm's unusable runs."""
    bad = Counter("timeout before the steady window" if o == TIMEOUT else o for o in outcomes or []
                  if o not in USABLE_OUTCOMES)
    return ", ".join(f"{n} {o}" for o, n in bad.items())


def _tally(row: Mapping[str, Any], arm: str) -> str:
    """What an arm's runs were, every one counted: '2 oom, 1 completed without a steady window', 'no runs'."""
    outcomes = list(_get(row, f"{arm}_outcomes") or [])
    if not outcomes:
        return "no runs"
    short = sum(o in USABLE_OUTCOMES for o in outcomes) - int(_get(row, f"n_{arm}") or 0)
    parts = [_count(outcomes)] + ([f"{short} ran but too short for a steady window"] if short > 0 else [])
    return ", ".join(p for p in parts if p)


def _of(row: Mapping[str, Any], arm: str, outcome: str) -> str:
    outcomes = _get(row, f"{arm}_outcomes") or []
    return f"{sum(o == outcome for o in outcomes)} of {len(outcomes)}"


def _failure(row: Mapping[str, Any]) -> str:
    run, detail = _get(row, "failure_run_id"), _get(row, "failure_detail")
    if run and detail:
        return f"{run}: {detail}"
    return str(run or detail or "no reason recorded")


def _edge(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}"


def ci_text(row: Mapping[str, Any]) -> str:
    """'[0.97, 1.61]': the speedup's interval ('' without one; an open edge 'inf')."""
    lo, hi = _get(row, "ci_low"), _get(row, "ci_high")
    if lo is None or hi is None or _get(row, "speedup") is None:
        return ""
    return f"[{_edge(float(lo))}, {_edge(float(hi))}]"


def speedup_text(row: Mapping[str, Any], ci: bool = True) -> str:
    """'1.25× [0.97, 1.61]': a speedup and its interval, the one format of every sentence, table and plot label
    ('1.25×' with ci=False or without an interval, '—' without a speedup)."""
    s = _get(row, "speedup")
    if s is None or not math.isfinite(float(s)):
        return "—"
    interval_ = ci_text(row) if ci else ""
    return f"{float(s):.2f}×" + (f" {interval_}" if interval_ else "")


def interval(row: Mapping[str, Any]) -> str:
    """'1.05× [1.01, 1.09] (95% CI at look 2 of the decision loop; eager 10.50 ms vs graph 10.00 ms)'."""
    level = 100 * (1 - float(_get(row, "alpha") or iv.ALPHA))
    other = CONTROL if _get(row, "control") else GRAPH
    look = _get(row, "look")
    at = f" at look {int(look)} of the decision loop" if look is not None and _get(row, "loop_status") else ""
    return (f"{speedup_text(row)} ({level:g}% CI{at}; "
            f"eager {_get(row, 'eager_step_ms'):.2f} ms vs {other} {_get(row, 'graph_step_ms'):.2f} ms)")


def method(row: Mapping[str, Any]) -> str:
    """How the interval was made: design, jobs per arm, where each arm's spread came from, df."""
    if _get(row, "speedup") is None:
        return ""
    df = _get(row, "df")
    df_text = "df inf" if df is None or math.isinf(df) else f"df {df:.1f}"
    if _get(row, "design") == "paired":
        return f"paired t on log ratios ({_get(row, 'n_eager')} pairs, {df_text})"
    return (f"Welch t on log medians ({_get(row, 'n_eager')}+{_get(row, 'n_graph')} jobs; spread: eager "
            f"{_get(row, 'eager_spread')}, graph {_get(row, 'graph_spread')}; {df_text})")


def notes(row: Mapping[str, Any]) -> list[str]:
    """What a timing verdict adds to its interval: planning hint, memory price, thin or coarse data, exclusions."""
    out: list[str] = []
    verdict = _get(row, "verdict")
    if verdict == INCONCLUSIVE and _get(row, "family_gated"):
        out.append("more repeats of this cell narrow its interval and lower its p, and with it its q "
                   "(`graphsweep more-repeats`)")
    elif verdict == INCONCLUSIVE:
        out.append(repeats(row))
    if _get(row, "thin") and _get(row, "speedup") is not None:
        out.append(THIN)
    delta, eager_mem = _get(row, "mem_delta_gb"), _get(row, "eager_mem_gb")
    if delta is not None and eager_mem:
        if verdict == SPEEDUP and delta > 0:
            out.append(f"the speedup costs {memory_cost(row)}, {eager_mem:.2f} -> {_get(row, 'graph_mem_gb'):.2f} GB")
        elif abs(delta) >= 0.01:
            out.append(memory_cost(row))
    if _get(row, "loss_parity") in (lp.RUN_DRIFT, lp.UNCHECKED, lp.UNCALIBRATED) or (
            _get(row, "control") and _get(row, "loss_parity") == lp.DIVERGED):
        if verdict != UNVERIFIED:
            out.append(parity(row))
    elif verdict == SPEEDUP and _get(row, "loss_parity") == lp.PARITY_OK and (where := band(row)):
        out.append(f"lm loss within its {where}")  # next to every speedup: how closely its loss was checked
    if text := launch(row):
        ceiling, speedup = _get(row, "graph_ceiling"), _get(row, "speedup")
        over = speedup is not None and not _get(row, "control") and speedup > ceiling
        out.append(text + (f" (measured {speedup:.2f}x is above it: see docs/statistics.md)" if over else ""))
    if text := host(row):
        out.append(text)
    excluded = _get(row, "excluded_run_ids") or []
    if excluded:
        out.append(f"excluded {len(excluded)} run(s) from the timing ({', '.join(excluded)}: "
                   f"graph {_count(_get(row, 'graph_outcomes')) or 'none'}; eager "
                   f"{_count(_get(row, 'eager_outcomes')) or 'none'})")
    return out


def memory_words(row: Mapping[str, Any]) -> str:
    """What the cell's memory figures are ('steady-state reserved memory', ...)."""
    return vd.MEMORY_FIGURES.get(_get(row, "mem_metric") or "", "memory")


THIN = (f"fewer than {iv.MIN_OWN_JOBS} jobs in an arm: its job-to-job spread is the allowance (sd "
        f"{iv.SPREAD_ALLOWANCE:g} of log step time, the largest seen on real jobs), not measured")


def repeats(row: Mapping[str, Any], hint: bool = True) -> str:
    """What would decide an inconclusive cell: 'about 14 repeats per arm would decide it', with how (hint=True)."""
    need, margin = _get(row, "repeats_needed"), float(_get(row, "margin") or 0.0)
    if _get(row, "resolution_limited"):
        res = max(_get(row, "eager_resolution_ms") or 0.0, _get(row, "graph_resolution_ms") or 0.0)
        return (f"the logs print step times to {res:g} ms: no number of repeats decides a {margin:.0%} margin at "
                "this step time" + (" (widen the margin or lengthen the step)" if hint else ""))
    if need is not None:
        return f"about {int(need)} repeats per arm would decide it" + (
            " (80% power at the decision loop's looks; `graphsweep more-repeats` raises its budget)" if hint else "")
    return (f"more repeats per arm than graphsweep plans would be needed (up to {iv.POWER_CAP}; in the decision loop, "
            "up to its decide.horizon)") + (
        " at this spread (the estimate is too close to a margin edge for the job-to-job noise)" if hint else "")


def memory_cost(row: Mapping[str, Any]) -> str:
    """'+0.07 GB steady-state allocated memory (+54%)', or '' when the cell has no memory figure."""
    delta, eager_mem = _get(row, "mem_delta_gb"), _get(row, "eager_mem_gb")
    if delta is None:
        return ""
    return f"{delta:+.2f} GB {memory_words(row)}" + (f" ({delta / eager_mem:+.0%})" if eager_mem else "")


def _pct(x: float) -> str:
    """A relative width as a percentage with two significant digits ('0.50%', '41%')."""
    return f"{100 * x:.2g}%" if x < 0.1 else f"{100 * x:.0f}%"


def references(row: Mapping[str, Any]) -> str:
    """'3 reference runs (1 set aside: r4 left the band of the others)'."""
    n = int(_get(row, "loss_references") or 0)
    out = f"{n} reference run{'s' if n != 1 else ''}"
    gone = _get(row, "loss_references_excluded") or []
    if gone:
        out += (f" ({len(gone)} set aside: {', '.join(map(str, gone))} left the band of the others, so "
                f"{'it widens' if len(gone) == 1 else 'they widen'} nothing)")
    return out


def uncalibrated(row: Mapping[str, Any]) -> str:
    """Why the references cannot calibrate a band ('' when they can)."""
    if _get(row, "loss_confirmed") is not False:
        return ""
    n = int(_get(row, "loss_references") or 0)
    if n < 2:
        return f"{n} reference run of its seed: its own run-to-run spread is not measured"
    if n == 2:
        return "2 reference runs of its seed that do not agree within the floor: which one to trust is unknown"
    return f"{n} reference runs of its seed that do not confirm each other"


def band(row: Mapping[str, Any]) -> str:
    """The band a cell's loss was judged against, per iteration: 'band ±0.5% at iterations 1-5, ±1.4% at 6, ...,
    ±72% at 17-25 (3 reference runs; 25 iterations compared, those both printed)'; '' when no loss was compared."""
    steps = [(int(a), int(z), float(w)) for a, z, w in (_get(row, "loss_band") or [])]
    if not steps:
        return ""
    parts = [f"±{_pct(w)} at {'iterations ' if k == 0 else ''}{a}{'' if a == z else f'-{z}'}"
             for k, (a, z, w) in enumerate(steps)]
    compared, every = _get(row, "loss_compared"), int(_get(row, "loss_print_every") or 1)
    where = f"; compared on the {compared} iterations both printed" if compared is not None else ""
    if every > 1:
        where += f" (the loss printed every {every} iterations: each value the mean over them)"
    if _get(row, "loss_confirmed") is False:
        return (f"band ±{_pct(steps[0][2])} (the floor) around the reference it follows best "
                f"({references(row)}{where})")
    return f"band {', '.join(parts)} ({references(row)}{where})"


def parity(row: Mapping[str, Any]) -> str:
    """The loss-parity sentence ('' when the graph arm's loss was not compared): what left eager's loss, counted,
    and the band it was judged against."""
    state = _get(row, "loss_parity")
    if state is None:
        return ""
    it, run = _get(row, "loss_iteration"), _get(row, "loss_run_id")
    g, e = _num(_get(row, "loss_graph"), ".6f"), _num(_get(row, "loss_eager"), ".6f")
    departed, checked = _get(row, "loss_departed") or 0, _get(row, "loss_checked") or 0
    tol, level = _get(row, "loss_tolerance"), _get(row, "loss_level")
    control = bool(_get(row, "control"))
    arm = "A/A control" if control else GRAPH
    where = band(row)
    if state == lp.NONFINITE:
        return (f"{arm} run {run} has lm loss {g} at iteration {it} where eager has {e}: a NaN/Inf loss is another "
                "model, never a lost run (a full-iteration graph runs with Megatron's NaN check off, so this is the "
                "only check that sees it)")
    if state in (lp.DIVERGED, lp.RUN_DRIFT, lp.UNCALIBRATED):
        off = (f"outside the band there (±{_pct(tol)}) and in most of the iterations after, by up to {_pct(level)} "
               "beyond the references' range" if level is not None and tol else "outside its band")
        how = ("on one side of the references in most of its iterations (a bias the floor would hide)"
               if _get(row, "loss_bias") else off)
        head = (f"{departed} of {checked} {arm} runs left eager's lm loss (first from iteration {it}: run {run}, "
                f"{g} vs the references' {e}, {how}){'; ' + where if where else ''}")
        if state == lp.UNCALIBRATED:
            return (f"loss parity cannot be calibrated: {uncalibrated(row)}; {head}: whether that is the model's own "
                    "spread or a fault, only more eager repeats of the seed can tell (3 or more)")
        if state == lp.RUN_DRIFT:
            return (f"{head}: one drifting run among {checked}, within {lp.DRIFT_LEVEL:g} band widths, is allowed as "
                    "run-to-run non-determinism or an intermittent fault (the verdict stands; no recommendation; "
                    "rerun that run to tell)")
        if control:
            return f"{head}: the model's own run-to-run non-determinism (both arms run the same code)"
        return head
    if state == lp.UNCHECKED:
        have = _get(row, "loss_runs")
        why = ("no graph run printed an lm loss" if not have else
               f"{have - checked} of {have} {arm} runs have no eager run of their seed with an lm loss to compare "
               f"with ({_seeds_unmatched(row, have - checked)})")
        return f"loss parity unchecked: {why}"
    close = _get(row, "loss_worst_excess")
    return (f"losses agree: {checked} of {checked} {arm} runs follow eager's lm loss"
            + (f" (closest: {close:.2f} of the band, run {run})" if close is not None else "")
            + (f"; {where}" if where else ""))


def broken_baseline(row: Mapping[str, Any]) -> str:
    """'the eager baseline is broken: eager run X's lm loss is NaN/Inf from iteration 12 (...)'."""
    it, run = _get(row, "loss_iteration"), _get(row, "loss_run_id") or _get(row, "failure_run_id")
    at = f" from iteration {it}" if it is not None else ""
    detail = _get(row, "failure_detail")
    return (f"the eager baseline is broken: eager run {run}'s lm loss is NaN/Inf{at}"
            + (f" ({detail})" if detail else "") + ": a baseline that does not train cannot be sped up, so no speedup "
            "is computed and nothing is recommended; fix the eager run first")


def rule() -> str:
    """How loss parity is judged, in one sentence (the report's 'Read with care')."""
    return (f"A graph run leaves eager's loss when it lies outside a band around the eager-like runs of its seed (their "
            f"range widened by max({lp.LOSS_FLOOR:g}, {lp.BAND_FACTOR:g} x their own spread at that iteration)) in "
            f"most of {lp.WINDOW} iterations, or sits on one side of them in {lp.BIAS_SHARE:.0%} of its iterations "
            f"by a median of {lp.BIAS_FLOOR:g} or more; a non-finite loss always does. The references are checked "
            "against each other first; one run, or two that do not agree, cannot calibrate a band, and a departure "
            "from it is `uncalibrated` (a speedup is then `unverified`).")


def _seeds_unmatched(row: Mapping[str, Any], unmatched: int) -> str:
    """Why runs found no eager run of their seed: their seed is unknown, or known and another than eager's."""
    unknown = "the seed is unknown: the log does not print it and no --seed / --same-seed was given"
    unseeded = _get(row, "loss_unseeded")
    if unseeded is None or unseeded >= unmatched:  # a row of an older table says nothing more
        return unknown
    mine, eager = _get(row, "loss_graph_seeds") or [], _get(row, "loss_eager_seeds") or []
    differ = (f"they trained from seed(s) {', '.join(map(str, mine))} and the eager runs from "
              f"{', '.join(map(str, eager)) or 'no known seed'}: runs of different seeds train different models")
    return differ + (f"; {unseeded} of them print no seed ({unknown.split(': ', 1)[1]})" if unseeded else "")


def _num(x: Any, spec: str) -> str:
    """A number as `spec`, or '?' for a field a row does not have (never 'None' or 'nan' in a sentence)."""
    return "?" if x is None else (str(x) if isinstance(x, float) and not math.isfinite(x) else format(x, spec))


def launch(row: Mapping[str, Any]) -> str:
    """'the GPU is busy 24 % of an eager step (41.2 of 172.0 ms): a graph can win up to 4.17x' ('' when unmeasured)."""
    share, ceiling, busy = _get(row, "gpu_busy_share"), _get(row, "graph_ceiling"), _get(row, "eager_gpu_busy_ms")
    if share is None or ceiling is None or busy is None:
        return ""
    return (f"the GPU is busy {share:.0%} of an eager step ({busy:.1f} of {_get(row, 'eager_step_ms'):.1f} ms): "
            f"a graph can win up to {ceiling:.2f}x")


def host(row: Mapping[str, Any]) -> str:
    """'attn+moe_router+moe_preprocess covers 31 % of the eager step's host time (240.1 ms); stays eager: experts
    28 %, optimizer 12 %' ('' when the eager runs did not measure it; judge/host.py)."""
    share, step = _get(row, "host_covered_share"), _get(row, "eager_host_step_ms")
    if share is None or step is None:
        return ""
    covered = _get(row, "scope") or _get(row, "impl") or _get(row, "host_covered") or "nothing"  # as the user set it
    rest = ", ".join(f"{r} {x:.0%}" for r, x in hs.stays_eager({k: _get(row, k) for k in hs.ROW_KEYS}))
    basis = ("of the steady step, the profiler's own cost taken off" if _get(row, "host_shares_of") == hs.STEADY
             else f"in the profiled window, {step:.1f} ms per iteration")
    text = f"{covered} covers {share:.0%} of the eager step's host time ({basis})"
    if (estimate := _get(row, "host_estimate_speedup")) is not None:
        text += f"; taking exactly that off the step: about {estimate:.2f}x"
    return text + (f"; stays eager: {rest}" if rest else "")


def reason(row: Mapping[str, Any]) -> str:
    """The whole sentence of a verdict (comparison.parquet `reason`)."""
    text = _sentence(row)
    differ = _get(row, "not_comparable_fields")
    if differ and _get(row, "verdict") != NOT_COMPARABLE:  # the verdict is about one arm; say the arms differ too
        text += f" (note: the arms also ran with different {', '.join(differ)})"
    return text


def _sentence(row: Mapping[str, Any]) -> str:
    verdict = _get(row, "verdict")
    if verdict == NOT_COMPARABLE:
        return str(_get(row, "failure_detail") or "the arms ran in different environments")
    if verdict == BLOCKED and _get(row, "rule_id"):
        return f"preflight: {_get(row, 'failure_detail')}"
    timing = f"; the {_get(row, 'n_graph')} completed graph run(s) had median {_get(row, 'graph_step_ms'):.2f} ms " \
             f"vs eager {_get(row, 'eager_step_ms'):.2f} ms" if _get(row, "n_graph") and _get(row, "eager_step_ms") \
        else ""
    outcome = _get(row, "paired_outcome")
    if verdict == BASELINE_FAILED and outcome == vd.BASELINE_LOSS_NONFINITE:
        return broken_baseline(row)
    if verdict == BASELINE_FAILED:
        head = f"eager arm has no usable run ({_tally(row, EAGER)}) ({_failure(row)})"
        if outcome == vd.BOTH_OOM:
            return f"{head}; graph arm OOM too: the shape does not fit"
        if outcome == vd.GRAPH_FIXES_FAILURE:
            return (f"{head}, but {_get(row, 'n_graph')} graph run(s) completed (median "
                    f"{_get(row, 'graph_step_ms'):.2f} ms): the graph fixes a baseline failure; no speedup can be computed")
        return f"{head}; graph arm: {_tally(row, GRAPH)}"
    if verdict == BLOCKED:
        return f"graph arm blocked: {_failure(row)}"
    if verdict == INVALID and outcome in (vd.GRAPH_LOSS_DIVERGED, vd.GRAPH_LOSS_NONFINITE):
        tail = f"; its step time {interval(row)} is not a result" if _get(row, "speedup") is not None else ""
        return f"the graph arm trains another model: {parity(row)}{tail}"
    if verdict == INVALID and outcome == vd.BEYOND_CEILING:
        return beyond_ceiling(row)
    if verdict == INVALID and outcome == vd.GRAPH_CAPTURED_NOTHING:
        return (f"{_of(row, GRAPH, UNCAPTURED)} graph runs captured no CUDA graph: they trained eager, so their step "
                f"time is no graph result ({_failure(row)})")
    if verdict == INVALID:
        return (f"{_of(row, GRAPH, INVALID)} graph runs completed without evidence that a graph was captured and "
                f"replayed ({_failure(row)}){timing}")
    if verdict == OOM:
        head = "graph-only OOM" if outcome == vd.GRAPH_ONLY_OOM else \
            f"graph OOM in {_of(row, GRAPH, OOM)} repeats (near the memory limit)"
        mem = _get(row, "eager_mem_gb")
        fit = f"; eager fit at {mem:.2f} GB {memory_words(row)}" if mem is not None else "; eager fit"
        return f"{head}: {_failure(row)}{fit}{timing}"
    if verdict == FAILED and outcome == vd.GRAPH_CRASHED:
        return crashed(row)
    if verdict == FAILED and outcome == vd.GRAPH_TOO_SHORT:
        return (f"the graph runs completed but are too short for a steady window ({_failure(row)}): give the spec "
                "more iterations")
    if verdict == FAILED:
        return (f"graph arm has no usable run ({_count(_get(row, 'graph_outcomes')) or 'no graph runs'}) "
                f"({_failure(row)}) while eager completed")
    if _get(row, "speedup") is None:
        return str(_get(row, "failure_detail") or "")
    band = f"1 ± {float(_get(row, 'margin')):g}"
    other = "A/A control (a false positive)" if _get(row, "control") else GRAPH
    head = {
        SPEEDUP: f"{other} faster: {interval(row)} excludes {band}",
        SLOWDOWN: f"{other} slower: {interval(row)} excludes {band}",
        NEUTRAL: f"no practical difference: {interval(row)} lies inside {band}",
        UNVERIFIED: f"{other} faster: {interval(row)} excludes {band}, but not a result: {parity(row) or 'loss parity unchecked'}",
    }.get(verdict, f"{interval(row)} straddles {band}")
    if _get(row, "family_gated"):
        head = (f"{interval(row)} excludes {band} on its own, but not after the sweep's family check: q = "
                f"{_get(row, 'q_value'):.3f} (Benjamini-Hochberg over its timed cells, which share eager baselines) "
                f"is not below alpha {_get(row, 'alpha'):g}")
    return "; ".join([head, *notes(row)])


# --------------------------------------------------------------------------------------------------
# Same work, possible speedups, settings that crash (issue 36 item 1, issue 40)
WORK_NAMES = {"global_batch": "global batch size (its iteration lines)"}  # judge/work.py GLOBAL_BATCH


def work_difference(d: Mapping[str, Any]) -> str:
    """'train.global_batch_size: eager 4 vs graph 2' for one judge/work.py WorkDifference record."""
    key = str(d.get("key"))
    e, g = [str(x) for x in _listed(d.get(EAGER))], [str(x) for x in _listed(d.get(GRAPH))]
    name, es, gs = WORK_NAMES.get(key, key), ", ".join(e) or "unknown", ", ".join(g) or "unknown"
    if len(e) > 1 and len(g) <= 1 and set(g) <= set(e):
        return f"{name} differs between eager runs ({es})"
    if len(g) > 1 and len(e) <= 1 and set(e) <= set(g):
        return f"{name} differs between graph runs ({gs})"
    return f"{name}: eager {es} vs graph {gs}"


def _listed(v: Any) -> list[Any]:
    if v is None:
        return []
    return list(v.tolist() if hasattr(v, "tolist") else v)


def not_same_work(differences: Sequence[Mapping[str, Any]]) -> str:
    """Why a cell's arms are not compared: the configuration keys (and the global batch) they differ in, with values."""
    return ("not comparable: the arms do different work (" + "; ".join(work_difference(d) for d in differences)
            + ") - run both arms with one training configuration, or name the keys that may differ in the spec's "
            "`arms_may_differ` (`graphsweep compare --may-differ KEY`)")


def beyond_ceiling(row: Mapping[str, Any]) -> str:
    """An impossible speedup: its whole interval lies beyond the GPU-busy ceiling of the eager step."""
    return (f"impossible: {interval(row)} lies wholly above the most any graph of this step can win ("
            f"{launch(row) or 'the GPU-busy ceiling'}): a graph takes host time off a step, never GPU work, so the "
            "graph arm did less work than eager or its timing is wrong; not a result, never recommended")


def crash_cause(row: Mapping[str, Any]) -> str:
    """'run X crashed: <its reason> (error class illegal_memory_access)' for the run that decided a crashed cell."""
    cls = _get(row, "failure_class")
    return f"run {_failure(row)}" + (f" (error class {cls})" if cls else "")


def crashed(row: Mapping[str, Any]) -> str:
    """A setting that crashed: which run, why, and what its other runs measured (never a result)."""
    ids = list(_get(row, "crashed_run_ids") or [])
    n = len(_get(row, "graph_outcomes") or [])
    text = (f"{len(ids)} of {n} graph runs crashed of the graph's own cause: {crash_cause(row)}; a setting that "
            "crashes is not recommended (only infrastructure - a node or network fault, a preemption - is excluded "
            "and retried: docs/failures.md)")
    if _get(row, "speedup") is not None:
        text += f"; the {_get(row, 'n_graph')} completed graph run(s) measured {interval(row)}, not a result"
    return text


# --------------------------------------------------------------------------------------------------
# A shape's recommendation (report/recommend.py picks the cells; these are its words)
def step_times(row: Mapping[str, Any]) -> str:
    """'10.50 → 10.00 ms per step' ('' without both arms' step times)."""
    e, g = _get(row, "eager_step_ms"), _get(row, "graph_step_ms")
    return f"{e:.2f} → {g:.2f} ms per step" if e is not None and g is not None else ""


def names(cells: Sequence[Mapping[str, Any]]) -> str:
    """'attn', 'attn and mlp', 'attn, mlp and moe'."""
    out = [str(_get(c, "variant")) for c in cells]
    return out[0] if len(out) == 1 else ", ".join(out[:-1]) + " and " + out[-1]


def named_speedups(cells: Sequence[Mapping[str, Any]]) -> str:
    """'attn 1.59× [1.52, 1.66], mlp 1.10× [1.01, 1.20]'."""
    return ", ".join(f"{_get(c, 'variant')} {speedup_text(c)}" for c in cells)


def _speedups(cells: Sequence[Mapping[str, Any]]) -> str:
    """'0.94× [0.92, 0.96]' for one cell (its name said before), named for several."""
    return speedup_text(cells[0]) if len(cells) == 1 else named_speedups(cells)


def undecided(row: Mapping[str, Any]) -> str:
    """'attn 1.00× [0.60, 1.70], about 4 repeats per arm would decide it'."""
    head = f"{_get(row, 'variant')} {speedup_text(row)}"
    if _get(row, "family_gated"):
        return (f"{head}, decided on its own but not by the sweep's family check (q "
                f"{_num(_get(row, 'q_value'), '.3f')}): more repeats lower its q")
    return f"{head}, {repeats(row, hint=False)}"


def _int(x: Any) -> str:
    return "?" if x is None else str(int(x))


def _drifted(c: Mapping[str, Any]) -> str:
    if _get(c, "loss_parity") != lp.RUN_DRIFT:
        return f"{_get(c, 'variant')} {speedup_text(c)}: {parity(c)}"
    return (f"{_get(c, 'variant')} {speedup_text(c)}: {_int(_get(c, 'loss_departed'))} of "
            f"{_int(_get(c, 'loss_checked'))} graph runs left eager's lm loss (run {_get(c, 'loss_run_id')} from "
            f"iteration {_int(_get(c, 'loss_iteration'))})")


def group(verdict: str, cells: Sequence[Mapping[str, Any]], margin: float, gated: bool = False) -> str:
    """Why these cells of one verdict (or DRIFTED) are no recommendation; gated: the launch gate skipped them all."""
    who = names(cells)
    if verdict == DRIFTED:
        return "faster, but not recommended: " + "; ".join(_drifted(c) for c in cells)
    if verdict == UNVERIFIED:
        return (f"{who} faster but unverified (loss parity could not be checked, or its references are too few to "
                f"calibrate a band): {_speedups(cells)}")
    if verdict == SLOWDOWN:
        return f"{who} slower than eager: {_speedups(cells)}"
    if verdict == NEUTRAL:
        return f"{who} no faster than eager (inside 1 ± {margin:g}): {_speedups(cells)}"
    if verdict == INCONCLUSIVE:
        return "undecided (`graphsweep more-repeats` plans the repeats): " + "; ".join(undecided(c) for c in cells)
    if verdict == OOM:
        some = [c for c in cells if _get(c, "paired_outcome") == vd.GRAPH_SOMETIMES_OOM]
        tail = " in some repeats (near the memory limit)" if len(some) == len(cells) else " where eager fit"
        return f"{who} ran out of memory{tail}"
    if verdict == BLOCKED and gated:
        return f"{who} not run: the launch gate found no graph of this step can win beyond 1 ± {margin:g}"
    if verdict == BLOCKED:
        rules = sorted({str(r) for c in cells if (r := _get(c, "rule_id"))})
        if rules:  # preflight: no job ran; otherwise the job ran and its own check or Megatron refused it
            return f"{who} blocked before running (preflight `{'`, `'.join(rules)}`)"
        return f"{who} blocked when run (the training refused it: see the cell's reason)"
    if verdict == INVALID:
        outcomes = [_get(c, "paired_outcome") for c in cells]
        what = ("trains another model (its lm loss left eager's, or went NaN/Inf)"
                if all(o in (vd.GRAPH_LOSS_DIVERGED, vd.GRAPH_LOSS_NONFINITE) for o in outcomes)
                else "captured no CUDA graph (0 graphs: it trained eager, no graph result)"
                if all(o == vd.GRAPH_CAPTURED_NOTHING for o in outcomes)
                else "measured faster than any graph of this step can be (beyond the GPU-busy ceiling): not a result"
                if all(o == vd.BEYOND_CEILING for o in outcomes)
                else "invalid (no graph captured, no evidence of a captured and replayed graph, or a graph run left "
                     "eager's loss)")
        return f"{who} {what}"
    if verdict == FAILED and all(_get(c, "paired_outcome") == vd.GRAPH_CRASHED for c in cells):
        return f"{who} crashed: " + "; ".join(crash_cause(c) for c in cells)
    if verdict == FAILED:
        return f"{who} failed (no usable graph run while eager completed, or a graph run crashed)"
    if verdict == NOT_COMPARABLE:
        work = any(_get(c, "work_differences") for c in cells)
        return f"{who} not comparable (the arms {'did different work' if work else 'ran in different environments'})"
    broken = [c for c in cells if _get(c, "paired_outcome") == vd.BASELINE_LOSS_NONFINITE]
    if verdict == BASELINE_FAILED and broken:
        return broken_baseline(broken[0])
    if verdict == BASELINE_FAILED:
        fixed = [c for c in cells if _get(c, "paired_outcome") == vd.GRAPH_FIXES_FAILURE]
        tail = f"; {names(fixed)} completed where eager did not" if fixed else ""
        return f"the eager baseline has no usable run: nothing to compare against{tail}"
    return f"{who} {verdict}"
