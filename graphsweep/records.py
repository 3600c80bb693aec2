"""The records that cross stages: a run (`RunSpec`, its `Variant`), a cell (`Cell`), a preflight `Violation`, the
`LaunchPlan` of one job (with its one serialisation), a graph's `GraphOverrides`, the launch gate's `GateDecision`,
what a run's log says (`RunSummary`, summary.json), the files a run's job leaves (`JobSide`: job.json,
`RunRecord`: run.json, each with its one validating to/from dict) and `SpecError`, what a bad spec raises. Their
names (outcomes, verdicts, arms) are graphsweep/vocab.py's. Standard
library only: the entry module imports it inside the user's container.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from graphsweep.textsafe import ENV_NAME
from graphsweep.vocab import (
    CONTROL, EAGER, GRAPH, NO_GRAPH, OUTCOMES, PAIR, REGIONS, events_column, ms_column, pair_run_id, wait_column,
)  # fmt: skip


@dataclass(frozen=True)
class Violation:
    """A constraint that rejects a run before it costs a GPU second (graphsweep/constraints)."""

    rule: str  # the constraint's id; a run that hits the same assertion at run time carries it too
    message: str  # the text Megatron prints (or ours where Megatron has none)
    source: str  # where the constraint comes from (file:line @ version), or "graphsweep"


@dataclass(frozen=True)
class LaunchPlan:
    """What one job runs: the command, its environment, its GPU layout (and for a pair job, both arms' plans)."""

    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)
    gpus: int = 1
    nodes: int = 1
    gpus_per_node: int = 1
    tasks_per_node: int = 1
    overrides: Mapping[str, Any] = field(default_factory=dict)  # megatron_bridge: the Hydra overrides of this run
    srun: bool = False  # start the training as its own srun step (multi-task / container launches)
    srun_args: list[str] = field(default_factory=list)
    seed: int | None = None  # the training seed the command sets (None: the workload's own, stated in its log)
    # a pair job: the arms' own plans (A = eager, B = the other arm) and the segment order. In memory only: the
    # driver's argv already carries them (--plans, --order), so config.yaml and to_dict() hold them once, there.
    arms: Mapping[str, "LaunchPlan"] = field(default_factory=dict, compare=False)
    order: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The plan as config.yaml's `launch` section holds it (and the ABBA driver's --plans)."""
        return {"argv": list(self.argv), "env": dict(self.env), "gpus": self.gpus, "nodes": self.nodes,
                "gpus_per_node": self.gpus_per_node, "tasks_per_node": self.tasks_per_node, "srun": self.srun,
                "srun_args": list(self.srun_args), "overrides": dict(self.overrides), "seed": self.seed}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LaunchPlan":
        return cls(argv=[str(a) for a in d.get("argv", [])], env={str(k): str(v) for k, v in (d.get("env") or {}).items()},
                   gpus=int(d.get("gpus", 1)), nodes=int(d.get("nodes", 1)), gpus_per_node=int(d.get("gpus_per_node", 1)),
                   tasks_per_node=int(d.get("tasks_per_node", 1)), srun=bool(d.get("srun", False)),
                   srun_args=[str(a) for a in d.get("srun_args", [])], overrides=dict(d.get("overrides") or {}),
                   seed=None if d.get("seed") is None else int(d["seed"]))

    def shell(self) -> str:
        """The command exactly as it runs, as a user would paste it into a shell: every value quoted."""
        env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(self.env.items()))
        if not all(ENV_NAME.fullmatch(str(k)) for k in self.env):  # a shell would run such a `NAME=value` word
            env = shlex.join(["env", *(f"{k}={v}" for k, v in sorted(self.env.items()))])
        cmd = shlex.join(self.argv)
        if self.srun:
            cmd = shlex.join(["srun", *self.srun_args]) + " " + cmd
        return f"{env} {cmd}".strip()


@dataclass(frozen=True)
class GraphOverrides:
    """What a graph variant's command sets that its shape's eager command does not: the settings a user pastes into
    their own training command for this graph. The workload that builds the command records them at plan time
    (plan.parquet `graph_overrides`, a struct: to_record); the report's Recommendations paste them."""

    what: str  # what the tokens are, as the report names them ("Megatron Bridge overrides", "trainer flags")
    paste: tuple[str, ...]  # the command's words (argv, unquoted), in its order
    shared: tuple[str, ...] = ()  # graph settings both arms ran with: how the graph was measured, no difference

    @property
    def line(self) -> str:
        """The words as a shell takes them (quoted where a shell would read them otherwise)."""
        return shlex.join(self.paste)

    @property
    def shared_line(self) -> str:
        return shlex.join(self.shared)

    def to_record(self) -> dict[str, Any]:
        return {"what": self.what, "paste": list(self.paste), "shared": list(self.shared)}

    @classmethod
    def from_record(cls, d: Any) -> "GraphOverrides | None":
        """The record of a plan row (plan.parquet reads it as a mapping); None where there is none (an eager run, a
        plan written before the column)."""
        if not isinstance(d, Mapping):
            return None
        shared = d.get("shared")  # a list, or the array a Parquet reader gives for one
        return cls(str(d["what"]), tuple(map(str, d["paste"])), tuple(map(str, () if shared is None else shared)))


@dataclass(frozen=True)
class GateDecision:
    """The launch gate's decision on one graph run (spec `launch_gate: true`, graphsweep/run/gate.py), kept as run.json's
    `gate` record: what its shape's eager runs measured, and the margin. The run rule skips the graph arm when no graph
    of that step can be faster than 1 + margin; the parser classifies the run from this record, never from a log."""

    ceiling: float | None  # eager step / GPU busy, median over the eager runs that measured it (None: none did)
    busy_share: float | None  # GPU busy / eager step, over the same runs
    eager_runs: int  # eager runs that measured it
    margin: float

    @property
    def skip(self) -> bool:
        return self.ceiling is not None and self.ceiling < 1 + self.margin

    def to_dict(self) -> dict[str, Any]:
        return {"ceiling": self.ceiling, "busy_share": self.busy_share, "eager_runs": self.eager_runs,
                "margin": self.margin}

    @classmethod
    def from_dict(cls, d: Any) -> "GateDecision":
        """The record as to_dict wrote it; ValueError naming the field that is not."""
        if not isinstance(d, Mapping):
            raise ValueError(f"gate = {d!r} is not the record of the launch gate's decision")

        def number(key: str, optional: bool) -> Any:
            v = d.get(key)
            if (v is None and optional) or (isinstance(v, (int, float)) and not isinstance(v, bool)):
                return v
            raise ValueError(f"gate.{key} = {v!r} is not a number")

        runs = d.get("eager_runs")
        if not isinstance(runs, int) or isinstance(runs, bool) or runs < 0:
            raise ValueError(f"gate.eager_runs = {runs!r} is not a count of runs")
        return cls(number("ceiling", True), number("busy_share", True), runs, number("margin", False))


@dataclass
class RunSummary:
    """What one run's log says (summary.json; graphsweep/parse writes it, the stages after it read it): the outcome,
    the proving line, the steady window and its figures, memory, capture, launch-boundness, host time by region.
    One serialisation: to_dict / from_dict (which names the field that is not what this record holds)."""

    outcome: str  # one of vocab.OUTCOMES
    error_class: str | None = None
    phase: str | None = None  # one of vocab.PHASES
    signature: str | None = None  # the proving line (text, trimmed)
    signature_line: int | None = None
    signature_file: str | None = None
    reason: str = ""
    oom_request: str | None = None
    n_iterations: int = 0
    steady_first: int | None = None
    steady_last: int | None = None
    steady_n: int = 0
    steady_reason: str = ""
    step_ms_median: float | None = None
    step_ms_mean: float | None = None
    step_ms_p10: float | None = None
    step_ms_p90: float | None = None
    elapsed_resolution_ms: float | None = None  # print step of the elapsed times (0.1 for Megatron's {:.1f})
    seed: int | None = None  # the training seed the log states (runs of one seed must train the same model)
    # memory, 1e9-byte GB, max over ranks (docs/tables.md says what each measures and when it is None)
    peak_mem_gb: float | None = None  # whole-run peak: max mem-max-allocated of the lines from the capture iteration
    # on (graph) or of all lines (eager); a running peak since process start, so pre-capture peaks are in it
    peak_mem_before_capture_gb: float | None = None  # max mem-max-allocated of the lines before the capture iteration
    steady_mem_allocated_gb: float | None = None  # max mem-allocated (current) over the steady window
    steady_mem_reserved_gb: float | None = None  # max mem-reserved (current, caching allocator) over the steady window
    steady_mem_peak_gb: float | None = None  # max mem-max-allocated over the steady window, peaks reset after capture
    capture_seen: bool = False
    replay_seen: bool = False
    capture_s: float | None = None  # the capture's own time as Megatron/TE/MCore (or the builtin) reports it
    capture_iteration_excess_s: float | None = None  # Megatron entry: capture iteration minus a median eager one
    graphable_layers: int | None = None
    graphs_captured: int | None = None  # CUDA graphs the run holds (graphed layers for TE scopes): parse/captured.py
    # launch-boundness (eager arms, graphsweep/parse/busy.py): GPU busy ms per iteration, its share of the steady
    # median step, and the ceiling step / busy that no graph of this step can beat
    gpu_busy_ms: float | None = None
    gpu_busy_share: float | None = None
    graph_ceiling: float | None = None
    gpu_busy_note: str | None = None  # why a run that should have measured it did not
    # where the eager step's host time goes (eager arms, parse/busy.py): rank 0's `[graphsweep] host time:` line,
    # whole, so its regions add up to its step; to_dict writes host_regions as typed columns per region
    host_step_ms: float | None = None
    # region (entry/host_time.py REGIONS) -> (host ms, of which waiting on the GPU, profiler events) per iteration
    host_regions: dict[str, tuple[float, float | None, float | None]] = field(default_factory=dict)
    host_time_rank: int | None = None  # the rank whose line it is
    host_time_ranks: int = 0  # how many ranks printed one
    host_time_note: str | None = None  # why a run that should have measured it did not
    transient: str | None = None  # the transient signature's text when the retry policy retries it (docs/failures.md)
    # extras
    signature_id: str | None = None  # catalogue id (SIGNATURES)
    signature_source: str | None = None  # where Megatron/PyTorch/Slurm prints it
    arm: str = EAGER
    warmup: int | None = None
    failed_iteration: int | None = None  # the iteration that was running when the run failed
    capture_iteration: int | None = None
    train_iters: int | None = None  # N of "iteration i/N"
    last_iteration: int | None = None
    measurement_usable: bool = False  # the steady window can be compared (completed, or timeout after the window)
    infrastructure: bool = False  # retried by the workflow, never a result
    end_marker: str | None = None
    exit_code: int | None = None
    slurm_state: str | None = None
    attempt: int | None = None
    previous_attempts: list[dict] = field(default_factory=list)
    device: str | None = None
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # what the log says beyond the outcome, for runs.parquet's prov_* and time_* columns (store/tables.py
    # SUMMARY_NOT_COLUMNS): the training processes' provenance lines (logformat.PROVENANCE), one per (rank, host),
    # lowest rank first
    provenance_lines: list[dict] = field(default_factory=list)
    # the time stamps (the training process's local time, as printed) of the first and the last iteration row
    first_iteration_stamp: str | None = None
    last_iteration_stamp: str | None = None
    # what the run trained and the work of one step (graphsweep/parse/work.py): a cell's arms are compared on them
    train_config: dict | None = None  # work.TrainConfig.to_record: values, Megatron Core defaults, summary sections
    train_config_source: str | None = None  # where it was read: the log's summary, config.yaml, or both
    global_batch: int | None = None  # printed on the steady window's iteration lines
    seq_length: int | None = None
    tokens_per_step: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN and numpy scalars become None / plain numbers); the host time by region as one key per
        region (`host_attn_ms`, `host_attn_wait_ms`, `host_attn_events`, ...: vocab.ms_column, ...)."""
        d = asdict(self)
        regions = d.pop("host_regions") or {}
        for r in REGIONS:  # typed columns, three per region
            ms, wait, events = regions.get(r) or (None, None, None)
            d.update({ms_column(r): ms, wait_column(r): wait, events_column(r): events})
        return _json_safe(d)  # type: ignore[return-value]

    @classmethod
    def from_dict(cls, d: Any) -> "RunSummary":
        """The record as to_dict wrote it (keys it does not know, e.g. a pair arm's run_id, are left out);
        ValueError naming the field that is not what this record holds."""
        if not isinstance(d, Mapping):
            raise ValueError(f"{type(d).__name__}, not the record of a run's summary")
        if d.get("outcome") not in OUTCOMES:
            raise ValueError(f"outcome = {d.get('outcome')!r} is not one of {', '.join(OUTCOMES)}")
        kept = {}
        for f in fields(cls):
            if f.name in d and f.name != "host_regions":
                kept[f.name] = _typed(f.name, d[f.name], f.type)
        regions = {}
        for r in REGIONS:
            figures = tuple(_typed(c, d.get(c), "float | None") for c in (ms_column(r), wait_column(r), events_column(r)))
            if figures[0] is not None:
                regions[r] = figures
        return cls(**kept, host_regions=regions)


def _json_safe(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()  # numpy scalar
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


_KINDS = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "list": (list,), "dict": (dict,)}
_KIND_WORDS = {"str": "text", "int": "a whole number", "float": "a number", "bool": "true or false", "list": "a list",
               "dict": "a mapping"}


def _typed(key: str, value: Any, annotation: str) -> Any:
    """The value of a record's field as its annotation says ('int | None', 'list[str]', ...), or ValueError."""
    kind = annotation.split(" | ")[0].split("[")[0]
    if value is None and "None" in annotation:
        return None
    ok = isinstance(value, _KINDS[kind]) and (kind == "bool" or not isinstance(value, bool))
    if not ok:
        raise ValueError(f"{key} = {value!r} is not {_KIND_WORDS[kind]}")
    return float(value) if kind == "float" else value


def _field(d: Mapping[str, Any], key: str, kind: str, default: Any = None) -> Any:
    """d[key] checked to be of `kind` (int, count, number, text, id, mapping, list) or None; ValueError naming the key
    and its value when it is not. A missing key is `default`."""
    v = d.get(key, default)
    if v is None:
        return default
    ok = {"int": isinstance(v, int) and not isinstance(v, bool),
          "count": isinstance(v, int) and not isinstance(v, bool) and v >= 0,
          "number": isinstance(v, (int, float)) and not isinstance(v, bool),
          "text": isinstance(v, str),
          "id": isinstance(v, (str, int)) and not isinstance(v, bool) and str(v) != "",
          "mapping": isinstance(v, Mapping),
          "list": isinstance(v, list)}[kind]  # fmt: skip
    if not ok:
        raise ValueError(f"key '{key}' = {v!r} is not {_FIELD_WORDS[kind]}")
    return str(v) if kind == "id" else v


_FIELD_WORDS = {"int": "a whole number", "count": "a count (a whole number from 0)", "number": "a number", "text": "text",
                "id": "a job id", "mapping": "a mapping", "list": "a list"}  # fmt: skip


@dataclass(frozen=True)
class JobSide:
    """`.jobs/{run_id}/job.json`: the job a run waits for, written as it is submitted (run/submit.py, run/local.py) and
    removed once the job is known to have ended. A controller that was killed reattaches to a Slurm job from here;
    before a local job of the run starts again, the one named here is known gone (its process, by host, pid and start
    time)."""

    cluster: str  # local | debug | slurm
    job_id: str
    folder: str  # submitit's folder of the job ("%j" stands for the job id)
    log: str  # the job's training log, linked to runs/{run_id}/log.txt when it has ended
    attempt: int = 1  # the run rule's attempt that submitted it
    timeout_min: int | None = None
    submitted_utc: str | None = None
    host: str | None = None  # a local job: the host of its process ...
    pid_start: str | None = None  # ... and that process's start time (a reused pid is not the job)
    rank_log_dir: str | None = None  # torchrun's per-rank files of the job, where it gave them a folder

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_dict(cls, d: Any) -> "JobSide":
        """The record as to_dict wrote it; ValueError naming the key that is not."""
        if not isinstance(d, Mapping):
            raise ValueError("not the mapping of a job graphsweep writes")
        kinds = {"cluster": "text", "job_id": "id", "folder": "text", "log": "text", "attempt": "int",
                 "timeout_min": "int", "submitted_utc": "text", "host": "text", "pid_start": "id",
                 "rank_log_dir": "text"}  # fmt: skip
        got = {k: _field(d, k, kind) for k, kind in kinds.items()}
        missing = [k for k in ("cluster", "job_id", "folder", "log") if got[k] is None]
        if missing:
            raise ValueError(f"lacks '{missing[0]}'")
        return cls(**{**got, "attempt": got["attempt"] or 1})


@dataclass(frozen=True)
class RunRecord:
    """`runs/{run_id}/run.json`: what ran for one run and how its job ended. Three writers, one record: a job's end
    (run/runrule.py), a graph arm the launch gate skipped (run/gate.py: no job, `gate` holds the decision) and an
    ingested log (run/ingest.py: no job, `source_files` and `seed`). The log says the rest (parse/)."""

    run_id: str
    executor: str  # local | debug | slurm | launch-gate | ingest
    job_id: str | None = None  # None: no job ran
    attempt: int = 1  # the run rule's attempt (Snakemake's --retries)
    state: str | None = None  # the scheduler's state of the job (None: no job)
    exit_code: int | None = None  # the training command's (negative: the signal that ended it)
    command: str | None = None  # the command as it ran, quoted for a shell
    gpus: int | None = None
    nodes: int | None = None
    host: str | None = None
    submitted_utc: str | None = None
    start_utc: str | None = None
    end_utc: str | None = None
    wall_s: float | None = None
    gpu_seconds: float | None = None
    time_limit_min: int | None = None
    slurm_job_id: str | None = None
    slurm_nodelist: str | None = None
    slurm_restart_count: int | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)  # graphsweep/provenance.py, collected in the job
    # the attempt before a transient failure's one retry: its record, with its log kept aside and the signature
    previous_attempts: tuple["RunRecord", ...] = ()
    log: str | None = None  # (a previous attempt) its training log, kept under .jobs/
    signature: str | None = None  # (a previous attempt) the transient signature it failed on
    gate: GateDecision | None = None  # the launch gate's decision on a graph run of a `launch_gate: true` spec
    source_files: tuple[Mapping[str, Any], ...] | None = None  # ingested: path, sha256 and bytes of each log file
    seed: int | None = None  # ingested: the spec's source.seed
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this graphsweep does not know, kept as they were

    _WHEN_SET = ("previous_attempts", "log", "signature", "gate", "source_files", "seed")  # else no such key

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            if name == "extra" or name in self._WHEN_SET and v in (None, ()):
                continue
            if name == "previous_attempts":
                v = [p.to_dict() for p in v]
            elif name == "gate":
                v = v.to_dict()
            elif name == "provenance":
                v = dict(v)
            elif name == "source_files":
                v = [dict(s) for s in v]
            out[name] = v
        return {**out, **self.extra}

    @classmethod
    def from_dict(cls, d: Any) -> "RunRecord":
        """The record as to_dict wrote it (and as every earlier graphsweep wrote it); ValueError naming the key and
        value that are not."""
        if not isinstance(d, Mapping):
            raise ValueError("not the mapping of a run graphsweep writes")
        kinds = {"run_id": "text", "executor": "text", "job_id": "id", "attempt": "int", "state": "text",
                 "exit_code": "int", "command": "text", "gpus": "count", "nodes": "count", "host": "text",
                 "submitted_utc": "text", "start_utc": "text", "end_utc": "text", "wall_s": "number",
                 "gpu_seconds": "number", "time_limit_min": "int", "slurm_job_id": "id", "slurm_nodelist": "text",
                 "slurm_restart_count": "count", "provenance": "mapping", "previous_attempts": "list", "log": "text",
                 "signature": "text", "gate": "mapping", "source_files": "list", "seed": "int"}  # fmt: skip
        got = {k: _field(d, k, kind) for k, kind in kinds.items()}
        for key in ("run_id", "executor"):
            if not got[key]:
                raise ValueError(f"lacks '{key}'")
        if any(not isinstance(s, Mapping) for s in got["source_files"] or ()):
            raise ValueError("key 'source_files' holds something else than the record of a source file")
        got["attempt"] = 1 if got["attempt"] is None else got["attempt"]
        got["provenance"] = dict(got["provenance"] or {})
        got["previous_attempts"] = tuple(cls.from_dict(p) for p in got["previous_attempts"] or ())
        got["gate"] = None if got["gate"] is None else GateDecision.from_dict(got["gate"])
        got["source_files"] = None if got["source_files"] is None else tuple(got["source_files"])
        return cls(**got, extra={k: v for k, v in d.items() if k not in kinds})


# The words of a sweep (design.md): a shape is one point of the axes, a variant a graph setting, a cell shape x
# variant judged against its shape's eager baseline, an arm eager or graph, a run one job of one arm for one repeat
class SpecError(ValueError):
    """A sweep spec is invalid. The message names the file, the key and the value."""

    def __init__(self, path: str | Path, key: str, value: Any, problem: str):
        self.path, self.key, self.value, self.problem = str(path), key, value, problem
        shown = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        super().__init__(f"{path}: key '{key}' = {shown}: {problem}")


@dataclass(frozen=True)
class Variant:
    """A graph setting. impl is NO_GRAPH for eager, else local | transformer_engine | full_iteration."""

    name: str
    impl: str
    scope: tuple[str, ...] = ()
    overrides: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_graph(self) -> bool:
        return self.impl != NO_GRAPH

    @property
    def is_full_iteration(self) -> bool:
        return self.impl == "full_iteration"


EAGER_VARIANT = Variant(EAGER, NO_GRAPH)


@dataclass(frozen=True)
class ExecutorSpec:
    """The spec's `executor:` block, its defaults filled from the schema's (sweepspec/load.py)."""

    cluster: str
    timeout_min: int
    gpus_per_node: int  # 0: all GPUs of a run on one node
    slurm: Mapping[str, Any]  # the profile's keys (config.schema.yaml) the spec sets; they win over the profile's
    record: Mapping[str, Any]  # the block as the spec gave it (defaults filled), as every run records it

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "ExecutorSpec":
        return cls(str(block["cluster"]), int(block["timeout_min"]), int(block["gpus_per_node"]),
                   dict(block.get("slurm") or {}), dict(block))


@dataclass(frozen=True)
class DecideSpec:
    """The spec's `decide:` block (the decision loop), its defaults filled from the schema's (sweepspec/load.py)."""

    enabled: bool
    max_repeats: int  # jobs per arm the loop may reach (raised for one results folder by more-repeats)
    gpu_hours: float | None  # the whole sweep's GPU-hours the loop may reach; None: the spec's budget_gpu_hours
    step: int  # jobs per arm added per round
    horizon: int  # jobs per arm the boundaries are spread over

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "DecideSpec":
        hours = block.get("gpu_hours")
        return cls(bool(block["enabled"]), int(block["max_repeats"]), None if hours is None else float(hours),
                   int(block["step"]), int(block["horizon"]))

    def to_dict(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "max_repeats": self.max_repeats, "gpu_hours": self.gpu_hours,
                "step": self.step, "horizon": self.horizon}


@dataclass(frozen=True)
class RunSpec:
    """One job: one arm of one shape for one repeat."""

    sweep: str
    run_id: str
    shape_id: str
    cell_id: str  # graph run: its cell; eager run: "<shape_id>.eager" (it serves every cell of the shape)
    arm: str  # eager | graph | control | pair (one job running both arms of a cell in ABBA order, graphsweep/workloads/paired.py)
    variant: Variant
    repeat: int
    shape: Mapping[str, Any]  # axis -> value (what varies)
    settings: Mapping[str, Any]  # fixed + shape (what the workload gets)
    workload: Mapping[str, Any]
    warmup: int
    iterations: int
    gpus: int
    executor: ExecutorSpec
    has_full_iteration_variant: bool  # a full-iteration variant exists for this shape (fairness of NaN checks)
    quiet: Mapping[str, Any] = field(default_factory=dict)  # the spec's `quiet:` block: what every arm's job runs with

    @property
    def total_iterations(self) -> int:
        # warmup eager steps, the capture iteration, then the measured ones
        return self.warmup + 1 + self.iterations

    @property
    def is_pair(self) -> bool:
        return self.arm == PAIR

    def pair_arms(self) -> tuple["RunSpec", "RunSpec"]:
        """The two arms one pair job runs: (eager, graph) - or (eager, control) for an A/A cell.

        Each keeps the pair's repeat (the builtin workload's seed), so both arms see the same data.
        """
        if not self.is_pair:
            raise ValueError(f"run {self.run_id!r} is a {self.arm} run, not a pair job (spec `pairing: true`)")
        other = GRAPH if self.variant.is_graph else CONTROL
        eager = replace(self, run_id=pair_run_id(self.run_id, EAGER), arm=EAGER, variant=EAGER_VARIANT)
        return eager, replace(self, run_id=pair_run_id(self.run_id, other), arm=other)

    def to_record(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep,
            "run_id": self.run_id,
            "shape_id": self.shape_id,
            "cell_id": self.cell_id,
            "arm": self.arm,
            "variant": self.variant.name,
            "impl": self.variant.impl,
            "scope": "+".join(self.variant.scope),
            "repeat": self.repeat,
            "warmup": self.warmup,
            "iterations": self.iterations,
            "gpus": self.gpus,
            "workload": self.workload["kind"],
            "shape": dict(self.shape),
            "settings": dict(self.settings),
        }


@dataclass(frozen=True)
class Cell:
    """Shape x graph variant, judged against the eager baseline of its shape."""

    cell_id: str
    shape_id: str
    variant: Variant
    shape: Mapping[str, Any]
    eager_run_ids: tuple[str, ...]
    graph_run_ids: tuple[str, ...]
    is_control: bool = False
    pair_run_ids: tuple[str, ...] = ()  # pairing: the jobs; eager/graph ids above are their measured arms
