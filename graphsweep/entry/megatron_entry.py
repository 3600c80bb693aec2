"""graphsweep's Megatron Bridge entry: one process per rank, inside the user's container.

    python megatron_entry.py --recipe llama3_8b_pretrain_config [--graph-api 0.19|0.18|auto] KEY=VALUE ...

It builds the Bridge recipe config (``megatron.bridge.recipes.<name>()``, or ``package.module:function``),
applies the Hydra-style ``KEY=VALUE`` overrides with Bridge's own ``omegaconf_utils.process_config_with_overrides``
(the same code path as ``scripts/training/run_recipe.py``), and runs ``pretrain(config, forward_step,
callbacks=[...])`` with a callback that prints, on every iteration from the capture iteration on:

- the Bridge memory line, ``[Rank r] (after i iterations) memory (GB) | mem-allocated-gigabytes: ...`` (Bridge
  itself prints it only after iterations 1 and 2, before capture: reference 5.3), so the parser gets peak memory
  after capture for both arms;
- ``[graphsweep] cuda graph replay: iteration i`` when a captured graph exists (evidence, not assumption:
  MCore's ``FullCudaGraphWrapper.cuda_graph['training']`` or TE-graphed layers' ``cuda_graphs``) and
  ``[graphsweep] capture seconds: X`` once, for the iteration in which graphs first appear.

The file is run by path, so it imports nothing from graphsweep, and only the standard library at module level:
``import graphsweep.entry.megatron_entry`` works on the controller's Python 3.11 without Megatron.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import statistics
import sys
import time
from typing import Any, Callable

MARK = "[graphsweep]"

# Bridge train_utils.py MEMORY_KEYS, in Bridge's order; "bytes" renamed to "gigabytes", "retires" is Bridge's typo.
MEMORY_KEYS = (
    ("allocated_bytes.all.current", "mem-allocated-gigabytes"),
    ("active_bytes.all.current", "mem-active-gigabytes"),
    ("inactive_split_bytes.all.current", "mem-inactive-gigabytes"),
    ("reserved_bytes.all.current", "mem-reserved-gigabytes"),
    ("allocated_bytes.all.peak", "mem-max-allocated-gigabytes"),
    ("active_bytes.all.peak", "mem-max-active-gigabytes"),
    ("inactive_split_bytes.all.peak", "mem-max-inactive-gigabytes"),
    ("reserved_bytes.all.peak", "mem-max-reserved-gigabytes"),
    ("num_alloc_retries", "mem-alloc-retires"),
    ("allocation.all.current", "mem-allocated-count"),
)

GRAPH_KEYS = ("model.cuda_graph_impl", "model.cuda_graph_scope", "model.cuda_graph_modules")


def log(msg: str) -> None:
    print(f"{MARK} {msg}", flush=True)


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

    has_modules (MCore >= 0.19): impl + ``cuda_graph_modules`` (full_iteration is an impl), deprecated scope
    cleared. Otherwise (<= 0.18): impl + ``cuda_graph_scope`` (full iteration is local + [full_iteration]).
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


def gigabytes(n: float) -> str:
    """Bridge's memory value: 1e9-byte GB, 5 significant digits."""
    return repr(float(f"{n / 1e9:.5g}"))


def memory_line(rank: int, iteration: int, stats: dict[str, Any]) -> str:
    """The Bridge >= 0.2 memory report line (reference 5.3), from torch.cuda.memory_stats()."""
    parts = []
    for stat, name in MEMORY_KEYS:
        value = stats.get(stat, 0)
        parts.append(f"{name}: {int(value) if not name.endswith('gigabytes') else gigabytes(value)}")
    return f"[Rank {rank}] (after {iteration} iterations) memory (GB) | " + " | ".join(parts)


class ReplayTracker:
    """Turns per-iteration observations (wall seconds, graphs present) into the markers."""

    def __init__(self, warmup: int, graph_arm: bool):
        self.warmup = warmup
        self.graph_arm = graph_arm
        self.walls: dict[int, float] = {}
        self.first_graph_iteration: int | None = None

    def observe(self, iteration: int, wall_s: float | None, graphs: int) -> list[str]:
        lines = []
        if wall_s is not None:
            self.walls[iteration] = wall_s
        if graphs and self.first_graph_iteration is None:
            self.first_graph_iteration = iteration
            lines.append(f"cuda graphs detected: {graphs} at iteration {iteration}")
            # capture seconds: the capture iteration's wall time minus a typical eager iteration
            # (iterations 2..warmup; iteration 1 carries setup effects)
            eager = [w for i, w in self.walls.items() if 2 <= i < iteration]
            if iteration in self.walls:
                base = statistics.median(eager) if eager else 0.0
                lines.append(f"capture seconds: {max(0.0, self.walls[iteration] - base):.3f}")
        elif graphs and iteration > (self.first_graph_iteration or iteration):
            lines.append(f"cuda graph replay: iteration {iteration}")
        return lines

    def finish(self, iterations: int) -> list[str]:
        if self.graph_arm and self.first_graph_iteration is None:
            return [f"no cuda graph detected after {iterations} iterations"]
        return []


# --------------------------------------------------------------------------------------------------
# Inside the container (Megatron imports only here)


def detect_has_modules() -> bool:
    """True when this Megatron Core has cuda_graph_modules (the 0.19 API)."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    return "cuda_graph_modules" in {f.name for f in dataclasses.fields(TransformerConfig)}


def versions() -> str:
    from importlib import metadata

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


def make_callback(warmup: int, graph_arm: bool) -> Any:
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

        def on_train_step_start(self, context: Any) -> None:
            self.start_step = int(context.state.train_state.step)
            if self.last_end is None:
                self.last_end = time.perf_counter()

        def on_train_step_end(self, context: Any) -> None:
            now = time.perf_counter()
            iteration = self.start_step + 1 if self.start_step is not None else int(context.state.train_state.step)
            wall = now - self.last_end if self.last_end is not None else None
            self.last_end = now
            self.iterations = iteration
            rank, dp_rank = rank_info()
            if iteration > warmup and dp_rank == 0:
                print(memory_line(rank, iteration, torch.cuda.memory_stats()), flush=True)
            lines = tracker.observe(iteration, wall, count_graphs(context.model) if graph_arm else 0)
            if rank == 0:
                for line in lines:
                    log(line)

        def on_train_end(self, context: Any) -> None:
            if torch.distributed.is_initialized() and torch.distributed.get_rank() != 0:
                return
            for line in tracker.finish(self.iterations):
                log(line)

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


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", required=True, help="Bridge recipe function, or package.module:function")
    p.add_argument("--graph-api", default="auto", help="0.18 (cuda_graph_scope), 0.19 (cuda_graph_modules) or auto")
    p.add_argument("--step-func", default="gpt_step", help="forward step: gpt_step (megatron.bridge.training.gpt_step)")
    args, rest = p.parse_known_args(argv)
    bad = [a for a in rest if "=" not in a and not a.startswith("~")]
    if bad:
        p.error(f"unrecognised arguments {bad}: overrides are KEY=VALUE (e.g. train.micro_batch_size=2)")
    return args, rest


def main(argv: list[str] | None = None) -> int:
    import logging

    args, overrides = parse_args(argv)
    # run_recipe.py does the same, so MCore's INFO lines (TE capture, full-iteration capture) reach the log
    logging.basicConfig(level=logging.INFO)
    has_modules = detect_has_modules()
    if args.graph_api == "auto":
        overrides = translate_graph_overrides(overrides, has_modules)
    elif not has_modules and any(split_override(a)[0] == "model.cuda_graph_modules" for a in overrides):
        raise SystemExit(
            f"{MARK} this Megatron Core has no cuda_graph_modules (API <= 0.18) but the overrides use it: "
            "set workload.mcore_version to 0.18 or auto"
        )
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    if rank == 0:
        log(f"graph api: {'0.19 (cuda_graph_modules)' if has_modules else '<=0.18 (cuda_graph_scope)'}; {versions()}")
        log("overrides: " + " ".join(overrides))
    cfg = build_config(args.recipe, overrides)
    impl = str(getattr(cfg.model, "cuda_graph_impl", "none"))
    warmup = int(getattr(cfg.model, "cuda_graph_warmup_steps", 0) or 0)

    from megatron.bridge.training.gpt_step import forward_step
    from megatron.bridge.training.pretrain import pretrain

    if args.step_func != "gpt_step":
        module, _, func = args.step_func.partition(":")
        forward_step = getattr(importlib.import_module(module), func)
    t0 = time.time()
    pretrain(cfg, forward_step, callbacks=[make_callback(warmup, graph_arm=impl != "none")])
    if rank == 0:
        log(f"done: wall seconds {time.time() - t0:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
