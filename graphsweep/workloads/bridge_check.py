"""`preflight: megatron`: validate cells with Megatron Bridge's own config code, on a CPU, before any job.

Two halves in one file:

- **worker** (runs in a Python where Megatron Bridge is installed: the login node's venv built by
  ``tools/megatron-venv.sh``, or a CPU job in the user's NeMo container). Per cell it builds the recipe config,
  applies the cell's Hydra ``KEY=VALUE`` overrides with Bridge's ``omegaconf_utils.process_config_with_overrides``
  (through the entry module's ``build_config``, so exactly as the training job applies them), then calls
  ``megatron.bridge.training.config.runtime_config_update(cfg)``: Bridge's full config validation (mixed
  precision, data-parallel size, comm overlap, ``ConfigContainer.validate``, which finalises Megatron Core's
  ``TransformerConfig`` and so runs its ``__post_init__`` asserts). No GPU, no process group: ``RANK=0
  LOCAL_RANK=0 WORLD_SIZE=<the cell's GPU count>`` are set (docs/megatron-facts.md §8.1).
  Run it by path: ``python graphsweep/workloads/bridge_check.py --serve`` (JSON lines in, JSON lines out, one process for
  many cells: the imports take most of a minute) or ``python graphsweep/workloads/bridge_check.py [--recipe R] [--gpus N]
  KEY=VALUE ...`` for one cell.
- **controller** (the workflow's Python 3.11, no Megatron): :func:`validate_cells` starts the worker with a given
  interpreter over many cells at once (or uses a :class:`BridgeWorker` kept for many calls, as the tests do);
  :func:`cell_from_settings` and :func:`cells_from_runs` turn preflight settings or planned runs into cells.

Megatron and torch are imported only inside the worker's functions (the controller's Python has neither); at module
level this file imports only graphsweep's standard-library modules, so the worker's Python needs nothing else.

What Bridge checks here is what it checks at config time. It does not see what only fails later: the TE RNG
tracker (model build, Bridge gpt_provider.py), ``NCCL_GRAPH_REGISTER`` with expandable segments (TE graph helper
at capture), parallel sizes against the world size (``initialize_model_parallel``).
tests/constraints/test_bridge_agreement.py lists every constraint of graphsweep/constraints with what Bridge 0.6.2 did
on its bad and good case.
"""

from __future__ import annotations

import sys

from pathlib import Path

# Run by path (the worker), Python puts graphsweep/workloads/ first on sys.path: its module names must not shadow an
# installed package, and graphsweep itself comes from this repository.
if __name__ == "__main__":
    if sys.path and sys.path[0].rstrip("/").endswith("workloads"):
        del sys.path[0]
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse  # noqa: E402
import importlib.metadata as metadata  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import queue  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from typing import Any, Iterable, Mapping, Sequence  # noqa: E402

from graphsweep.constraints.hydra import format_override, parse_value  # noqa: E402
from graphsweep.constraints.runtime import BRIDGE_VALIDATOR  # noqa: E402
from graphsweep.entry import megatron_entry as entry  # noqa: E402  (the job's own override code)
from graphsweep.records import LaunchPlan, Violation  # noqa: E402

DEFAULT_RECIPE = "vanilla_gpt_pretrain_config"

# Outcomes of one cell.
OK = "ok"  # runtime_config_update returned
REJECTED = "rejected"  # runtime_config_update raised: Bridge's validator refuses the config
OVERRIDE_ERROR = "override_error"  # the overrides could not be applied (a key this Bridge's config does not have)
RECIPE_ERROR = "recipe_error"  # the recipe function could not be found or raised
OUTCOMES = (OK, REJECTED, OVERRIDE_ERROR, RECIPE_ERROR)

# Process-wide variables the validator reads; reset around every cell.
_RANK_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
VERSION_DISTS = ("megatron-bridge", "megatron-core", "transformer-engine", "torch")


@dataclass(frozen=True)
class BridgeCell:
    """One config to validate: a recipe, its Hydra overrides, the job environment and the GPU count."""

    id: str
    overrides: list[str]  # Hydra KEY=VALUE strings, as the job's command line has them
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = 1  # WORLD_SIZE the validator sees
    recipe: str = DEFAULT_RECIPE  # a megatron.bridge.recipes function name or 'package.module:function'


@dataclass(frozen=True)
class BridgeVerdict:
    """What Bridge's validator made of one cell."""

    id: str
    outcome: str  # one of OUTCOMES
    exc_type: str | None = None  # e.g. AssertionError, ValueError, KeyError
    message: str | None = None  # str(exception), as Megatron raised it
    stage: str | None = None  # recipe | overrides | runtime_config_update

    @property
    def ok(self) -> bool:
        return self.outcome == OK


class BridgeCheckError(RuntimeError):
    """The worker could not run (no Bridge in that Python, a crash): says what to install or fix."""


# --------------------------------------------------------------------------------------------------
# Worker side (Megatron imports only inside functions)
def versions() -> dict[str, str]:
    out = {}
    for dist in VERSION_DISTS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _text(exc: BaseException) -> str:
    """The exception text as Megatron wrote it, without surrounding blank lines (some asserts are f-string blocks)."""
    return str(exc).strip()


def vanilla_gpt_comm_overlap_config() -> Any:
    """The truth check's recipe: ``vanilla_gpt_pretrain_config`` (builds offline: no Hugging Face download) with a
    ``CommOverlapConfig(tp_comm_overlap=False)``, as the production recipes carry one, so ``comm_overlap.*``
    overrides (delay_wgrad_compute, overlap_moe_expert_parallel_comm) have a node to land on; vanilla has None.
    Name it as ``graphsweep.workloads.bridge_check:vanilla_gpt_comm_overlap_config``."""
    from megatron.bridge.recipes.gpt.vanilla_gpt import vanilla_gpt_pretrain_config
    from megatron.bridge.training.comm_overlap import CommOverlapConfig

    cfg = vanilla_gpt_pretrain_config()
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False)
    return cfg


TRUTH_CHECK_RECIPE = "graphsweep.workloads.bridge_check:vanilla_gpt_comm_overlap_config"


def vanilla_gpt_packed_sft_config() -> Any:
    """The truth check's recipe for the packed-sequence rules: the one above with Bridge 0.6.2's packed SFT dataset
    (``default_squad_config`` with offline packing, a ``GPTSFTDatasetConfig``: only SFT datasets have the
    ``enable_offline_packing`` / ``offline_packing_specs`` fields), padding left off so the overrides decide it,
    and micro batch 1 (Bridge: "Micro batch size should be 1 when training with packed sequence"). Nothing is
    downloaded: validation reads the config, not the data."""
    from megatron.bridge.recipes.utils.dataset_utils import default_squad_config

    cfg = vanilla_gpt_comm_overlap_config()
    cfg.dataset = default_squad_config(seq_length=cfg.model.seq_length, enable_offline_packing=True)
    cfg.dataset.dataset_kwargs = {"pad_to_max_length": False}
    cfg.dataset.offline_packing_specs.pad_cu_seqlens = False
    cfg.train.micro_batch_size = 1
    return cfg


PACKED_TRUTH_CHECK_RECIPE = "graphsweep.workloads.bridge_check:vanilla_gpt_packed_sft_config"


def validate_cell(cell: BridgeCell) -> BridgeVerdict:
    """Build, override and validate one cell in this process; the process environment is restored afterwards."""
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides

    saved = dict(os.environ)
    try:
        os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": str(int(cell.gpus))})
        os.environ.update({k: str(v) for k, v in cell.env.items()})
        try:
            recipe = entry.resolve_recipe(cell.recipe)
            cfg = recipe()
        except (Exception, SystemExit) as exc:  # resolve_recipe exits with a message on an unknown name
            return BridgeVerdict(cell.id, RECIPE_ERROR, type(exc).__name__, _text(exc), "recipe")
        try:
            hydra, callables = entry._callable_overrides(list(cell.overrides))
            cfg = process_config_with_overrides(cfg, cli_overrides=hydra or None)
            for key, name in callables.items():
                entry._set_callable(cfg, key, name)
            # as run_recipe.py and the entry module: the model follows the dataset's sequence length
            if getattr(cfg, "dataset", None) is not None and hasattr(cfg.dataset, "seq_length"):
                if cfg.model.seq_length != cfg.dataset.seq_length:
                    cfg.model.seq_length = cfg.dataset.seq_length
        except (Exception, SystemExit) as exc:
            # OverridesError wraps the real cause (e.g. "Key 'x' is not in struct"); keep both
            cause = exc.__cause__
            msg = _text(exc) if cause is None else f"{_text(exc)} [{type(cause).__name__}]"
            return BridgeVerdict(cell.id, OVERRIDE_ERROR, type(exc).__name__, msg, "overrides")
        try:
            runtime_config_update(cfg)
        except Exception as exc:
            return BridgeVerdict(cell.id, REJECTED, type(exc).__name__, _text(exc), "runtime_config_update")
        return BridgeVerdict(cell.id, OK, stage="runtime_config_update")
    finally:
        os.environ.clear()
        os.environ.update(saved)


def serve(inp: Any, out: Any) -> int:
    """JSON lines: first a ``{"ready": true, "versions": {...}}`` line, then one verdict per cell line read."""
    if importlib.util.find_spec("megatron") is None or importlib.util.find_spec("megatron.bridge") is None:
        raise SystemExit(f"bridge_check: no megatron.bridge in {sys.executable}")  # fail before torch's import
    import torch  # noqa: F401  (TE needs torch imported first)
    import megatron.bridge.training.config  # noqa: F401  (import cost paid once, before the first cell)

    out.write(json.dumps({"ready": True, "versions": versions(), "python": sys.version.split()[0]}) + "\n")
    out.flush()
    for line in inp:
        if not line.strip():
            continue
        data = json.loads(line)
        cell = BridgeCell(
            id=str(data["id"]),
            overrides=[str(o) for o in data.get("overrides", [])],
            env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
            gpus=int(data.get("gpus", 1)),
            recipe=str(data.get("recipe") or DEFAULT_RECIPE),
        )
        verdict = validate_cell(cell)
        out.write(json.dumps(asdict(verdict)) + "\n")
        out.flush()
    return 0


def _protocol_stdout() -> Any:
    """Keep the real stdout for JSON lines; everything Megatron prints (Python or C) goes to stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(os.dup(2), "w", buffering=1)
    return os.fdopen(fd, "w", buffering=1)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="bridge_check.py",
        description="Validate a Megatron Bridge config with Bridge's own runtime_config_update (no GPU).",
    )
    p.add_argument("--serve", action="store_true", help="read cells as JSON lines on stdin, write verdicts")
    p.add_argument("--recipe", default=DEFAULT_RECIPE)
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("overrides", nargs="*", help="KEY=VALUE Hydra overrides; env.NAME=VALUE sets the environment")
    args = p.parse_args(argv)
    out = _protocol_stdout()
    if args.serve:
        return serve(sys.stdin, out)
    env = {a[4:].split("=", 1)[0]: a.split("=", 1)[1] for a in args.overrides if a.startswith("env.") and "=" in a}
    overrides = [a for a in args.overrides if not a.startswith("env.")]
    import torch  # noqa: F401

    verdict = validate_cell(BridgeCell("cli", overrides, env, args.gpus, args.recipe))
    out.write(json.dumps({**asdict(verdict), "versions": versions()}) + "\n")
    return 0 if verdict.ok else 1


# --------------------------------------------------------------------------------------------------
# Controller side (Python 3.11, no Megatron)
@dataclass(frozen=True)
class BridgeReport:
    """Verdicts of one worker run, with the stack that produced them."""

    versions: dict[str, str]
    python: str
    verdicts: list[BridgeVerdict]

    def by_id(self) -> dict[str, BridgeVerdict]:
        return {v.id: v for v in self.verdicts}


def cell_from_settings(
    id: str,
    settings: Mapping[str, Any],
    env: Mapping[str, Any] | None = None,
    *,
    gpus: int = 1,
    recipe: str = DEFAULT_RECIPE,
    base_overrides: Iterable[str] = (),
) -> BridgeCell:
    """Preflight settings (config path -> value, as graphsweep.constraints.catalogue.check takes them) as a cell.

    ``base_overrides`` come first (a recipe's shape: model size, paths), the settings after them, so the
    settings win. Values are written in Hydra syntax by ``format_override``.
    """
    overrides = list(base_overrides)
    for key, value in settings.items():
        parsed = parse_value(value) if isinstance(value, str) else value
        overrides.append(format_override(key, parsed))
    return BridgeCell(id, overrides, {str(k): str(v) for k, v in (env or {}).items()}, int(gpus), recipe)


def cells_from_plans(planned: Iterable[tuple[str, LaunchPlan, str]], *,
                     base_overrides: Iterable[str] = ()) -> list[BridgeCell]:
    """(run id, launch plan, recipe) of planned megatron_bridge runs as cells: the exact overrides and environment
    the job gets (LaunchPlan.overrides, computed once by the planner)."""
    base = list(base_overrides)
    return [cell_from_settings(run_id, plan.overrides, plan.env, gpus=plan.gpus, recipe=recipe or DEFAULT_RECIPE,
                               base_overrides=base) for run_id, plan, recipe in planned]


class BridgeWorker:
    """One worker process (``bridge_check.py --serve`` run by ``python``) for any number of :func:`validate_cells` calls:
    Bridge's imports take most of a minute, paid once when it starts. A context manager; ``close()`` ends it.

    The worker runs in a scratch directory (``cwd``, default a fresh temporary one): recipes name output folders
    relative to it. ``worker_env`` is added to its environment: e.g. ``HF_HUB_OFFLINE=1`` where Hugging Face cannot be
    reached (the Llama/Qwen recipes read a model config from the Hub; offline they fail at once with a recipe_error
    instead of waiting on the network). ``timeout``: seconds for the imports. Raises :class:`BridgeCheckError` when the
    worker cannot start, dies or runs past a time limit.
    """

    def __init__(self, python: str | os.PathLike[str], *, timeout: float = 900.0,
                 cwd: str | os.PathLike[str] | None = None, worker_env: Mapping[str, str] | None = None) -> None:
        self.interpreter = str(python)
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the controller's packages must not shadow the worker's
        env.setdefault("CUDA_VISIBLE_DEVICES", "")
        env.update({str(k): str(v) for k, v in (worker_env or {}).items()})
        self._scratch = tempfile.TemporaryDirectory(prefix="graphsweep-bridge-check-")
        self._stderr = tempfile.TemporaryFile("w+")
        self._lines: queue.Queue[str | None] = queue.Queue()
        try:
            self._proc = subprocess.Popen(
                [self.interpreter, str(Path(__file__).resolve()), "--serve"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self._stderr, text=True, cwd=str(cwd or self._scratch.name), env=env,
            )
        except FileNotFoundError as exc:
            self._scratch.cleanup()
            self._stderr.close()
            raise BridgeCheckError(
                f"preflight megatron: interpreter {python} not found; build the venv with tools/megatron-venv.sh "
                "or point workload.bridge_python at a Python with megatron-bridge installed"
            ) from exc
        threading.Thread(target=self._pump, daemon=True).start()
        ready = self._next(time.monotonic() + timeout, f"ran past {timeout:.0f} s importing Megatron Bridge")
        if not ready or not ready.get("ready"):
            code, tail = self.close(), self._stderr_tail
            self._stderr.close()
            raise BridgeCheckError(
                f"preflight megatron: {python} could not import Megatron Bridge (exit {code}); "
                f"is it the venv of tools/megatron-venv.sh?\n{tail}"
            )
        self.versions: dict[str, str] = ready.get("versions", {})
        self.python: str = ready.get("python", "")

    def validate(self, cells: Sequence[BridgeCell], *, timeout: float = 900.0) -> list[BridgeVerdict]:
        """One verdict per cell, in order; ``timeout``: seconds for all of them."""
        deadline = time.monotonic() + timeout
        verdicts: list[BridgeVerdict] = []
        for cell in cells:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(json.dumps(asdict(cell)) + "\n")
                self._proc.stdin.flush()
                answer = self._next(deadline, f"ran past {timeout:.0f} s on {len(cells)} cells")
            except (BrokenPipeError, ValueError):  # the worker is gone (or closed)
                answer = None
            if answer is None:
                code = self.close()
                raise BridgeCheckError(
                    f"preflight megatron: the Bridge worker answered {len(verdicts)} of {len(cells)} cells "
                    f"(exit {code}); last stderr lines:\n{self._stderr_tail}"
                )
            verdicts.append(BridgeVerdict(**{k: answer.get(k) for k in ("id", "outcome", "exc_type", "message", "stage")}))
        return verdicts

    def close(self) -> int | None:
        """End the worker (its input closed, then killed after 30 s); its exit status."""
        if self._proc.stdin and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            code = self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        self._scratch.cleanup()
        return code

    def __enter__(self) -> "BridgeWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._stderr.close()

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            if line.strip():
                self._lines.put(line)
        self._lines.put(None)  # the worker closed its output: it exited

    def _next(self, deadline: float, late: str) -> dict[str, Any] | None:
        """The worker's next JSON line; None when it exited first."""
        try:
            line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            self._proc.kill()
            raise BridgeCheckError(f"preflight megatron: the Bridge worker {late}") from None
        return None if line is None else json.loads(line)

    @property
    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        return "\n".join(self._stderr.read().strip().splitlines()[-15:])


def validate_cells(
    cells: Sequence[BridgeCell],
    python: str | os.PathLike[str],
    *,
    timeout: float = 900.0,
    cwd: str | os.PathLike[str] | None = None,
    worker_env: Mapping[str, str] | None = None,
    worker: BridgeWorker | None = None,
) -> BridgeReport:
    """Validate every cell with Bridge: in ``worker`` when given (see :class:`BridgeWorker`), else in a worker of
    ``python`` (a Python with Bridge installed) started for this call and ended after it. ``timeout``: seconds for the
    imports, and again for the cells; ``cwd`` and ``worker_env``: see :class:`BridgeWorker`.
    """
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        raise ValueError("bridge_check.validate_cells: cell ids must be unique")
    if worker is not None:
        return BridgeReport(worker.versions, worker.python, worker.validate(cells, timeout=timeout))
    with BridgeWorker(python, timeout=timeout, cwd=cwd, worker_env=worker_env) as started:
        return BridgeReport(started.versions, started.python, started.validate(cells, timeout=timeout))


def preflight_plans(
    planned: Iterable[tuple[str, LaunchPlan, str]], python: str | os.PathLike[str], **kwargs: Any
) -> dict[str, list[Violation]]:
    """``preflight: megatron`` for planned runs: run id -> violations (empty when Bridge accepts the run).

    Constraint ids (constraints/runtime.py BRIDGE_VALIDATOR): ``bridge_rejected`` (runtime_config_update raised: the
    message is Megatron's, prefixed with the exception type), ``bridge_override_error`` (an override this Bridge's
    config has no key for), ``bridge_recipe_error`` (the recipe could not be built here, e.g. no Hugging Face
    access). Keyword arguments go to :func:`validate_cells`. Repeats share overrides: each distinct cell once.
    """
    cells = cells_from_plans(planned)
    unique: dict[tuple[Any, ...], BridgeCell] = {}
    key_of: dict[str, tuple[Any, ...]] = {}
    for cell in cells:
        key = (tuple(cell.overrides), tuple(sorted(cell.env.items())), cell.gpus, cell.recipe)
        unique.setdefault(key, cell)
        key_of[cell.id] = key
    report = validate_cells(list(unique.values()), python, **kwargs)
    verdicts = report.by_id()
    source = (f"Megatron Bridge {report.versions.get('megatron-bridge', '?')} / Core "
              f"{report.versions.get('megatron-core', '?')} runtime_config_update (graphsweep/workloads/bridge_check.py)")
    out: dict[str, list[Violation]] = {}
    for cell in cells:
        v = verdicts[unique[key_of[cell.id]].id]
        out[cell.id] = [] if v.ok else [Violation(BRIDGE_VALIDATOR[v.outcome].id, f"{v.exc_type}: {v.message}", source)]
    return out


if __name__ == "__main__":
    sys.exit(main())
