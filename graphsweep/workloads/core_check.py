"""The truth check per Megatron Core release: a config's ``model.*`` settings through that release's TransformerConfig.

Megatron Core's graph rules live in ``TransformerConfig.__post_init__`` (transformer_config.py): constructing the
dataclass runs them, on a CPU, with no process group, no GPU and no Transformer Engine. So every release can be
checked from its own wheel, unpacked into a directory (tools/core-releases.sh), and one Python 3.12 with torch (the
Bridge venv's, tools/megatron-venv.sh step 2). Two halves in one file, as graphsweep/workloads/bridge_check.py:

- **worker** (``python core_check.py --core DIR --serve``, run by path): puts DIR first on sys.path, hides
  ``transformer_engine`` (Core imports it optionally; the venv's TE 2.20.2 is not the release's), checks that
  ``megatron.core`` really comes from DIR, then per cell builds ``TransformerConfig(**base, **model)``. Core's TE
  version checks (``is_te_min_version``) read ``megatron.core.utils._te_version``, which the worker sets to the
  cell's TE version (default 2.20.2, the Bridge stack's). Outcomes: ``ok``, ``rejected`` (``__post_init__``
  raised: Megatron's message), ``not_a_field`` (a key this release's TransformerConfig does not have).
- **controller** (Python 3.11, no Megatron): :func:`cell_from_settings` turns preflight settings into a cell (the
  ``model.*`` keys, plus the two ``comm_overlap.*`` keys Bridge copies onto the model config: comm_overlap.py
  ``_apply_cfgs`` L588-618, r0.6.0); :func:`validate_cells` runs one worker per release directory.

What the TransformerConfig cannot see is not checked here: Bridge's own validation
(tests/constraints/test_bridge_agreement.py), the environment and process groups, capture and replay.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run by path: graphsweep/workloads/ must not shadow installed packages
    if sys.path and sys.path[0].rstrip("/").endswith("workloads"):
        del sys.path[0]
    sys.path.append(str(Path(__file__).resolve().parents[2]))  # graphsweep's stdlib-only modules, after the release

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import importlib.abc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from typing import Any, Mapping, Sequence  # noqa: E402

from graphsweep.constraints.hydra import parse_value  # noqa: E402  (standard library only)

OK = "ok"
REJECTED = "rejected"
NOT_A_FIELD = "not_a_field"
OUTCOMES = (OK, REJECTED, NOT_A_FIELD)

# The model the truth check builds (Bridge's vanilla_gpt recipe leaves these at 0;
# tests/constraints/test_bridge_agreement.py BASE_OVERRIDES gives Bridge the same), in bf16 as Bridge's bf16_mixed
# recipes make it.
BASE_MODEL: dict[str, Any] = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "bf16": True}
DEFAULT_TE_VERSION = "2.20.2"  # what Core's TE version checks see when a cell gives none
# Bridge config paths Bridge copies onto the model config (comm_overlap.py _apply_cfgs, r0.6.0 L588-618)
MODEL_ALIASES = {"comm_overlap.overlap_moe_expert_parallel_comm": "overlap_moe_expert_parallel_comm",
                 "comm_overlap.delay_wgrad_compute": "delay_wgrad_compute"}


@dataclass(frozen=True)
class CoreCell:
    """One TransformerConfig to build: its fields (beyond BASE_MODEL), the environment and the TE version."""

    id: str
    model: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    te_version: str = DEFAULT_TE_VERSION
    ignored: list[str] = field(default_factory=list)  # settings TransformerConfig never sees (ddp.*, dataset.* ...)


@dataclass(frozen=True)
class CoreVerdict:
    id: str
    outcome: str  # one of OUTCOMES
    exc_type: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class CoreReport:
    version: str  # megatron.core.package_info.__version__ of the directory checked
    core_dir: str
    python: str
    torch: str
    verdicts: list[CoreVerdict]

    def by_id(self) -> dict[str, CoreVerdict]:
        return {v.id: v for v in self.verdicts}


class CoreCheckError(RuntimeError):
    """The worker could not run: no torch in that Python, no Core in that directory, a crash."""


# --------------------------------------------------------------------------------------------------
# Worker side


class _HideTransformerEngine(importlib.abc.MetaPathFinder):
    """`import transformer_engine` fails as if it were not installed: Core then runs its no-TE paths."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "transformer_engine" or name.startswith("transformer_engine."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by graphsweep core_check)")
        return None


def _text(exc: BaseException) -> str:
    return str(exc).strip()


BF16_DTYPES: dict[str, Any] = {}  # params/pipeline dtype bf16, as Bridge's mixed precision sets them (serve fills it)


def validate_cell(cell: CoreCell, transformer_config: Any, utils: Any, version_cls: Any) -> CoreVerdict:
    fields = {f.name for f in dataclasses.fields(transformer_config)}
    missing = sorted(k for k in cell.model if k not in fields)
    if missing:
        return CoreVerdict(cell.id, NOT_A_FIELD, "TypeError", f"TransformerConfig has no field {', '.join(missing)}")
    saved = dict(os.environ)
    try:
        os.environ.update(cell.env)
        utils._te_version = version_cls(cell.te_version)  # what is_te_min_version compares with
        transformer_config(**{**BASE_MODEL, **BF16_DTYPES, **cell.model})
    except Exception as exc:  # noqa: BLE001 - any exception is Megatron's verdict
        return CoreVerdict(cell.id, REJECTED, type(exc).__name__, _text(exc))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return CoreVerdict(cell.id, OK)


def serve(core_dir: str, inp: Any, out: Any) -> int:
    root = str(Path(core_dir).resolve())
    sys.path.insert(0, root)
    sys.meta_path.insert(0, _HideTransformerEngine())
    warnings.simplefilter("ignore")  # Core's deprecation warnings are not verdicts
    import torch

    import megatron.core
    from megatron.core import utils
    from megatron.core.transformer.transformer_config import TransformerConfig

    # Bridge's bf16_mixed sets params_dtype and pipeline_dtype (Core: "When using pipeline parallelism,
    # pipeline_dtype must be specified")
    BF16_DTYPES.update(params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16)
    if not str(Path(megatron.core.__file__).resolve()).startswith(root + os.sep):
        raise SystemExit(f"core_check: megatron.core came from {megatron.core.__file__}, not from {root}")
    try:
        from megatron.core.package_info import __version__ as version
    except ImportError:
        version = "unknown"
    out.write(json.dumps({"ready": True, "version": version, "core_dir": root, "python": sys.version.split()[0],
                          "torch": torch.__version__}) + "\n")
    out.flush()
    for line in inp:
        if line.strip():
            cell = CoreCell(**json.loads(line))
            # utils.PkgVersion is packaging's Version, as Core imports it (utils.py L49 in 0.17.1)
            out.write(json.dumps(asdict(validate_cell(cell, TransformerConfig, utils, utils.PkgVersion))) + "\n")
            out.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="core_check.py", description="Build TransformerConfigs of one Megatron Core "
                                "release (no GPU, no TE): JSON lines in, verdicts out.")
    p.add_argument("--core", required=True, help="directory holding megatron/core of one release")
    p.add_argument("--serve", action="store_true", help="read cells as JSON lines on stdin")
    args = p.parse_args(argv)
    fd = os.dup(1)
    os.dup2(2, 1)  # Megatron's prints go to stderr; stdout carries the protocol only
    sys.stdout = os.fdopen(os.dup(2), "w", buffering=1)
    return serve(args.core, sys.stdin, os.fdopen(fd, "w", buffering=1))


# --------------------------------------------------------------------------------------------------
# Controller side


def cell_from_settings(id: str, settings: Mapping[str, Any], env: Mapping[str, Any] | None = None, *,
                       te_version: str | None = None) -> CoreCell:
    """Preflight settings (Bridge config paths, Hydra values already parsed) as a TransformerConfig cell."""
    model, ignored = {}, []
    for key, value in settings.items():
        value = parse_value(value) if isinstance(value, str) else value
        if key.startswith("model."):
            model[key[len("model."):]] = value
        elif key in MODEL_ALIASES:
            model[MODEL_ALIASES[key]] = value
        else:
            ignored.append(key)
    return CoreCell(id, model, {str(k): str(v) for k, v in (env or {}).items()}, te_version or DEFAULT_TE_VERSION,
                    sorted(ignored))


def validate_cells(cells: Sequence[CoreCell], python: str | os.PathLike[str], core_dir: str | os.PathLike[str], *,
                   timeout: float = 600.0) -> CoreReport:
    """Validate every cell with the release in `core_dir`, in one worker run by `python` (3.12 with torch)."""
    if not (Path(core_dir) / "megatron" / "core").is_dir():
        raise CoreCheckError(f"core check: {core_dir} holds no megatron/core: build it with tools/core-releases.sh")
    payload = "".join(json.dumps(asdict(c)) + "\n" for c in cells)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    with tempfile.TemporaryDirectory(prefix="graphsweep-core-check-") as scratch:
        try:
            proc = subprocess.run([str(python), str(Path(__file__).resolve()), "--core", str(core_dir), "--serve"],
                                  input=payload, capture_output=True, text=True, timeout=timeout, cwd=scratch, env=env)
        except FileNotFoundError as exc:
            raise CoreCheckError(f"core check: interpreter {python} not found (tools/megatron-venv.sh)") from exc
        except subprocess.TimeoutExpired as exc:
            raise CoreCheckError(f"core check: the worker ran past {timeout:.0f} s on {len(cells)} cells") from exc
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
    if not lines or not lines[0].get("ready"):
        raise CoreCheckError(f"core check: {python} could not import Megatron Core from {core_dir} "
                             f"(exit {proc.returncode}):\n{tail}")
    verdicts = [CoreVerdict(**d) for d in lines[1:]]
    if len(verdicts) != len(cells):
        raise CoreCheckError(f"core check: the worker answered {len(verdicts)} of {len(cells)} cells "
                             f"(exit {proc.returncode}):\n{tail}")
    head = lines[0]
    return CoreReport(head["version"], head["core_dir"], head["python"], head["torch"], verdicts)


if __name__ == "__main__":
    sys.exit(main())
