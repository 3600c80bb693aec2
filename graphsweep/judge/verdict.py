"""The verdict of one cell: a graph variant's runs against the eager baseline of its shape, as numbers.

Outcomes first, then timing, then loss parity:
- no usable eager run -> baseline-failed; a blocked graph run -> blocked; a graph run that captured no graph
  (outcome uncaptured) or without capture and replay evidence -> invalid; a graph OOM -> oom; a graph run that
  crashed of its own cause (not infrastructure, not a crash its eager arm shows too) -> failed, however fast the
  others; no usable graph run -> failed;
- an eager-like run (the eager arm, or the A/A control runs given as references) whose lm loss went NaN/Inf ->
  baseline-failed: the baseline itself is broken, so nothing is compared with it;
- otherwise the interval of eager/graph step time from the per-job steady medians (judge/interval.py: jobs are
  the replicates, a resolution floor, an allowance for thin arms, never pooled) against the band 1 +- margin;
- loss parity (judge/parity.py) on every graph run with a loss, usable or not, against the eager-like runs of its
  seed checked against each other first: a NaN/Inf loss, or a persistent departure from their band beyond the
  drift bound, makes the cell invalid: the graph trained another model, however fast (a NaN'd run is never
  excluded as infrastructure); one drifting run of three or more is `run-drift` (the verdict stands, the reason
  counts it, nothing recommends it); a speedup whose parity could not be checked, or whose references are too few
  to calibrate a band it departs from, is `unverified`, not a result. An A/A control cell's parity is recorded,
  never a verdict;
- a speedup whose whole interval lies beyond the eager step's GPU-busy ceiling (eager step / GPU busy: a graph takes
  host time off a step, never GPU work) is impossible: invalid (`beyond_ceiling`), never recommended.
Whether the arms may be compared at all (the same environment, the same work) is judge/compare.py's, after this.
The sentence a reader sees is written from these fields by judge/prose.py, and only there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from graphsweep.entry.gpu_busy import launch_bound
from graphsweep.judge import interval as iv
from graphsweep.judge.centre import centre_ms
from graphsweep.judge import parity as lp
from graphsweep.vocab import (
    BASELINE_FAILED, BLOCKED, COMPLETED, CRASHED, FAILED, INCONCLUSIVE, INVALID, OOM, RESULT_OUTCOMES, SLOWDOWN,
    SPEEDUP, TIMING_VERDICTS, UNCAPTURED, UNVERIFIED, USABLE_OUTCOMES,
)  # fmt: skip

# The memory a cell's arms are compared on (runs.parquet column -> its words), best first; a cell uses the first one
# that runs of both arms recorded (docs/tables.md): what the caching allocator holds in the steady window, graph
# pools included; else what is allocated there; else, for logs without memory lines after capture, the whole-run
# peak (which includes pre-capture peaks, so it can hide a graph's cost).
MEMORY_FIGURES = {
    "steady_mem_reserved_gb": "steady-state reserved memory",
    "steady_mem_allocated_gb": "steady-state allocated memory",
    "peak_mem_gb": "whole-run peak memory",
}

NAN_CLASS = "nan"  # the error class the parser gives a NaN/Inf in training (parse/signatures.py R_NAN)
TRANSIENT_CLASS = "transient:"  # error classes of node and network faults (parse/classify.py rules node-fault, network)

# Paired outcome of a cell (comparison.parquet paired_outcome): what happened to both arms, before any timing.
BOTH_COMPLETED = "both-completed"
MIXED = "mixed"  # some runs of an arm were excluded (crash, timeout before the window, unparseable)
GRAPH_ONLY_OOM = "graph-only-oom"
GRAPH_SOMETIMES_OOM = "graph-sometimes-oom"
BOTH_OOM = "both-oom"
GRAPH_FIXES_FAILURE = "graph-fixes-failure"
GRAPH_INTRODUCES_FAILURE = "graph-introduces-failure"
GRAPH_BLOCKED = "graph-blocked"
GRAPH_INVALID = "graph-invalid"
GRAPH_CAPTURED_NOTHING = "graph-captured-nothing"  # a graph run held no CUDA graph: it trained eager (parse/captured.py)
GRAPH_LOSS_DIVERGED = "graph-loss-diverged"
GRAPH_LOSS_NONFINITE = "graph-loss-nonfinite"
GRAPH_TOO_SHORT = "graph-too-short"  # graph runs completed with too few iterations for a steady window
GRAPH_CRASHED = "graph-crashed"  # a graph run died of its own cause (not infrastructure): the setting crashes
BEYOND_CEILING = "beyond-ceiling"  # the whole interval lies beyond the eager step's GPU-busy ceiling: impossible
BASELINE_LOSS_NONFINITE = "baseline-loss-nonfinite"  # an eager-like run's lm loss went NaN/Inf: no baseline
BOTH_FAILED = "both-failed"


@dataclass
class ArmRun:
    run_id: str
    outcome: str  # one of vocab.RESULT_OUTCOMES
    step_ms: Sequence[float]  # the steady-window iteration times of this run (ms)
    resolution_ms: float | None = None  # print step of those times (from the log's digits); None: from the values
    mem_gb: float | None = None  # the run's memory figure (compare.MEMORY_FIGURES: steady reserved, when logged)
    reason: str = ""
    error_class: str | None = None
    seed: int | None = None  # runs of one seed train the same model (None: unknown, so never compared)
    loss: Mapping[int, float] = field(default_factory=dict)  # iteration -> lm loss as printed (NaN from a NaN on)
    loss_span: int = 1  # iterations each printed loss averages (Megatron's log_interval when it prints every N)
    steady_reason: str = ""  # why the run has the steady window it has (parse/window.py), e.g. too few iterations
    gpu_busy_ms: float | None = None  # eager arms: GPU busy ms per iteration (parse/busy.py)
    graphs_captured: int | None = None  # graph arms: CUDA graphs the run held (parse/captured.py); None: unsaid
    transient: bool = False  # its failure is infrastructure's: a node or network fault the retry policy retries
    capture_iteration: int | None = None  # graph arms: the iteration its graphs were captured in (first replayed)

    def __post_init__(self) -> None:
        if self.outcome not in RESULT_OUTCOMES:
            raise ValueError(
                f"ArmRun {self.run_id!r}: outcome {self.outcome!r} is not one of {', '.join(RESULT_OUTCOMES)}"
            )
        if len(self.step_ms):
            x = np.asarray(self.step_ms, dtype=float)
            if not np.all(np.isfinite(x) & (x > 0)):
                raise ValueError(
                    f"ArmRun {self.run_id!r}: step_ms holds NaN, inf or non-positive times; pass only the parsed "
                    "elapsed times of the steady window (drop missing iteration lines)"
                )

    @property
    def usable(self) -> bool:
        """Timing counts: completed, or a timeout that still measured a steady window."""
        return self.outcome in USABLE_OUTCOMES and len(self.step_ms) > 0

    @property
    def median_ms(self) -> float:
        a = np.sort(np.asarray(self.step_ms, dtype=float))
        k = a.size // 2
        return float(a[k]) if a.size % 2 else float(0.5 * (a[k - 1] + a[k]))

    @property
    def print_step_ms(self) -> float:
        return self.resolution_ms if self.resolution_ms else iv.print_step(self.step_ms)

    @property
    def loss_nonfinite_at(self) -> int | None:
        """The first iteration whose lm loss is NaN/Inf (the parser's NaN without one: -1); None: it stayed finite."""
        bad = [i for i, x in self.loss.items() if not math.isfinite(x)]
        if bad:
            return min(bad)
        return -1 if self.error_class == NAN_CLASS else None

    @property
    def infrastructure(self) -> bool:
        """It crashed of what the failure taxonomy calls infrastructure (docs/failures.md): a node or network fault
        (error class `transient:*`), or a fault the retry policy retried as transient for its arm."""
        return self.transient or (self.error_class or "").startswith(TRANSIENT_CLASS)

    @property
    def too_short(self) -> bool:
        """It ran to its end but had too few iterations for a steady window (a spec to fix, not a failure)."""
        return self.outcome == COMPLETED and not len(self.step_ms) and self.steady_reason.startswith("too few")


@dataclass
class Verdict:
    verdict: str  # one of vocab.VERDICTS
    margin: float
    alpha: float  # alpha spent at this look (two-sided); the interval's level is 1 - alpha
    control: bool = False  # an A/A cell: both arms eager
    # timing: set when both arms have usable runs
    speedup: float | None = None  # eager / graph step time, > 1 = graph faster
    ci_low: float | None = None
    ci_high: float | None = None
    p_beyond: float | None = None  # H0: ratio inside 1 +- margin; speedup/slowdown iff < alpha (BH takes this)
    p_within: float | None = None  # H0: ratio outside the band (TOST); neutral iff < alpha
    df: float | None = None
    design: str = ""  # "unpaired" | "paired"
    eager_spread: str | None = None  # interval.OBSERVED | RESOLUTION | ALLOWANCE | NO_SPREAD
    graph_spread: str | None = None
    thin: bool = False  # an arm had fewer than MIN_OWN_JOBS jobs: its spread is the allowance
    resolution_limited: bool = False  # inconclusive, and the print step alone would keep it so at any n
    repeats_needed: int | None = None  # jobs per arm for 80 % power at the next look (inconclusive cells)
    # the arms
    n_eager: int = 0  # usable runs
    n_graph: int = 0
    eager_outcomes: list[str] = field(default_factory=list)  # every run's outcome, run order
    graph_outcomes: list[str] = field(default_factory=list)
    eager_step_ms: float | None = None  # geometric mean of the per-run medians (paired: of the complete pairs')
    graph_step_ms: float | None = None
    eager_resolution_ms: float | None = None
    graph_resolution_ms: float | None = None
    excluded_run_ids: list[str] = field(default_factory=list)  # unusable runs left out of the timing
    failure_run_id: str | None = None  # the run whose outcome decided a non-timing verdict
    failure_detail: str | None = None  # that run's own reason (parser text), or the preflight rule's message
    failure_class: str | None = None  # that run's error class (parse/signatures.py), e.g. launch_gate
    paired_outcome: str = ""
    # memory: median across runs of each run's memory figure (runs that got there: not OOM, not blocked)
    mem_metric: str | None = None  # which runs.parquet column the figures are (judge/compare.py MEMORY_FIGURES)
    eager_mem_gb: float | None = None
    graph_mem_gb: float | None = None
    mem_delta_gb: float | None = None  # graph - eager
    # loss parity of the graph arm (judge/parity.py): the run that decided it (or the closest call when ok)
    loss_parity: str | None = None  # parity.PARITY_OK | DIVERGED | NONFINITE | RUN_DRIFT | UNCHECKED
    loss_iteration: int | None = None  # where that run left eager's loss (or, when ok, came closest)
    loss_graph: float | None = None
    loss_eager: float | None = None
    loss_rel_diff: float | None = None  # |graph - eager| / |eager| at loss_iteration
    loss_level: float | None = None  # that run's persistent departure (median of the tail from an iteration on)
    loss_tolerance: float | None = None
    loss_worst_excess: float | None = None  # loss_level / loss_tolerance (> 1: departed)
    loss_run_id: str | None = None
    loss_departed: int | None = None  # graph runs that left eager's loss (diverged, NaN or drifted)
    loss_checked: int | None = None  # graph runs compared with an eager run of their seed
    loss_runs: int | None = None  # graph runs with a loss at all
    loss_spread: float | None = None  # the references' largest pooled relative sd (the model's non-determinism)
    loss_references: int | None = None  # eager-like runs of the seed the band was drawn from (after the check)
    loss_references_excluded: list[str] | None = None  # references set aside: each left the band of the others
    loss_confirmed: bool | None = None  # the references confirm each other (else: cannot calibrate a band)
    loss_band: list[list[float]] | None = None  # the deciding run's band: [first, last iteration, width]
    loss_band_min: float | None = None  # the band's narrowest and widest half-width over its compared iterations
    loss_band_max: float | None = None
    loss_compared: int | None = None  # iterations the deciding run was compared on (printed by it and the references)
    loss_print_every: int | None = None  # the coarsest print interval compared (1: every iteration)
    loss_bias: bool | None = None  # the deciding run departs by a same-sided offset (parity's bias rule)
    loss_agreement: float | None = None  # it departed: its largest relative distance from the references before
    loss_unseeded: int | None = None  # graph runs with a loss whose seed is unknown (never compared)
    loss_graph_seeds: list[int] | None = None  # the known seeds of the graph runs with a loss
    loss_eager_seeds: list[int] | None = None  # ... and of the eager-like runs with a loss (parity pairs equal seeds)
    # launch-boundness of the eager arm (parse/busy.py): the GPU's busy time per step, its share, what a graph can win
    eager_gpu_busy_ms: float | None = None
    gpu_busy_share: float | None = None
    graph_ceiling: float | None = None  # eager step / GPU busy: no graph of this step can be faster than this
    # what the graph runs captured (parse/captured.py): the fewest CUDA graphs (graphed layers) any of them held
    graphs_captured: int | None = None
    # the speedup's whole interval lies beyond graph_ceiling: no graph of this step can be that fast (invalid)
    beyond_ceiling: bool = False
    crashed_run_ids: list[str] = field(default_factory=list)  # graph runs that died of their own cause (failed)
    # the arms are not comparable (judge/compare.py): prov_* fields and training-configuration keys that differ, and the
    # configuration keys with each arm's values (judge/work.py WorkDifference records)
    not_comparable_fields: list[str] | None = None
    work_differences: list[dict] | None = None


def _median_or_none(values: Sequence[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    return float(np.median(vals)) if vals else None


def _first(runs: Sequence[ArmRun], outcome: str | None = None) -> ArmRun | None:
    return next((r for r in runs if outcome is None or r.outcome == outcome), None)


def _fail(v: Verdict, verdict: str, paired_outcome: str, run: ArmRun | None) -> Verdict:
    v.verdict, v.paired_outcome = verdict, paired_outcome
    if run is not None:
        v.failure_run_id = run.run_id
        v.failure_detail = run.reason or run.error_class or run.outcome
        v.failure_class = run.error_class
    return v


def _printed(r: ArmRun) -> lp.Printed:
    return lp.Printed(dict(r.loss), max(1, int(r.loss_span or 1)), r.capture_iteration)


def arm_parity(eager: Sequence[ArmRun], graph: Sequence[ArmRun], *, floor: float = lp.LOSS_FLOOR,
               factor: float = lp.BAND_FACTOR, controls: Sequence[ArmRun] = ()) -> lp.ArmParity | None:
    """The graph arm's loss parity against the eager-like runs of each seed (None: no graph run has a loss).

    Only runs whose seed is known (stated in the log, or set by the command) are compared: runs of different seeds
    train different models from the first step, so a run of unknown seed is unchecked, never diverged. The eager-like
    runs of a seed are checked against each other first (parity.check_references); `controls` (A/A control runs) join
    them only where the eager runs vouch for them.
    """
    runs = [g for g in graph if g.loss]
    if not runs:
        return None
    checked: list[lp.RunParity] = []
    spread, used, excluded = 0.0, 0, []
    for seed in dict.fromkeys(g.seed for g in runs):
        mine = [g for g in runs if g.seed == seed]
        def of_seed(runs: Sequence[ArmRun]) -> dict[str, lp.Printed]:
            return {r.run_id: _printed(r) for r in runs if r.loss and seed is not None and r.seed == seed}

        refs = lp.check_references(of_seed(eager), floor=floor, factor=factor, controls=of_seed(controls))
        if refs.used:
            spread, used, excluded = max(spread, lp.spread_of(refs)), used + len(refs.used), [*excluded, *refs.excluded]
        checked += [lp.check_run(g.run_id, _printed(g), refs, floor=floor, factor=factor) for g in mine]
    return lp.summarize(checked, spread, references=used, excluded=excluded)


def _parity(v: Verdict, eager: Sequence[ArmRun], graph: Sequence[ArmRun],
            controls: Sequence[ArmRun] = ()) -> lp.ArmParity | None:
    """arm_parity, recorded on v."""
    arm = arm_parity(eager, graph, controls=controls)
    if arm is None:
        return None
    runs = [g for g in graph if g.loss]
    v.loss_parity, v.loss_departed, v.loss_checked, v.loss_runs = arm.state, arm.departed, arm.checked, len(runs)
    v.loss_unseeded = sum(g.seed is None for g in runs)
    v.loss_graph_seeds = sorted({g.seed for g in runs if g.seed is not None})
    v.loss_eager_seeds = sorted({e.seed for e in (*eager, *controls) if e.loss and e.seed is not None})
    v.loss_spread, v.loss_tolerance = arm.spread, arm.tolerance
    v.loss_references, v.loss_references_excluded = arm.references, list(arm.excluded)
    v.loss_confirmed, v.loss_print_every = arm.confirmed, arm.span
    w = arm.worst
    if w is not None and w.state != lp.UNCHECKED:
        v.loss_iteration, v.loss_run_id, v.loss_graph, v.loss_eager = w.iteration, w.run_id, w.graph_loss, w.eager_loss
        v.loss_rel_diff, v.loss_level, v.loss_tolerance = w.rel_diff, w.level, w.tolerance
        v.loss_worst_excess = w.excess
        v.loss_band = [[float(a), float(z), float(w)] for a, z, w in arm.band] or None
        v.loss_band_min, v.loss_band_max, v.loss_compared = w.band_min, w.band_max, w.compared
        v.loss_bias, v.loss_agreement = w.bias, w.agreement
    elif w is not None:
        v.loss_run_id = w.run_id
    return arm


def _broken_baseline(runs: Sequence[ArmRun]) -> ArmRun | None:
    """The first eager-like run whose lm loss went NaN/Inf: the baseline itself is broken."""
    bad = [(r.loss_nonfinite_at, k, r) for k, r in enumerate(runs) if r.loss_nonfinite_at is not None]
    return min(bad, key=lambda t: (t[0], t[1]))[2] if bad else None


def _launch_bound(v: Verdict, eager: Sequence[ArmRun]) -> None:
    """The eager arm's GPU-busy time per step against its step time: the most any graph of this step can win."""
    busy = _median_or_none([r.gpu_busy_ms for r in eager])
    if busy and v.eager_step_ms:
        v.eager_gpu_busy_ms = busy
        v.gpu_busy_share, v.graph_ceiling = launch_bound(busy, v.eager_step_ms)


def judge_cell(
    eager: Sequence[ArmRun],
    graph: Sequence[ArmRun],
    *,
    margin: float,
    alpha: float = iv.ALPHA,
    paired: bool = False,
    control: bool = False,
    mem_metric: str | None = None,
    reference: Sequence[ArmRun] = (),
    pool_reference: bool = False,
    look: iv.Look | None = None,
    design: iv.seq.Design | None = None,
) -> Verdict:
    """Verdict of one cell (one graph variant, or the A/A control, against its shape's eager baseline).

    `alpha` is the sweep's; at a `look` of the decision loop the interval is that look's repeated confidence interval
    (judge/sequential.py) and `repeats_needed` plans over the `design`'s looks;
    `paired` pairs the arms by position (ABBA pair jobs); `control` marks an A/A cell (both arms eager);
    `reference` holds more eager-like runs of the shape (its A/A control runs, or `graphsweep compare --reference`
    logs): they join the eager runs as loss references once checked against them (a diverging one is set aside), and
    with `pool_reference` the eager arm's timing too (the workflow's baseline: all the shape's eager runs),
    never the timing; a NaN/Inf loss in any of them breaks the baseline as the eager arm's own would.
    """
    if not 0 < margin < 1:
        raise ValueError(f"judge_cell: margin={margin} must be a fraction in (0, 1), e.g. 0.02 for 2 %")
    if not 0 < alpha < 1:
        raise ValueError(f"judge_cell: alpha={alpha} must be in (0, 1), e.g. 0.05")
    if not eager and not graph:
        raise ValueError("judge_cell: no runs for either arm; plan and run the cell first")

    # with pool_reference the references (a sweep's A/A control runs: the eager command again) time the baseline too
    timed = [*eager, *reference] if pool_reference else list(eager)
    e_ok, g_ok = [r for r in timed if r.usable], [r for r in graph if r.usable]
    e_bad, g_bad = [r for r in timed if not r.usable], [r for r in graph if not r.usable]
    v = Verdict(verdict="", margin=margin, alpha=alpha, control=control, mem_metric=mem_metric,
                n_eager=len(e_ok), n_graph=len(g_ok),
                eager_outcomes=[r.outcome for r in timed], graph_outcomes=[r.outcome for r in graph])
    v.eager_mem_gb = _median_or_none([r.mem_gb for r in timed if r.outcome not in (OOM, BLOCKED)])
    v.graph_mem_gb = _median_or_none([r.mem_gb for r in graph if r.outcome not in (OOM, BLOCKED)])
    if v.eager_mem_gb is not None and v.graph_mem_gb is not None:
        v.mem_delta_gb = v.graph_mem_gb - v.eager_mem_gb
    if e_ok:
        v.eager_step_ms = centre_ms([r.median_ms for r in e_ok])
        v.eager_resolution_ms = max(r.print_step_ms for r in e_ok)
    if g_ok:
        v.graph_step_ms = centre_ms([r.median_ms for r in g_ok])
        v.graph_resolution_ms = max(r.print_step_ms for r in g_ok)
    g_out, e_out = {r.outcome for r in graph}, {r.outcome for r in eager}
    _launch_bound(v, e_ok)
    counts = [r.graphs_captured for r in graph if r.graphs_captured is not None]
    v.graphs_captured = min(counts) if counts else None

    # 1. No baseline, no verdict.
    if not e_ok:
        first = next((r for r in e_bad if r.reason or r.error_class), _first(e_bad))
        if e_out == {OOM} and OOM in g_out and not g_ok:
            return _fail(v, BASELINE_FAILED, BOTH_OOM, first)
        return _fail(v, BASELINE_FAILED, GRAPH_FIXES_FAILURE if g_ok else BOTH_FAILED, first)
    # A NaN/Inf loss in an eager-like run (in an A/A cell: either arm) is a broken baseline, not a lost run.
    broken = _broken_baseline([*eager, *reference, *(graph if control else ())])
    if broken is not None:
        v = _fail(v, BASELINE_FAILED, BASELINE_LOSS_NONFINITE, broken)
        at = broken.loss_nonfinite_at
        v.loss_iteration = at if at is not None and at >= 0 else None
        v.loss_run_id = broken.run_id
        return v
    # 2. Deterministic graph-arm outcomes dominate, even when some repeats completed.
    if BLOCKED in g_out:
        return _fail(v, BLOCKED, GRAPH_BLOCKED, _first(graph, BLOCKED))
    if UNCAPTURED in g_out:  # it trained eager: its step time is no graph's, whatever it measured
        return _fail(v, INVALID, GRAPH_CAPTURED_NOTHING, _first(graph, UNCAPTURED))
    if INVALID in g_out:
        return _fail(v, INVALID, GRAPH_INVALID, _first(graph, INVALID))
    # 3. Loss parity of every graph run with a loss: a NaN'd or departed run is another model, never a lost run.
    # every eager-like run of the shape: the eager arm's, and the controls the eager runs vouch for
    parity = _parity(v, [r for r in eager if r.loss], graph, controls=[r for r in reference if r.loss])
    if parity is not None and control:
        parity = None  # an A/A cell's arms run the same code: a departure there is the model's own noise
    if parity is not None and parity.state == lp.NONFINITE:  # the references are finite (checked above)
        return _fail(v, INVALID, GRAPH_LOSS_NONFINITE, next(r for r in graph if r.run_id == v.loss_run_id))
    if OOM in g_out:
        return _fail(v, OOM, GRAPH_SOMETIMES_OOM if g_ok else GRAPH_ONLY_OOM, _first(graph, OOM))
    crashed = own_crashes(eager, graph)
    if crashed:  # a setting that crashes is never a result, however fast its other runs
        v = _fail(v, FAILED, GRAPH_CRASHED, crashed[0])
        v.crashed_run_ids = [r.run_id for r in crashed]
        if not g_ok:
            return v
        # fall through: the completed runs' timing is recorded, for the reader, never as a result
    if not g_ok:
        if all(r.too_short for r in g_bad):
            return _fail(v, FAILED, GRAPH_TOO_SHORT, _first(g_bad))
        # eager lost runs the same way too: flaky infrastructure rather than the graph
        mixed = bool(e_bad) and {r.outcome for r in e_bad} >= g_out
        return _fail(v, FAILED, MIXED if mixed else GRAPH_INTRODUCES_FAILURE, _first(g_bad))
    if parity is not None and parity.state == lp.DIVERGED and not crashed:
        v.verdict, v.paired_outcome = INVALID, GRAPH_LOSS_DIVERGED
        v.failure_run_id = v.loss_run_id
        # fall through: the timing is still recorded, for the reader who wants to see what the wrong model cost
    # 4. Timing. Non-deterministic failures (crash, timeout before the window, unparseable) are excluded.
    v.excluded_run_ids = [r.run_id for r in (*g_bad, *e_bad)]
    if not v.paired_outcome:
        v.paired_outcome = MIXED if v.excluded_run_ids else BOTH_COMPLETED
    e_med, g_med = [r.median_ms for r in e_ok], [r.median_ms for r in g_ok]
    e_step, g_step = [r.print_step_ms for r in e_ok], [r.print_step_ms for r in g_ok]
    ea, ga = iv.summarize_arm(e_med, e_step), iv.summarize_arm(g_med, g_step)
    pairs = None
    if paired:  # by position; a pair with an unusable side is dropped
        both = [(a, b) for a, b in zip(eager, graph) if a.usable and b.usable]
        pairs = iv.summarize_pairs([a.median_ms for a, _ in both], [b.median_ms for _, b in both],
                                   [a.print_step_ms for a, _ in both], [b.print_step_ms for _, b in both])
        if pairs:  # the step times the ratio is made of: the complete pairs'
            v.eager_step_ms = centre_ms([a.median_ms for a, _ in both])
            v.graph_step_ms = centre_ms([b.median_ms for _, b in both])
    j = iv.judge_arms(pairs, iv.ZERO_ARM, margin=margin, alpha=alpha, look=look) if pairs else iv.judge_arms(
        ea, ga, margin=margin, alpha=alpha, look=look)
    v.design = "paired" if pairs else "unpaired"
    v.speedup, v.ci_low, v.ci_high = j.ratio, j.lo, j.hi
    v.p_beyond, v.p_within, v.df = j.p_beyond, j.p_within, j.df
    v.eager_spread, v.graph_spread = (pairs.source, pairs.source) if pairs else (ea.source, ga.source)
    v.thin, v.resolution_limited = j.thin, j.resolution_limited
    if v.verdict not in (INVALID, FAILED):
        v.verdict = j.verdict
        if j.verdict == INCONCLUSIVE and not j.resolution_limited:
            v.repeats_needed = iv.repeats_for_power(ea, ga, margin=margin, alpha=alpha, design=design)
        if v.verdict == SPEEDUP and not control and v.loss_parity in (None, *lp.NOT_A_RESULT):
            v.verdict = UNVERIFIED  # faster, but nothing shows that it trains the same model
    if not control and v.graph_ceiling is not None and v.ci_low is not None and v.ci_low > v.graph_ceiling:
        v.beyond_ceiling = True  # a graph takes host time off the step, never GPU work: it did less work than eager
        if v.verdict not in (INVALID, FAILED):
            v.verdict, v.paired_outcome = INVALID, BEYOND_CEILING
    return v


def own_crashes(eager: Sequence[ArmRun], graph: Sequence[ArmRun]) -> list[ArmRun]:
    """The graph runs that died of the graph's own cause: crashed, not of infrastructure (docs/failures.md: a node or
    network fault, retried), and of an error class no eager run of the cell crashed with (a fault both arms show is
    the model's or the machine's, not the graph setting's)."""
    eager_classes = {r.error_class for r in eager if r.outcome == CRASHED}
    return [r for r in graph if r.outcome == CRASHED and not r.infrastructure and r.error_class not in eager_classes]


def aa_false_positive_rate(verdicts: Sequence[str]) -> tuple[int, int, float]:
    """(false positives, judged cells, rate) over eager-vs-eager control cells.

    Any speedup or slowdown of an A/A cell is a false positive; cells without a timing verdict
    (blocked, failed, ...) are not counted. The rate is NaN when no control cell was judged.
    """
    judged = [v for v in verdicts if v in TIMING_VERDICTS]
    fp = sum(v in (SPEEDUP, SLOWDOWN) for v in judged)
    return fp, len(judged), (fp / len(judged) if judged else math.nan)
