"""graphsweep's vocabulary: every name the stages share, defined once.

Run outcomes and their phases, cell verdicts in report order, arms, the A/A control's name, the eager variant's impl
(`NO_GRAPH`) and a pair job's run ids. Where the rest is: the records that cross stages in graphsweep/records.py, a
verdict's colour in graphsweep/report/colours.py, reading a file back (`UnusableFile`) in graphsweep/fileio.py, the
results layout in graphsweep/layout.py. Standard library only: the entry module imports it inside the user's
container. tests/house/test_vocabulary.py fails when one of these names is spelled anywhere else.
"""

from __future__ import annotations

from typing import Sequence

# --------------------------------------------------------------------------------------------------
# Run outcomes (what happened in one run: graphsweep.parse decides, design.md "Outcomes")
COMPLETED = "completed"
BLOCKED = "blocked"  # preflight rule, config rejected, capture error, environment
OOM = "oom"
CRASHED = "crashed"
TIMEOUT = "timeout"  # walltime hit; usable when the steady window was complete
INVALID = "invalid"  # a graph arm without capture + replay evidence, or an eager arm that captured
UNCAPTURED = "uncaptured"  # a graph arm whose log says it holds no CUDA graph (0 graphable layers): it trained eager
UNPARSEABLE = "unparseable"
RESULT_OUTCOMES = (COMPLETED, BLOCKED, OOM, CRASHED, TIMEOUT, INVALID, UNCAPTURED, UNPARSEABLE)
# Infrastructure: the run rule fails so Snakemake retries it; never recorded as a result.
PREEMPTED, NODE_FAIL, CANCELLED, LOST = "preempted", "node_fail", "cancelled", "lost"
INFRA_OUTCOMES = (PREEMPTED, NODE_FAIL, CANCELLED, LOST)
OUTCOMES = RESULT_OUTCOMES + INFRA_OUTCOMES
USABLE_OUTCOMES = (COMPLETED, TIMEOUT)  # may carry a steady window (a timeout after the window still measured)
# The worse of two segments' outcomes names a paired arm (a graph arm that OOMs once is an OOM arm).
OUTCOME_SEVERITY = (COMPLETED, TIMEOUT, UNPARSEABLE, CRASHED, INVALID, UNCAPTURED, OOM, BLOCKED)

# Phases of a run in which a failure happened
SETUP, WARMUP, CAPTURE, STEADY, TEARDOWN = "setup", "warmup", "capture", "steady", "teardown"
PHASES = (SETUP, WARMUP, CAPTURE, STEADY, TEARDOWN)

# --------------------------------------------------------------------------------------------------
# Cell verdicts (comparison.parquet `verdict`), in report order: results first, then what blocked a result
SPEEDUP, SLOWDOWN, NEUTRAL, INCONCLUSIVE = "speedup", "slowdown", "neutral", "inconclusive"
UNVERIFIED = "unverified"  # faster beyond the margin, but the graph's loss could not be checked against eager's
NOT_COMPARABLE = "not-comparable"  # the arms ran in different environments (graphsweep/provenance.py)
FAILED, BASELINE_FAILED = "failed", "baseline-failed"
VERDICTS = (SPEEDUP, SLOWDOWN, NEUTRAL, INCONCLUSIVE, UNVERIFIED, BLOCKED, OOM, INVALID, FAILED, BASELINE_FAILED,
            NOT_COMPARABLE)
TIMING_VERDICTS = (SPEEDUP, SLOWDOWN, NEUTRAL, INCONCLUSIVE, UNVERIFIED)  # the arms' step times were compared
# Verdicts that compare the two arms, so they need runs made in one environment
COMPARING_VERDICTS = (SPEEDUP, SLOWDOWN, NEUTRAL, INCONCLUSIVE, UNVERIFIED, OOM)
# Where the decision loop left a cell (comparison.parquet `loop_status`; judge/loop.py)
LOOP_DECIDED = "decided"  # speedup, slowdown or neutral, family gate passed: no more repeats
LOOP_LIVE = "live"  # undecided and still worth repeats (the loop was stopped before it could add them)
LOOP_DROPPED_LEADER = "dropped-leader"  # its interval lies below the shape's leader's: it cannot be the best
LOOP_DROPPED_MARGIN = "dropped-margin"  # its interval lies below 1 + margin: measured not faster
LOOP_BUDGET = "budget"  # undecided when the loop's budget (repeats per arm, GPU-hours) ran out
LOOP_CONTROL = "control"  # an A/A cell: judged at its shape's looks, never a reason for more repeats
LOOP_UNTIMED = "untimed"  # blocked, OOM, failed, invalid, baseline-failed, not comparable: repeats cannot change it
# Why the loop ended at its last look (looks/look-{k}.json `end`, comparison.parquet metadata `loop_end`)
LOOP_GOES_ON = ""
LOOP_ALL_DECIDED = "decided"  # no cell is live: each is decided, dropped or cannot be timed
LOOP_OUT_OF_REPEATS = "max_repeats"  # the next look would need more jobs per arm than decide.max_repeats
LOOP_OUT_OF_GPU_HOURS = "gpu_hours"  # the next round would take the sweep beyond decide.gpu_hours
LOOP_NOTHING_TO_RUN = "stuck"  # the live cells' next runs cannot run here (blocked at plan time: no CUDA, a rule)
LOOP_NO_ROUNDS = "rounds_off"  # `--config rounds=false` and the next round's runs are not all there
LOOP_ENDS = (LOOP_GOES_ON, LOOP_ALL_DECIDED, LOOP_OUT_OF_REPEATS, LOOP_OUT_OF_GPU_HOURS, LOOP_NOTHING_TO_RUN,
             LOOP_NO_ROUNDS)
LOOP_STATUSES = (LOOP_DECIDED, LOOP_LIVE, LOOP_DROPPED_LEADER, LOOP_DROPPED_MARGIN, LOOP_BUDGET, LOOP_CONTROL,
                 LOOP_UNTIMED)
# --------------------------------------------------------------------------------------------------
# Arms and variants
EAGER = "eager"  # the eager arm, and the eager variant's name
GRAPH = "graph"
CONTROL = "control"  # the second eager arm of an A/A cell
PAIR = "pair"  # one job that runs both arms of a cell in ABBA order (spec `pairing: true`)
ARMS = (EAGER, GRAPH, CONTROL, PAIR)
ABBA_DRIVER = "graphsweep.entry.abba"  # python -m ABBA_DRIVER runs a pair job's segments (graphsweep/entry/abba.py)
# The interpreter a plan names for graphsweep's own programs (`python -m graphsweep...`: the builtin trainer, the ABBA
# driver) when the spec names none: the job runs them with its own interpreter (entry/job.py own_interpreter), so no
# plan holds the controller venv's path and moving the venv changes no run's command.
PYTHON = "python"
AA = "aa"  # the A/A control cell's variant name (eager against eager: the measured false-positive rate)
RESERVED_VARIANT_NAMES = (EAGER, AA)


NO_GRAPH = "none"  # the impl of the eager variant (plan.parquet `impl`; Megatron's cuda_graph_impl none)
INGEST = "ingest"  # run.json `executor` of a run made elsewhere and ingested from its logs (graphsweep/run/ingest.py)

# --------------------------------------------------------------------------------------------------
# Where an eager step's host time goes (graphsweep/entry/host_time.py measures it, the parser records it, the judge
# and the report read it): the regions in the order a transformer layer runs them ("outside" is what no annotation
# covers), and the columns of each
ATTN, MLP, ROUTER, PREPROCESS, DISPATCH, EXPERTS, MOE_OTHER, OPTIMIZER, OUTSIDE = (
    "attn", "mlp", "moe_router", "moe_preprocess", "dispatch", "experts", "moe_other", "optimizer", "outside")
REGIONS = (ATTN, MLP, ROUTER, PREPROCESS, DISPATCH, EXPERTS, MOE_OTHER, OPTIMIZER, OUTSIDE)


def ms_column(region: str) -> str:
    """runs.parquet's column of a region's host ms per iteration (graphsweep/parse, docs/tables.md)."""
    return f"host_{region}_ms"


def wait_column(region: str) -> str:
    """runs.parquet's column of a region's host ms per iteration spent waiting on the GPU (of its ms_column)."""
    return f"host_{region}_wait_ms"


def events_column(region: str) -> str:
    """runs.parquet's column of a region's profiler events per iteration."""
    return f"host_{region}_events"


def share_column(region: str) -> str:
    """comparison.parquet's column of a region's share of the eager step's host time (graphsweep/judge/host.py)."""
    return f"host_{region}_share"


def pair_run_id(job_run_id: str, arm: str) -> str:
    """Id of one measured arm of a pair job (a row of runs.parquet): `{cell_id}.pair.r{k}.{arm}`."""
    return f"{job_run_id}.{arm}"


def cell_counts(verdicts: Sequence[str], variants: Sequence[str]) -> tuple[dict[str, int], int]:
    """(cells per verdict in report order, A/A control cells): the one count the end-of-sweep line and the report's
    badges both print. A/A cells are not counted among the verdicts: they measure the method, not a graph."""
    main = [str(v) for v, name in zip(verdicts, variants) if name != AA]
    found = {v: main.count(v) for v in VERDICTS if v in main}
    found.update({v: main.count(v) for v in sorted(set(main) - set(VERDICTS))})
    return found, sum(name == AA for name in variants)
