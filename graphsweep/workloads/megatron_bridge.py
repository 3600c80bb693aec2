"""The megatron_bridge workload, controller side: from a run to the exact command a performance engineer would type.

Three launch modes (spec `workload.launch`):
- ``entry``: graphsweep's own entry script (graphsweep/entry/megatron_entry.py, run by path inside the user's
  container) builds the Bridge recipe config, applies the Hydra overrides with Bridge's omegaconf_utils and
  prints post-capture memory plus explicit capture/replay markers on every iteration;
- ``run_recipe``: Bridge's ``scripts/training/run_recipe.py --recipe NAME`` with trailing overrides (docs/megatron-facts.md §4.2);
- ``perf_harness``: ``scripts/performance/run_script.py`` flags (docs/megatron-facts.md §4.4; it has no h200 GPU choice, so
  ``-g h100``: same sm_90, 8 GPUs a node, perf recipes are looked up by name).

Fairness (design "Measurement rules"): every arm of a shape gets the same overrides and environment except the
graph switch. The graph switch is the cuda_graph_* keys plus the TE RNG tracker flags, which Megatron requires for
graphs (Bridge gpt_provider.py L232-237) and which eager keeps at the recipe's value. When the sweep has a
full-iteration variant, the NaN checks that variant must turn off are off in every arm of the shape, eager
included, so both arms do the same work per step.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from graphsweep import resources, textsafe
from graphsweep.constraints import catalogue
from graphsweep.constraints.graph import SCOPE_API, graph_field_problem, normalise_mcore
from graphsweep.constraints.hydra import OverrideError, format_override, is_config_path, parse_value
from graphsweep.constraints.runtime import UNLAUNCHABLE
from graphsweep.constraints.graph import GRAPH_FIELDS, NAN_KEYS
from graphsweep.workloads import bridge_keys
from graphsweep.workloads.base import RunCost
from graphsweep.layout import TORCHRUN_TEE
from graphsweep.entry.affinity import ENV as PIN_CPUS_ENV
from graphsweep.records import EAGER_VARIANT, GraphOverrides, LaunchPlan, RunSpec, SpecError, Variant, Violation
from graphsweep.vocab import EAGER

KIND = "megatron_bridge"
ENTRY_RELPATH = "graphsweep/entry/megatron_entry.py"  # under resources.SOURCE_ROOT, or the profile's graphsweep_dir

# Settings keys that are graphsweep's, not Bridge config paths.
SPECIAL_KEYS = {"gpus", "est_step_s", "compute_dtype"}

# Keys graphsweep owns: the graph switch and the measurement window. A spec that sets them would make the arms
# differ in more than the graph switch, or break the steady window.
GRAPH_KEYS = ("model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules")
WINDOW_KEYS = {
    "train.train_iters": "iterations (and warmup): train_iters = warmup + 1 capture + iterations",
    "model.cuda_graph_warmup_steps": "warmup",
    "logger.log_interval": "nothing: every iteration is logged (log_interval=1)",
}
RNG_KEYS = ("model.use_te_rng_tracker", "rng.te_rng_tracker")
# What a sweep sets itself besides the spec's settings and the graph switch: the TE RNG tracker in every graph arm
# (Megatron requires it for any CUDA graph: Bridge gpt_provider.py L232-237), and, in every arm of a shape with a
# full-iteration variant, the NaN checks off (Bridge config.py L1364-1369) unless the spec gives them.
RNG_TRACKER_ON = {key: True for key in RNG_KEYS}
NAN_CHECKS_OFF = {key: False for key in NAN_KEYS}

# One environment for all arms. COMMON_RECIPE_ENV_VARS of Bridge recipes (recipes/utils/environment_utils.py,
# docs/megatron-facts.md §3.5) plus CUDA_DEVICE_MAX_CONNECTIONS=1 (H100 dense perf recipes; MoE recipes use 32: set it in
# workload.env). Bridge applies recipe env with setdefault, so exporting them here makes the values explicit
# and identical for both arms. NCCL_GRAPH_REGISTER=0 goes with expandable segments (MCore cuda_graphs.py).
# Not TORCH_NCCL_AVOID_RECORD_STREAMS=1: its behaviour is torch's only one from 2.8 on (pytorch PR #148590, kept out
# of 2.7 by PR #150352) and torch 2.11 warns that it is deprecated; only the training process knows the container's
# torch, so the entry sets it there for torch <= 2.7 (megatron_entry.set_torch_env).
DEFAULT_ENV: dict[str, str] = {
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "NCCL_GRAPH_REGISTER": "0",
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_NCCL_HIGH_PRIORITY": "1",
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
}

# spec quiet.manual_gc: Bridge 0.6.2's own recipes collect every 100 iterations (recipes/common.py L68-70)
MANUAL_GC_INTERVAL = 100

# Perf harness: argument_parser.py -g choices have no h200 (docs/megatron-facts.md §4.4).
PERF_HARNESS_GPU = "h100"
# The Megatron entry's runs on the H200s (results/examples/megatron-*, benchmarks/data/h200-dense-sweep-a: 1-GPU
# runs without a container): `python benchmarks/estimates.py` prints these figures. A run's step comes from
# estimate_step_seconds; `step_s`, the loop's seconds per iteration of those runs (the mean over their sweeps: the
# step is the model's, 0.10-0.89 s there, launch-bound ones included), is the least it guesses for a model.
COST = RunCost(startup_s=21.4, teardown_s=7.1, capture_s=0.9, step_s=0.418)
DEFAULT_GPUS_PER_NODE = 8


def special_problem(key: str, value: Any) -> str | None:
    """Why a value of one of graphsweep's own settings (SPECIAL_KEYS) cannot be used, or None. A count of 0 GPUs
    divides by zero in preflight; a step time of 0 or less makes a run free and passes the budget and time checks."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key == "gpus" and not (number and float(value).is_integer() and value >= 1):
        return "the number of GPUs a run takes: a whole number, 1 or more"
    if key == "est_step_s" and not (number and value > 0):
        return "the estimated seconds per training iteration: a number above 0"
    return None


# Counts Megatron divides by or builds the model from: a whole number, 1 or more (None, where the key allows it, is
# Megatron's own default). A 0 is accepted by every schema and ends the job after it got its GPUs: MCore
# parallel_state.initialize_model_parallel divides the world size by tp x pp x cp (and ep x etp), the micro-batch
# calculator (num_microbatches_calculator.py) by micro batch x data parallel, TransformerConfig hidden_size by
# num_attention_heads (kv_channels) and the heads by num_query_groups.
COUNT_KEYS = {
    "model.tensor_model_parallel_size": False, "model.pipeline_model_parallel_size": False,
    "model.context_parallel_size": False, "model.expert_model_parallel_size": False,
    "model.expert_tensor_parallel_size": True, "model.virtual_pipeline_model_parallel_size": True,
    "train.micro_batch_size": False, "train.global_batch_size": False, "model.num_layers": False,
    "model.hidden_size": False, "model.num_attention_heads": False, "model.num_query_groups": True,
    "model.seq_length": False, "dataset.seq_length": False,
}  # fmt: skip


def count_problem(key: str, value: Any) -> str | None:
    """Why a value of one of COUNT_KEYS cannot be used (None: it can, or the key is not a count)."""
    if key not in COUNT_KEYS or (value is None and COUNT_KEYS[key]):
        return None
    number = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None  # an interpolation or a name: Bridge's own check reads it
    if isinstance(number, (int, float)) and not isinstance(number, bool) and float(number).is_integer() and number >= 1:
        return None
    return ("a count Megatron divides by or builds the model from: a whole number, 1 or more"
            + (" (or null for Megatron's default)" if COUNT_KEYS[key] else ""))


def multi_node_problem(raw: Mapping[str, Any]) -> tuple[str, Any, str] | None:
    """A run of more GPUs than one node holds that cannot be placed: (its key, the value, why), or None. Slurm places
    a run on whole nodes (layout); the local executor runs every job on this machine."""
    executor = raw.get("executor") or {}
    per_node = int(executor.get("gpus_per_node") or DEFAULT_GPUS_PER_NODE)
    places = [("axes.gpus", v) for v in raw["axes"].get("gpus", [])]
    places.append(("fixed.gpus", raw.get("fixed", {}).get("gpus")))
    places += [(f"include.{i}.gpus", item.get("gpus")) for i, item in enumerate(raw.get("include", []))]
    for key, gpus in places:
        if not (isinstance(gpus, (int, float)) and not isinstance(gpus, bool) and gpus > per_node):
            continue
        nodes = math.ceil(gpus / per_node)
        if executor.get("cluster", "local") != "slurm":
            return key, gpus, (f"needs {nodes} nodes of {per_node} GPUs (executor.gpus_per_node), and executor.cluster "
                               f"{executor.get('cluster', 'local')!r} runs every job on this one machine: use "
                               f"executor.cluster: slurm, or at most {per_node} GPUs")
        if gpus % per_node:
            return key, gpus, (f"does not fill {nodes} nodes of {per_node} GPUs (executor.gpus_per_node): use a "
                               "multiple of gpus_per_node, so that every node runs the same number of ranks")
    return None


class MegatronSpecError(ValueError):
    """A megatron_bridge spec that cannot become a fair command. Says which key to move where."""


# --------------------------------------------------------------------------------------------------
# Overrides
def mcore_version(run: RunSpec) -> str:
    """The spec's Megatron Core version (0.17, 0.18.2, 0.19 ...) or 'auto' (the entry script detects the API; other
    launchers get the cuda_graph_scope spelling, which every release reads)."""
    return str(run.workload.get("mcore_version", "0.19"))


def graph_overrides(variant: Variant, mcore: str) -> dict[str, Any]:
    """The cuda_graph_* overrides of one arm, for the API generation of one Megatron Core version.

    <= 0.17 (and 'auto', which works on all: >= 0.18 migrates cuda_graph_scope with a DeprecationWarning,
    core_v0.18.0 transformer_config.py L2158-2182, and local + [full_iteration] to the full_iteration impl,
    cuda_graph_config.py L11): ``cuda_graph_impl`` + ``cuda_graph_scope``.
    >= 0.18: ``cuda_graph_impl`` (full_iteration is its own impl) + ``cuda_graph_modules``, and the deprecated
    ``cuda_graph_scope`` cleared to null so a recipe that still sets it cannot trip "cuda_graph_scope and
    cuda_graph_modules cannot be set together." (transformer_config.py L2164 in core_v0.18.0, L2388 in
    core_r0.19.0). Never both set.
    """
    if mcore == "auto" or normalise_mcore(mcore) == SCOPE_API:
        if not variant.is_graph:
            return {"model.cuda_graph_impl": "none"}
        if variant.is_full_iteration:
            return {"model.cuda_graph_impl": "local", "model.cuda_graph_scope": ["full_iteration"]}
        return {"model.cuda_graph_impl": "transformer_engine", "model.cuda_graph_scope": list(variant.scope)}
    if not variant.is_graph:
        return {"model.cuda_graph_impl": "none", "model.cuda_graph_modules": [], "model.cuda_graph_scope": None}
    if variant.is_full_iteration:
        return {"model.cuda_graph_impl": "full_iteration", "model.cuda_graph_modules": [], "model.cuda_graph_scope": None}
    return {
        "model.cuda_graph_impl": "transformer_engine",
        "model.cuda_graph_modules": list(variant.scope),
        "model.cuda_graph_scope": None,
    }


def owned_key_problem(key: str) -> str | None:
    """Why a spec may not set this key itself (it is graphsweep's: the graph switch or the measurement window)."""
    if key in GRAPH_KEYS or key in RNG_KEYS:
        return ("the graph switch; give graph settings as variants (impl + scope), so the eager and graph arms "
                "differ only there")
    if key in WINDOW_KEYS:
        return f"set by graphsweep from the spec's {WINDOW_KEYS[key]}; remove it"
    return None


def key_problem(key: str) -> str | None:
    """Why a spec key cannot be one setting of the training command (None: it can): a Bridge config path
    (`train.micro_batch_size`), `env.NAME` (the job's environment) or one of graphsweep's SPECIAL_KEYS."""
    if key in SPECIAL_KEYS:
        return None
    if key.startswith("env."):
        return None if textsafe.ENV_NAME.fullmatch(key[4:]) else \
            "not an environment variable name after 'env.': letters, digits and '_', not starting with a digit"
    if not is_config_path(key):
        return ("not a Megatron Bridge config path such as train.micro_batch_size (names of letters, digits and '_' "
                "joined by '.'): it becomes one KEY=VALUE word of the training command, and anything else there is "
                "read as an option of the entry, not a setting")
    return None


def validate(raw: Mapping[str, Any], path: str | Path) -> None:
    """No spec section may set the keys graphsweep owns (SpecError names the section and key)."""
    sections = [("workload.overrides", raw["workload"].get("overrides") or {}), ("axes", raw["axes"]),
                ("fixed", raw.get("fixed", {}))]
    sections += [(f"include.{i}", item) for i, item in enumerate(raw.get("include", []))]
    sections += [(f"variants.{i}.overrides", v.get("overrides") or {}) for i, v in enumerate(raw["variants"])]
    for section, mapping in sections:
        for key, value in mapping.items():
            if problem := key_problem(key):
                raise SpecError(path, f"{section}.{key}", value, problem)
            if section.startswith("variants."):
                continue  # a graph arm's own extras: graph settings by design
            if problem := owned_key_problem(key):
                raise SpecError(path, f"{section}.{key}", value, f"'{key}' is {problem}")
            if problem := graph_field_problem(key):
                raise SpecError(path, f"{section}.{key}", value, f"'{key}' is {problem}")
            if key.startswith("env."):
                continue
            for one in value if section == "axes" else [value]:
                if problem := special_problem(key, one) or count_problem(key, one):
                    raise SpecError(path, f"{section}.{key}", one, problem)
                if isinstance(one, str) and one.strip()[:1] in ("[", "{"):  # meant as a list or dict: is it one?
                    try:
                        parse_value(one)
                    except OverrideError as exc:
                        raise SpecError(path, f"{section}.{key}", one,
                                        f"not a list or dict Megatron Bridge's command line can read: {exc}") from None
    if found := multi_node_problem(raw):
        raise SpecError(path, *found)
    recipe, launch = raw["workload"].get("recipe"), raw["workload"].get("launch", "entry")
    if not recipe:
        raise SpecError(path, "workload.recipe", recipe, "a megatron_bridge sweep needs a recipe (e.g. "
                        "llama3_8b_pretrain_config)")
    if launch == "perf_harness" and ":" not in str(recipe):
        raise SpecError(path, "workload.recipe", recipe, "the perf harness needs 'family:model_recipe', e.g. "
                        "'qwen:qwen3_30b_a3b'")
    bridge_keys.check_spec(raw, path)  # every key and the recipe against the catalogue of a Bridge release


def bridge_settings(run: RunSpec) -> dict[str, Any]:
    """The spec's Bridge config paths for this run: workload.overrides, then fixed + axes (graphsweep keys removed)."""
    out: dict[str, Any] = {}
    for source, mapping in (("workload.overrides", run.workload.get("overrides") or {}), ("settings", run.settings)):
        for key, value in mapping.items():
            if key in SPECIAL_KEYS or key.startswith("env."):
                continue
            if problem := owned_key_problem(key):
                raise MegatronSpecError(f"{source}: '{key}' is {problem}")
            out[key] = value
    # Bridge checks that model and dataset agree on the sequence length (run_recipe.py syncs them after
    # overrides); give both so every launcher gets the same shape.
    for a, b in (("model.seq_length", "dataset.seq_length"), ("dataset.seq_length", "model.seq_length")):
        if a in out and b not in out:
            out[b] = out[a]
    return out


def run_overrides(run: RunSpec, mcore: str | None = None) -> dict[str, Any]:
    """Every Hydra override of this run, in application order (later wins)."""
    mcore = mcore or mcore_version(run)
    out = bridge_settings(run)
    out["train.train_iters"] = run.total_iterations
    out["logger.log_interval"] = 1
    if run.quiet.get("manual_gc"):  # spec quiet.manual_gc, as Bridge's own recipes (recipes/common.py L68-70)
        out.setdefault("train.manual_gc", True)
        out.setdefault("train.manual_gc_interval", MANUAL_GC_INTERVAL)
    out["model.cuda_graph_warmup_steps"] = run.warmup
    if run.has_full_iteration_variant:
        # Fairness: the full-iteration arm must run without NaN checks (Bridge config.py L1364-1369; grad check:
        # "NaN checks involve CPU-GPU synchronization which cannot run inside a CUDA graph"), so every arm of
        # the shape does. An explicit user value wins (and then preflight blocks the full-iteration cell).
        for key, value in NAN_CHECKS_OFF.items():
            out.setdefault(key, value)
    out.update(graph_overrides(run.variant, mcore))
    if run.variant.is_graph:
        out.update(RNG_TRACKER_ON)  # the only other graph-arm difference
    for key, value in (run.variant.overrides or {}).items():
        out[key] = value  # graph-arm extras the spec asked for explicitly
    return out


def sweep_additions(settings: Mapping[str, Any], graphs_on: bool, full_iteration: bool) -> dict[str, Any]:
    """What a sweep adds to a graph arm's settings that a command typed by hand must give itself (the keys the
    settings do not set): the TE RNG tracker for any graph, the NaN checks off for a full-iteration graph."""
    adds = {**(RNG_TRACKER_ON if graphs_on else {}), **(NAN_CHECKS_OFF if full_iteration else {})}
    return {key: value for key, value in adds.items() if key not in settings}


def run_env(run: RunSpec) -> dict[str, str]:
    """The job environment: defaults, then workload.env (the same for every arm)."""
    env = dict(DEFAULT_ENV)
    if run.quiet.get("pin_cpus"):
        env[PIN_CPUS_ENV] = "1"  # graphsweep/entry/affinity.py: the entry pins its threads
    for key, value in (run.workload.get("env") or {}).items():
        env[str(key)] = _env_str(value)
    return env


def _env_str(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


# --------------------------------------------------------------------------------------------------
# Launch
def gpus_per_node(run: RunSpec) -> int:
    return run.executor.gpus_per_node or DEFAULT_GPUS_PER_NODE


def layout(run: RunSpec) -> tuple[int, int]:
    """(nodes, GPUs per node) for this run: full nodes first, one task per GPU."""
    gpn = gpus_per_node(run)
    nodes = max(1, math.ceil(run.gpus / gpn))
    if nodes > 1 and run.gpus % gpn:
        raise MegatronSpecError(
            f"gpus = {run.gpus} does not fill {nodes} nodes of {gpn} GPUs (executor.gpus_per_node); "
            "use a multiple of gpus_per_node so every node runs the same number of ranks"
        )
    return nodes, min(run.gpus, gpn)


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    return [str(v) for v in value]


def entry_path(run: RunSpec) -> str:
    """Where the entry script is inside the job: the repository, mounted at the same path (see srun_args)."""
    return str(Path(run.executor.slurm.get("graphsweep_dir") or resources.SOURCE_ROOT) / ENTRY_RELPATH)


def program_argv(run: RunSpec, overrides: Mapping[str, Any]) -> list[str]:
    """The per-rank program: script and arguments, without the launcher."""
    wl = run.workload
    launch = wl.get("launch", "entry")
    recipe = wl.get("recipe")
    if not recipe:
        raise MegatronSpecError("workload.recipe: a megatron_bridge sweep needs a recipe (e.g. llama3_8b_pretrain_config)")
    bridge = str(wl.get("bridge_dir", "/opt/Megatron-Bridge"))
    hydra = [format_override(k, v) for k, v in overrides.items()]
    if launch == "entry":
        return [entry_path(run), "--recipe", recipe, "--graph-api", mcore_version(run), *hydra]
    if launch == "run_recipe":
        return [f"{bridge}/scripts/training/run_recipe.py", "--recipe", recipe, *hydra]
    if launch == "perf_harness":
        family, sep, model = str(recipe).partition(":")
        if not sep:
            raise MegatronSpecError(
                f"workload.recipe = {recipe!r}: the perf harness needs 'family:model_recipe', e.g. 'qwen:qwen3_30b_a3b'"
            )
        _, gpn = layout(run)
        argv = [
            f"{bridge}/scripts/performance/run_script.py",
            "-m", family, "-mr", model, "--task", "pretrain",
            "-g", PERF_HARNESS_GPU, "-c", str(run.settings.get("compute_dtype", "bf16")),
            "-ng", str(run.gpus), "-gn", str(gpn),
        ]  # fmt: skip
        # The harness sets the graph switch itself from the flags (overrides.py _set_cuda_graph_overrides,
        # which translates for MCore 0.19); everything else goes as trailing Hydra overrides, applied last.
        rest = {k: val for k, val in overrides.items() if k not in GRAPH_KEYS}
        return argv + _harness_graph_flags(run.variant) + [format_override(k, val) for k, val in rest.items()]
    raise MegatronSpecError(f"workload.launch = {launch!r}: use entry, run_recipe or perf_harness")


def _harness_graph_flags(v: Variant) -> list[str]:
    """The perf harness's graph switch (argument_parser.py --cuda_graph_impl / --cuda_graph_scope)."""
    if not v.is_graph:
        return ["--cuda_graph_impl", "none"]
    if v.is_full_iteration:
        return ["--cuda_graph_impl", "local", "--cuda_graph_scope", "full_iteration"]
    return ["--cuda_graph_impl", "transformer_engine", "--cuda_graph_scope", ",".join(v.scope)]


def graph_switch(run: RunSpec) -> GraphOverrides | None:
    """The overrides a graph run sets that the eager run of its shape does not, from the same overrides the command
    is built of: the graph switch, the graph-arm extras, and for a full-iteration graph the NaN checks off, which Bridge
    requires for it (config.py L1364-1369) even where the sweep turned them off in both arms. Graph fields both arms
    share (cuda_graph_warmup_steps, those NaN checks) are `shared`: part of how the graph was measured."""
    if not run.variant.is_graph:
        return None
    graph = run_overrides(run)
    eager = run_overrides(replace(run, arm=EAGER, variant=EAGER_VARIANT))
    differs = [k for k in graph if k not in eager or eager[k] != graph[k]]
    if run.variant.is_full_iteration:
        differs += [k for k in NAN_KEYS if k in graph and k not in differs]
    shared = [k for k in graph if k in (*GRAPH_FIELDS, *NAN_KEYS) and k not in differs]
    flags: list[str] = []
    if run.workload.get("launch", "entry") == "perf_harness":  # the switch is the harness's flags, not overrides
        flags = _harness_graph_flags(run.variant)
        differs, shared = [k for k in differs if k not in GRAPH_KEYS], [k for k in shared if k not in GRAPH_KEYS]
    return GraphOverrides("Megatron Bridge overrides", tuple(flags + [format_override(k, graph[k]) for k in differs]),
                          tuple(format_override(k, graph[k]) for k in shared))


def srun_args(run: RunSpec, rank_log_dir: str | None = None) -> list[str]:
    """The srun step: one task per GPU on every node (Bridge derives RANK/WORLD_SIZE/MASTER_* from SLURM_*)."""
    nodes, gpn = layout(run)
    args = [f"--nodes={nodes}", f"--ntasks={nodes * gpn}", f"--ntasks-per-node={gpn}", "--kill-on-bad-exit=1"]
    slurm = run.executor.slurm
    image = slurm.get("container_image")
    if image:
        repo = str(slurm.get("graphsweep_dir") or resources.SOURCE_ROOT)
        mounts = [f"{repo}:{repo}", *_as_list(slurm.get("container_mounts"))]
        args += [f"--container-image={image}", f"--container-mounts={','.join(mounts)}", "--no-container-mount-home"]
        if slurm.get("container_workdir"):
            args.append(f"--container-workdir={slurm['container_workdir']}")
    args += _as_list(slurm.get("srun_args"))
    if rank_log_dir:
        args += [f"--output={rank_log_dir}/rank-%t.log", f"--error={rank_log_dir}/rank-%t.log"]
    return args


def launch_plan(run: RunSpec, *, rank_log_dir: str | None = None) -> LaunchPlan:
    """The exact command of one run.

    On a Slurm cluster (executor.cluster = slurm) the training is an ``srun`` step with one task per GPU, started
    by the submitit task on the allocation's first node (see :func:`slurm_parameters`). Elsewhere it is one
    ``torchrun`` (``python -m torch.distributed.run``) on this node.
    """
    overrides = run_overrides(run)
    program = program_argv(run, overrides)
    python = str(run.workload.get("python", "python"))
    nodes, gpn = layout(run)
    env = run_env(run)
    seed = overrides.get("rng.seed")  # else the recipe's, which Bridge prints: "> setting random seeds to N ..."
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    if run.executor.cluster == "slurm":
        return LaunchPlan(
            argv=[python, *program], env=env, gpus=run.gpus, nodes=nodes, gpus_per_node=gpn, tasks_per_node=gpn,
            overrides=overrides, srun=True, srun_args=srun_args(run, rank_log_dir), seed=seed,
        )  # fmt: skip
    if nodes > 1:
        raise MegatronSpecError(
            f"gpus = {run.gpus} needs {nodes} nodes; multi-node runs need executor.cluster = slurm"
        )
    torchrun = [python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", f"--nproc-per-node={gpn}"]
    if rank_log_dir:
        torchrun.append(f"--log-dir={rank_log_dir}")
    if rank_log_dir or gpn > 1:
        # several ranks: each one's stdout and stderr in its own file, and on the console as whole lines with a
        # `[default<local rank>]:` prefix (never two ranks glued on one line); without --log-dir the local executor
        # names the folder (layout.TORCHRUN_LOG_DIR_ENV) and keeps the files in runs/{run_id}/ranks/
        torchrun.append(TORCHRUN_TEE)
    return LaunchPlan(
        argv=[*torchrun, *program], env=env, gpus=run.gpus, nodes=1, gpus_per_node=gpn, tasks_per_node=1,
        overrides=overrides, srun=False, seed=seed,
    )  # fmt: skip


def slurm_parameters(run: RunSpec) -> dict[str, Any]:
    """submitit parameters that realise the launch shape.

    The submitit task itself runs once, on the first node, in the controller's own environment
    (``slurm_use_srun=False``: NeMo containers have no submitit); it starts the training as its own ``srun`` step
    into the container. The allocation still asks for one task per GPU so that step fits in it.
    """
    nodes, gpn = layout(run)
    return {
        "nodes": nodes,
        "tasks_per_node": gpn,
        "gpus_per_node": gpn,
        "slurm_use_srun": False,
        "timeout_min": run.executor.timeout_min,
    }


# --------------------------------------------------------------------------------------------------
# Preflight and cost
def preflight(run: RunSpec) -> list[Violation]:
    """Rules that reject this run's exact overrides and environment (no GPU, no Megatron import)."""
    mcore = mcore_version(run)
    # auto: the entry spells the switch for the container's API; judged in the newest API's spelling
    spelled = "0.19" if mcore == "auto" else mcore
    try:
        settings = run_overrides(run, spelled)
        layout(run)
    except MegatronSpecError as exc:
        return [Violation(UNLAUNCHABLE.id, str(exc), UNLAUNCHABLE.source)]
    wl = run.workload
    return catalogue.check(
        settings, run_env(run), gpus=run.gpus, mcore=mcore, te_version=wl.get("te_version"),
        torch_version=wl.get("torch_version"), recipe=str(wl.get("recipe") or "") or None,
    )


def needs_cuda(run: RunSpec) -> bool:
    """Every run, eager included: Megatron Core trains on a CUDA device only (the job would stop at `import torch`
    or its first CUDA call), so a local executor on a machine without one starts none of them (plan/planner.py)."""
    return True


# Dense-equivalent FLOP guesses for named recipes (active parameters), for the dry-run estimate only.
_RECIPE_PARAMS = {"llama3_8b": 8.0e9, "llama3_70b": 70e9, "qwen3_30b_a3b": 3.3e9, "llama32_1b": 1.2e9}
_EFFECTIVE_FLOPS_PER_GPU = 350e12  # bf16 H100/H200 model TFLOP/s a tuned dense recipe reaches


def estimate_step_seconds(run: RunSpec) -> float:
    """A per-iteration time guess: spec `est_step_s` when given, else 6 * params * tokens / (GPUs * flops), at least
    what the committed runs' iterations took (COST.step_s)."""
    for source in (run.settings, run.workload, run.executor.record):
        if source.get("est_step_s") is not None:
            return float(source["est_step_s"])
    s = {**(run.workload.get("overrides") or {}), **run.settings}
    seq = float(s.get("model.seq_length") or s.get("dataset.seq_length") or 4096)
    mbs = float(s.get("train.micro_batch_size") or 1)
    gbs = float(s.get("train.global_batch_size") or mbs * run.gpus)
    hidden, layers = s.get("model.hidden_size"), s.get("model.num_layers")
    recipe = str(run.workload.get("recipe", "")).split(":")[-1]
    params = next((p for name, p in _RECIPE_PARAMS.items() if recipe.startswith(name)), None)
    if hidden and layers:
        params = 12.0 * float(layers) * float(hidden) ** 2
    if params is None:
        return 1.0
    return max(COST.step_s, 6.0 * params * gbs * seq / (run.gpus * _EFFECTIVE_FLOPS_PER_GPU))


def estimate(run: RunSpec) -> float:
    """GPU-seconds one run requests: GPUs x (start-up, iterations x step guess, a graph's capture, teardown)."""
    return run.gpus * COST.seconds(run.total_iterations, run.variant.is_graph, estimate_step_seconds(run))
