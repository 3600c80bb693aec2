"""graphsweep's Megatron Bridge entry: one process per rank, inside the user's container.

    python megatron_entry.py --recipe llama3_8b_pretrain_config [--graph-api 0.19|0.17|auto] KEY=VALUE ...

It builds the Bridge recipe config (``megatron.bridge.recipes.<name>()``, or ``package.module:function``),
applies the Hydra-style ``KEY=VALUE`` overrides with Bridge's own ``omegaconf_utils.process_config_with_overrides``
(the same code path as ``scripts/training/run_recipe.py``), and runs ``pretrain(config, forward_step,
callbacks=[...])``. What it prints besides Megatron's own lines (grammar: graphsweep/logformat.py):

- ``[graphsweep] provenance: {...}`` once per node (local rank 0), before training: the CUDA stack, TE / Core /
  Bridge versions, container, GPUs and graph-relevant environment as *this* process sees them (under Slurm the job
  wrapper runs outside the container and cannot see them), the recipe's ``env_vars`` applied;
- the Bridge memory line, ``[Rank r] (after i iterations) memory (GB) | ...``, on every iteration from the capture
  iteration on (Bridge itself prints it only after iterations 1 and 2, before capture: docs/megatron-facts.md §5.3), and
  ``[graphsweep] memory peaks reset after iteration i`` once, after the capture iteration (warmup + 1) in every arm:
  later ``mem-max-*`` values are the steady window's peaks, the graph pool included;
- ``[graphsweep] cuda graphs detected: n at iteration i`` and ``[graphsweep] cuda graph replay: iteration i`` when a
  captured graph exists (evidence, not assumption: MCore's ``FullCudaGraphWrapper.cuda_graph['training']`` or
  TE-graphed layers' ``cuda_graphs``), and with the first of them ``[graphsweep] capture iteration excess seconds: X``:
  that iteration's wall time minus the median eager iteration 2..i-1 (logs before 2026-12-02 printed the same figure
  as ``capture seconds``; logformat.CAPTURE_ITERATION_EXCESS says how it differs from MCore's capture time).

The file is run by path. At module level it imports only the standard library, so ``import
graphsweep.entry.megatron_entry`` works on the controller's Python 3.11 without Megatron; inside the job it adds
the repository (mounted at the same path) to sys.path for two standard-library-only modules of graphsweep,
logformat and provenance.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata as metadata
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, MutableMapping

if __package__ in (None, ""):  # run by path: graphsweep's stdlib-only modules come from the repository itself
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from graphsweep import logformat as lf  # noqa: E402  (standard library only)
from graphsweep import provenance  # noqa: E402  (standard library only)
from graphsweep.entry import affinity  # noqa: E402  (standard library only)
from graphsweep.entry import host_time  # noqa: E402  (standard library only; torch inside)
from graphsweep.entry.gpu_busy import BusyProbe  # noqa: E402  (standard library only; torch inside)

MARK = lf.MARK

GRAPH_KEYS = ("model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules")


# --------------------------------------------------------------------------------------------------
# Pure helpers (tested on the controller)


def split_override(arg: str) -> tuple[str, str]:
    key, _, value = arg.partition("=")
    return key.lstrip("+~"), value


def _list_items(value: str) -> list[str]:
    v = value.strip()
    if v in ("null", "None", ""):
        return []
    if v.startswith("[") and v.endswith("]"):
        v = v[1:-1]
    return [p.strip().strip("'\"") for p in v.split(",") if p.strip()]


def _fmt_list(items: list[str]) -> str:
    return "[" + ",".join(items) + "]"


def translate_graph_overrides(overrides: list[str], has_modules: bool) -> list[str]:
    """Rewrite the graph switch for the Megatron Core API this container has.

    has_modules (MCore >= 0.18): impl + ``cuda_graph_modules`` (full_iteration is an impl), deprecated scope
    cleared. Otherwise (<= 0.17): impl + ``cuda_graph_scope`` (full iteration is local + [full_iteration]).
    Other overrides keep their place and order.
    """
    impl, names, first = None, None, None
    rest: list[tuple[int, str]] = []
    for i, arg in enumerate(overrides):
        key, value = split_override(arg)
        if key in GRAPH_KEYS:
            first = i if first is None else first
            if key == "model.cuda_graph_impl":
                impl = value.strip().strip("'\"")
            elif value.strip() not in ("null", "None") and (names is None or _list_items(value)):
                names = _list_items(value)
        else:
            rest.append((i, arg))
    if first is None:
        return list(overrides)
    names = names or []
    full = impl == "full_iteration" or (impl == "local" and "full_iteration" in names)
    modules = [n for n in names if n != "full_iteration"]
    if has_modules:
        new_impl = "full_iteration" if full else (impl or "none")
        switch = [f"model.cuda_graph_impl={new_impl}", f"model.cuda_graph_modules={_fmt_list([] if full else modules)}",
                  "model.cuda_graph_scope=null"]
    else:
        if full:
            switch = ["model.cuda_graph_impl=local", "model.cuda_graph_scope=[full_iteration]"]
        else:
            switch = [f"model.cuda_graph_impl={impl or 'none'}", f"model.cuda_graph_scope={_fmt_list(modules)}"]
    out = [a for i, a in rest if i < first] + switch + [a for i, a in rest if i > first]
    return out


memory_line = lf.memory_line  # the Bridge memory line (docs/megatron-facts.md §5.3)


class ReplayTracker:
    """Turns per-iteration observations (wall seconds, graphs present) into the capture and replay markers."""

    def __init__(self, warmup: int, graph_arm: bool):
        self.warmup = warmup
        self.graph_arm = graph_arm
        self.walls: dict[int, float] = {}
        self.first_graph_iteration: int | None = None

    def observe(self, iteration: int, graphs: int, wall_s: float | None = None) -> list[str]:
        if wall_s is not None:
            self.walls[iteration] = wall_s
        if graphs and self.first_graph_iteration is None:
            self.first_graph_iteration = iteration
            lines = [lf.graphs_detected(graphs, iteration)]
            # iteration 1 carries one-off setup (allocator growth, first kernels): the base is 2..iteration-1
            eager = [w for i, w in self.walls.items() if 2 <= i < iteration]
            if iteration in self.walls and eager:
                excess = self.walls[iteration] - statistics.median(eager)
                lines.append(lf.capture_iteration_excess(max(0.0, excess)))
            return lines
        if graphs and iteration > self.first_graph_iteration:
            return [lf.replay(iteration)]
        return []

    def finish(self, iterations: int) -> list[str]:
        if self.graph_arm and self.first_graph_iteration is None:
            return [lf.no_graph(iterations)]
        return []


def resets_peaks_after(iteration: int, warmup: int) -> bool:
    """Peak memory stats are reset once, after the capture iteration (warmup + 1), in every arm alike."""
    return iteration == warmup + 1


# From torch 2.8 ProcessGroupNCCL always stashes a collective's tensors on the CPU side instead of calling
# record_stream (pytorch PR #148590 "[PGNCCL] Launch kernel on current stream & remove record_stream entirely",
# merged to main 2025-03-28; reverted from release/2.7 by PR #150352: "not include this in 2.7 release ... catch the
# next release"). There the variable only makes the ProcessGroupNCCL constructor warn, TORCH_WARN_ONCE(
# "TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this environment variable is thus deprecated."), seen on the
# H200 with torch 2.11 (tests/fixtures/logs/megatron-h200/eager.log L263). torch <= 2.7 still reads it and needs it
# against allocator thrashing with async collectives (Bridge's COMMON_RECIPE_ENV_VARS set it for that).
AVOID_RECORD_STREAMS = "TORCH_NCCL_AVOID_RECORD_STREAMS"
AVOID_RECORD_STREAMS_DEFAULT_FROM = (2, 8)


def needs_avoid_record_streams(torch_version: str | None) -> bool:
    parts = [int(p) for p in (torch_version or "").split("+")[0].split(".")[:2] if p.isdigit()]
    return len(parts) == 2 and tuple(parts) < AVOID_RECORD_STREAMS_DEFAULT_FROM


def set_torch_env(environ: MutableMapping[str, str], torch_version: str | None) -> None:
    """Variables that depend on this container's torch, set before torch is imported (ProcessGroupNCCL reads them when
    it is built). The user's own value (workload.env) wins."""
    if needs_avoid_record_streams(torch_version):
        environ.setdefault(AVOID_RECORD_STREAMS, "1")


# --------------------------------------------------------------------------------------------------
# Inside the container (Megatron imports only here)


# Megatron Core's graph API generations split at 0.18 (core_v0.17.1 transformer_config.py L878 has only
# cuda_graph_scope; core_v0.18.0 L942 adds cuda_graph_modules and the full_iteration impl, MLM PR #4292). Kept here
# (graphsweep.constraints.graph says the same) because this file imports nothing of graphsweep's but stdlib modules.
MODULES_API_FROM = (0, 18)


def graph_api_has_modules(value: str) -> bool | None:
    """``--graph-api``: a Megatron Core version (0.17, 0.18.2, 0.19 ...) -> whether its API has cuda_graph_modules;
    ``auto`` -> None (detect). Raises ValueError for anything else."""
    if value == "auto":
        return None
    parts = value.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"--graph-api {value!r}: give the container's Megatron Core version (0.17, 0.19.2 ...) or auto")
    return (int(parts[0]), int(parts[1])) >= MODULES_API_FROM


def detect_has_modules() -> bool:
    """True when this Megatron Core has cuda_graph_modules (the >= 0.18 API)."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    return "cuda_graph_modules" in {f.name for f in dataclasses.fields(TransformerConfig)}


def versions() -> str:
    out = []
    for dist in ("megatron-core", "megatron-bridge", "transformer-engine", "torch"):
        try:
            out.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(out)


def resolve_recipe(name: str) -> Callable[..., Any]:
    if ":" in name:
        module, _, func = name.partition(":")
        return getattr(importlib.import_module(module), func)
    recipes = importlib.import_module("megatron.bridge.recipes")
    if hasattr(recipes, name):
        return getattr(recipes, name)
    if name.startswith("vanilla_gpt"):
        return getattr(importlib.import_module("megatron.bridge.recipes.gpt.vanilla_gpt"), name)
    raise SystemExit(
        f"{MARK} recipe '{name}' is not in megatron.bridge.recipes; give its function name "
        "(e.g. llama3_8b_pretrain_config) or 'package.module:function'"
    )


def _callable_overrides(overrides: list[str]) -> tuple[list[str], dict[str, str]]:
    """Pull out activation_func: older Bridge drops callables from its OmegaConf view, so set it directly."""
    keep, callables = [], {}
    for arg in overrides:
        key, value = split_override(arg)
        if key.endswith(".activation_func"):
            callables[key] = value.strip().strip("'\"")
        else:
            keep.append(arg)
    return keep, callables


def _set_callable(cfg: Any, key: str, name: str) -> None:
    import torch.nn.functional as F

    obj = cfg
    parts = key.split(".")
    for p in parts[:-1]:
        obj = getattr(obj, p)
    fn = getattr(F, name.rsplit(".", 1)[-1], None)
    if fn is None:
        raise SystemExit(f"{MARK} {key}={name}: not a torch.nn.functional activation (silu, gelu, relu, ...)")
    setattr(obj, parts[-1], fn)


def count_graphs(model: list[Any]) -> int:
    """Captured graphs visible from Python: full iteration (MCore full_cuda_graph.py) or TE-graphed layers."""
    try:
        from megatron.core.full_cuda_graph import FullCudaGraphWrapper

        if FullCudaGraphWrapper.cuda_graph.get("training") is not None:
            return 1
    except ImportError:
        pass
    n = 0
    for chunk in model or []:
        for module in chunk.modules():
            graphs = getattr(module, "cuda_graphs", None)
            if isinstance(graphs, list) and graphs:
                n += 1  # MCore 0.19.2 cuda_graphs.py TECudaGraphHelper.create_cudagraphs L2740-2752 fills it
    return n


def make_callback(warmup: int, graph_arm: bool, pinning: affinity.Pinning | None = None) -> Any:
    import torch
    from megatron.bridge.training.callbacks import Callback

    tracker = ReplayTracker(warmup, graph_arm)

    def rank_info() -> tuple[int, int]:
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        try:
            from megatron.core import parallel_state

            dp_rank = parallel_state.get_data_parallel_rank()
        except Exception:  # not initialised: single process
            dp_rank = 0
        return rank, dp_rank

    class GraphsweepCallback(Callback):
        def __init__(self) -> None:
            self.start_step: int | None = None
            self.last_end: float | None = None
            self.iterations = 0
            self.busy: BusyProbe | None = None  # eager arms: how busy the GPU is (made once ranks exist)

        def on_train_step_start(self, context: Any) -> None:
            self.start_step = int(context.state.train_state.step)
            if self.busy is None:  # the first step: the loop's threads and dataloader workers exist now
                print(affinity.settle(pinning), flush=True)
                model, optimizer = context.model, getattr(context, "optimizer", None)
                self.busy = BusyProbe(rank_info()[0], warmup, enabled=not graph_arm,
                                      annotate=lambda: host_time.annotate_megatron(model, optimizer))
            self.busy.before(self.start_step + 1)
            if self.last_end is None:
                self.last_end = time.perf_counter()

        def on_train_step_end(self, context: Any) -> None:
            now = time.perf_counter()
            # end to end, not start to end: what the loop does between two steps (capture may be there) counts too
            wall = now - self.last_end if self.last_end is not None else None
            self.last_end = now
            iteration = self.start_step + 1 if self.start_step is not None else int(context.state.train_state.step)
            self.iterations = iteration
            rank, dp_rank = rank_info()
            if iteration > warmup and dp_rank == 0:
                print(memory_line(rank, iteration, torch.cuda.memory_stats()), flush=True)
            if resets_peaks_after(iteration, warmup) and torch.cuda.is_initialized():
                torch.cuda.reset_peak_memory_stats()  # every rank: each reports its own steady peak from here
                if rank == 0:
                    print(lf.peaks_reset(iteration), flush=True)
            for line in self.busy.after(iteration) if self.busy is not None else []:
                print(line, flush=True)  # every rank: each profiles its own GPU and host
            lines = tracker.observe(iteration, count_graphs(context.model) if graph_arm else 0, wall)
            if rank == 0:
                for line in lines:
                    print(line, flush=True)

        def on_train_end(self, context: Any) -> None:
            if torch.distributed.is_initialized() and torch.distributed.get_rank() != 0:
                return
            for line in tracker.finish(self.iterations):
                print(line, flush=True)

    return GraphsweepCallback()


def build_config(recipe: str, overrides: list[str]) -> Any:
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides

    cfg = resolve_recipe(recipe)()
    hydra, callables = _callable_overrides(overrides)
    cfg = process_config_with_overrides(cfg, cli_overrides=hydra or None)
    for key, name in callables.items():
        _set_callable(cfg, key, name)
    # as run_recipe.py: the model follows the dataset's sequence length after overrides
    if getattr(cfg, "dataset", None) is not None and hasattr(cfg.dataset, "seq_length"):
        if cfg.model.seq_length != cfg.dataset.seq_length:
            cfg.model.seq_length = cfg.dataset.seq_length
    return cfg


def apply_recipe_env(cfg: Any) -> None:
    """Apply the recipe's ``env_vars`` now, as Bridge's runtime_config_update does first thing inside pretrain
    (training/config.py apply_environment_variables, 0.6.2: ``os.environ.setdefault``, so the launcher's values
    win), so that the provenance line shows the environment the training runs under. Bridge 0.6.2 recipes set
    COMMON_RECIPE_ENV_VARS there (recipes/utils/environment_utils.py), TORCH_NCCL_AVOID_RECORD_STREAMS=1 among
    them: the deprecation warning torch >= 2.8 prints for it in the logs is the recipe's, not graphsweep's."""
    try:
        from megatron.bridge.training.config import apply_environment_variables
    except ImportError:  # a Bridge without recipe env_vars: nothing to apply
        return
    apply_environment_variables(cfg)


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", required=True, help="Bridge recipe function, or package.module:function")
    p.add_argument("--graph-api", default="auto", help="the Megatron Core version the overrides are spelled for: "
                   "<= 0.17 (cuda_graph_scope), >= 0.18 (cuda_graph_modules), or auto (detect and rewrite)")
    p.add_argument("--step-func", default="gpt_step", help="forward step: gpt_step (megatron.bridge.training.gpt_step)")
    args, rest = p.parse_known_args(argv)
    bad = [a for a in rest if "=" not in a and not a.startswith("~")]
    if bad:
        p.error(f"unrecognised arguments {bad}: overrides are KEY=VALUE (e.g. train.micro_batch_size=2)")
    try:
        graph_api_has_modules(args.graph_api)
    except ValueError as exc:
        p.error(str(exc))
    return args, rest


def print_provenance(rank: int) -> None:
    """The provenance line; a failure to describe the stack is printed as such and never stops the training
    (on the H200, 2026-12-01, torch.backends.cudnn.version() raised inside a Megatron process and took every run)."""
    try:
        print(provenance.log_line(rank=rank), flush=True)
    except Exception as exc:  # noqa: BLE001 - evidence, never a reason to lose a run
        print(lf.line(f"provenance failed: {type(exc).__name__}: {exc}"), flush=True)


def main(argv: list[str] | None = None) -> int:
    args, overrides = parse_args(argv)
    pinning = affinity.start()  # spec quiet.pin_cpus: before torch's threads exist (they inherit the other cores)
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    set_torch_env(os.environ, torch_version)  # the controller cannot know the container's torch: here, before import
    # run_recipe.py does the same, so MCore's INFO lines (TE capture, full-iteration capture) reach the log
    logging.basicConfig(level=logging.INFO)
    has_modules = detect_has_modules()
    if args.graph_api == "auto":
        overrides = translate_graph_overrides(overrides, has_modules)
    elif not has_modules and any(split_override(a)[0] == "model.cuda_graph_modules" for a in overrides):
        raise SystemExit(
            f"{MARK} this Megatron Core has no cuda_graph_modules (API <= 0.17) but the overrides use it: "
            "set workload.mcore_version to the container's Megatron Core version, or auto"
        )
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")))
    if rank == 0:
        print(f"{lf.ENTRY_GRAPH_API}{'>=0.18 (cuda_graph_modules)' if has_modules else '<=0.17 (cuda_graph_scope)'}; "
              f"{versions()}", flush=True)
        print(lf.ENTRY_OVERRIDES + " ".join(overrides), flush=True)
    try:
        cfg = build_config(args.recipe, overrides)
        apply_recipe_env(cfg)
    finally:  # also when the config cannot be built: the stack that refused it is evidence too
        if local_rank == 0:  # one line per node: a node in another container or driver shows up
            print_provenance(rank)
    impl = str(getattr(cfg.model, "cuda_graph_impl", "none"))
    warmup = int(getattr(cfg.model, "cuda_graph_warmup_steps", 0) or 0)

    from megatron.bridge.training.gpt_step import forward_step
    from megatron.bridge.training.pretrain import pretrain

    if args.step_func != "gpt_step":
        module, _, func = args.step_func.partition(":")
        forward_step = getattr(importlib.import_module(module), func)
    t0 = time.time()
    pretrain(cfg, forward_step, callbacks=[make_callback(warmup, graph_arm=impl != "none", pinning=pinning)])
    if rank == 0:
        print(f"{lf.ENTRY_DONE}{time.time() - t0:.1f}", flush=True)
    return 0


def exit_now(rc: int) -> None:
    """End the process without the interpreter's teardown once every line is out: pretrain() has already
    destroyed its process group and finished its checkpoints (Bridge 0.6.2 training/pretrain.py
    _maybe_destroy_process_group, train.py finalize_async_saves(blocking=True)), so what remains is garbage
    collection of the model and optimizer and the CUDA context's teardown, GPU-seconds that measure nothing."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    logging.shutdown()
    os._exit(rc)


if __name__ == "__main__":
    exit_now(main())
