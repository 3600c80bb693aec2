"""The graph view of a Megatron Bridge config: what Megatron will make of its cuda_graph_* settings.

Input is a flat mapping of Bridge config paths (``model.cuda_graph_impl``, ``train.micro_batch_size`` ...) to
values, plus the job environment and the GPU count. Keys that are not given are taken at their Megatron Core
default where the reference records one, never at a guessed recipe default.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Mapping

TE_MODULES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba")

# CudaGraphScope enum (MCore transformer/enums.py): the deprecated names are accepted in cuda_graph_scope.
KNOWN_SCOPES = set(TE_MODULES) | {"full_iteration", "full_iteration_inference", "full"}

# Every CUDA-graph field of a Bridge config (docs/megatron-facts.md §3.1, MCore 0.17-0.19, Bridge 0.6):
# a key that looks like one of them and is none of them is a misspelling, never a setting Megatron would read.
GRAPH_FIELDS = (
    "model.cuda_graph_impl", "model.cuda_graph_modules", "model.cuda_graph_scope", "model.inference_cuda_graph_scope",
    "model.cuda_graph_warmup_steps", "model.cuda_graph_use_single_mempool", "model.cuda_graph_retain_backward_graph",
    "model.enable_cuda_graph", "model.external_cuda_graph", "model.use_te_rng_tracker", "rng.te_rng_tracker",
    "model.delay_offload_until_cuda_graph", "model.moe_pad_experts_for_cuda_graph_inference",
    "optimizer.optimizer_cuda_graph", "ddp.megatron_fsdp_cuda_graph_mode",
)  # fmt: skip
_GRAPH_SECTIONS = {f.split(".")[0] for f in GRAPH_FIELDS}
# Megatron's NaN checks: a full-iteration graph runs with them off (Bridge 0.6.2 config.py L1364-1369 refuses it
# otherwise, rule full_iteration_nan_check), so its arm may differ from eager there: part of the graph switch
NAN_KEYS = ("rerun_state_machine.check_for_nan_in_loss", "ddp.check_for_nan_in_grad")


def graph_field_problem(key: str) -> str | None:
    """Why `key` is not a CUDA-graph field Megatron reads (with the closest one), or None when it is not meant as one.

    A key is meant as a graph field when its last part names a graph (`cuda_graph_implementation`, `cudagraph_impl`)
    or it is one typo away from a known field (`rng.te_rng_traker`).
    """
    if key in GRAPH_FIELDS:
        return None
    leaf = key.rsplit(".", 1)[-1].lower()
    close = difflib.get_close_matches(key, GRAPH_FIELDS, n=1, cutoff=0.6)
    near = difflib.get_close_matches(key, GRAPH_FIELDS, n=1, cutoff=0.88)
    if not near and ("graph" not in leaf or key.split(".")[0] not in _GRAPH_SECTIONS):
        return None
    hint = f"did you mean {close[0]}?" if close else f"the CUDA-graph fields are {', '.join(GRAPH_FIELDS)}"
    return f"not a CUDA-graph field of Megatron Core / Bridge (Megatron would not read it); {hint}"


UNKNOWN_IMPL = "unknown"  # cuda_graph_impl is none of this Megatron Core's implementations

# The two API generations of Megatron Core's graph switch, named by their first release. Checked in Megatron-LM's
# tags: core_v0.17.1 transformer_config.py L878 has only `cuda_graph_scope` (full iteration = local +
# [full_iteration], L1955-1962 knows transformer_engine and local); core_v0.18.0 adds `cuda_graph_modules` (L2164
# "cuda_graph_scope and cuda_graph_modules cannot be set together.") and the full_iteration impl (L2221-2239),
# MLM PR #4292; core_v0.18.2 and 0.19.2 are the same.
SCOPE_API = "0.17"  # Core <= 0.17: cuda_graph_scope
MODULES_API = "0.18"  # Core >= 0.18: cuda_graph_modules, cuda_graph_impl=full_iteration
VALID_IMPLS = {SCOPE_API: ("none", "local", "transformer_engine"),
               MODULES_API: ("none", "local", "transformer_engine", "full_iteration")}


def as_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        # a comma string is accepted by cuda_graph_modules (docs/megatron-facts.md §3.1)
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v).split(".")[-1] for v in value]  # tolerate "CudaGraphModule.attn"
    return [str(value)]


def truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def number(value: Any, default: float | None = None) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def version_tuple(v: str | None) -> tuple[int, ...]:
    nums = re.findall(r"\d+", v or "")
    return tuple(int(n) for n in nums[:3])


@dataclass(frozen=True)
class GraphView:
    """What Megatron will make of the cuda_graph_* settings."""

    impl: str  # as given (none | local | transformer_engine | full_iteration | anything invalid)
    effective: str  # none | transformer_engine | full_iteration | local (per-layer local) | unknown
    names: tuple[str, ...]  # every scope/module name given, in order
    scope_key: str | None  # which key carried the names
    mcore: str

    @property
    def modules(self) -> tuple[str, ...]:
        return tuple(n for n in self.names if n not in ("full_iteration", "full_iteration_inference", "full"))

    @property
    def graphs_on(self) -> bool:
        return self.effective not in ("none", UNKNOWN_IMPL)


def graph_view(s: Mapping[str, Any], mcore: str) -> GraphView:
    impl = s.get("model.cuda_graph_impl")
    if impl is None:
        # deprecated switches (MCore transformer_config.py L2374/L2378)
        if truthy(s.get("model.enable_cuda_graph")):
            impl = "local"
        elif truthy(s.get("model.external_cuda_graph")):
            impl = "transformer_engine"
        else:
            impl = "none"
    impl = str(impl)
    scope = as_list(s.get("model.cuda_graph_scope"))
    modules = as_list(s.get("model.cuda_graph_modules"))
    names, key = (), None
    if modules is not None:
        names, key = tuple(modules), "model.cuda_graph_modules"
    if scope is not None and (modules is None or not modules):
        names, key = tuple(scope), "model.cuda_graph_scope"
    if impl not in VALID_IMPLS[mcore]:
        effective = UNKNOWN_IMPL
    elif impl == "none":
        effective = "none"
    elif impl == "local" and "full_iteration" in names:
        effective = "full_iteration"  # Bridge 0.6 compat layer: local + [full_iteration] (utils/cuda_graph.py)
    else:
        effective = impl
    return GraphView(impl, effective, names, key, mcore)


@dataclass(frozen=True)
class Ctx:
    s: Mapping[str, Any]
    env: Mapping[str, str]
    gpus: int
    mcore: str  # API generation: SCOPE_API ("0.17", cuda_graph_scope) or MODULES_API ("0.18", cuda_graph_modules)
    te_version: str | None
    g: GraphView
    bridge_version: str | None = None  # the exact Megatron Bridge release, when the caller knows it
    mcore_release: str | None = None  # the Megatron Core release (0.18, 0.19.2 ...) when known; mcore is its API
    torch_version: str | None = None  # the container's torch, when the caller knows it
    recipe: str | None = None  # the Bridge recipe function name, when known (model-family rules read it)

    @property
    def scope_api(self) -> bool:
        """Megatron Core <= 0.17: cuda_graph_scope, no full_iteration impl."""
        return self.mcore == SCOPE_API

    def older_than(self, version: str | None, minimum: tuple[int, ...]) -> bool:
        """True when `version` is known and older than `minimum`: a rule of a newer release does not apply there."""
        return bool(version) and version_tuple(version) < minimum

    def core_before(self, minimum: tuple[int, ...]) -> bool:
        """The Megatron Core release is known (or implied by the API generation) to be older than `minimum`.

        A rule that exists only up to some release fires only when this says so; an unknown release is taken as the
        newest generation (auto)."""
        if self.mcore_release:
            return version_tuple(self.mcore_release) < minimum
        return self.scope_api and minimum > (0, 17, 99)

    def get(self, key: str, default: Any = None) -> Any:
        return self.s.get(key, default)

    def flag(self, *keys: str, default: bool = False) -> bool:
        for k in keys:
            if k in self.s:
                return truthy(self.s[k])
        return default

    def size(self, key: str, default: int = 1) -> int:
        v = number(self.s.get(key))
        return int(v) if v else default


def normalise_mcore(mcore: str | None) -> str:
    """The API generation of a Megatron Core version: SCOPE_API for <= 0.17 (cuda_graph_scope), MODULES_API for
    >= 0.18 (cuda_graph_modules, full_iteration impl); auto or unknown -> MODULES_API (the pinned 0.19.2 has it)."""
    v = version_tuple(mcore)
    if not v or mcore == "auto":
        return MODULES_API
    return SCOPE_API if v < (0, 18) else MODULES_API


def mcore_release_of(mcore: str | None) -> str | None:
    """The release a `--mcore` / `workload.mcore_version` value names (0.18, 0.19.2), or None for auto/unknown."""
    if not mcore or mcore == "auto" or not version_tuple(mcore):
        return None
    return mcore
