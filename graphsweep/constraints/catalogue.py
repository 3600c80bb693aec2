"""The constraint catalogue: every constraint graphsweep knows, and the preflight check of a run's settings."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from graphsweep.constraints import capture, field, offload, rules, runtime
from graphsweep.constraints.graph import Ctx, graph_view, mcore_release_of, normalise_mcore
from graphsweep.constraints.hydra import OverrideError, parse_value
from graphsweep.constraints.model import Constraint
from graphsweep.records import Violation

# rules.PREFLIGHT holds the predicates of rules.py, offload.py, field.py and capture.py (all register through rules.rule)
assert field.FIELD_RULES and offload.LOCAL_OFFLOAD_MODULES and capture.CAPTURE_RULES, \
    "field.py, offload.py and capture.py register their rules on import"
CONSTRAINTS: tuple[Constraint, ...] = (*rules.PREFLIGHT, *runtime.RUNTIME_ONLY)
BY_ID: dict[str, Constraint] = {c.id: c for c in CONSTRAINTS}
PREFLIGHT: tuple[Constraint, ...] = tuple(c for c in CONSTRAINTS if c.check is not None)
assert len(BY_ID) == len(CONSTRAINTS), "constraint ids must be unique"


def _hydra_or_text(value: str) -> Any:
    """A string as Bridge's command line reads it; text Hydra cannot parse (`it's a run`) is a literal: the launch
    quotes it (hydra.format_value), so the rules see it as the text it is."""
    try:
        return parse_value(value)
    except OverrideError:
        return value


def check(
    settings: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    gpus: int,
    mcore: str = "auto",
    te_version: str | None = None,
    bridge_version: str | None = None,
    mcore_release: str | None = None,
    torch_version: str | None = None,
    recipe: str | None = None,
    constraints: Iterable[Constraint] | None = None,
) -> list[Violation]:
    """Every preflight constraint that rejects these settings, in catalogue order. Strings are read as Hydra values.

    `mcore`: a Megatron Core version (0.17, 0.18.2, 0.19 ...) or auto; it picks the API generation (<= 0.17
    cuda_graph_scope, >= 0.18 cuda_graph_modules) and, unless `mcore_release` is given, is the release the
    release-bound rules compare with. `bridge_version` / `mcore_release` / `torch_version`: the exact releases when
    known; a rule of a newer release than the one given does not fire (unknown: the rule fires when the settings
    name its keys, which only that release has). `recipe`: the Bridge recipe function, for model-family rules."""
    parsed = {k: _hydra_or_text(v) if isinstance(v, str) else v for k, v in settings.items()}
    generation = normalise_mcore(mcore)
    release = mcore_release or mcore_release_of(mcore)
    ctx = Ctx(parsed, {k: str(v) for k, v in env.items()}, int(gpus), generation, te_version,
              graph_view(parsed, generation), bridge_version, release, torch_version, recipe)
    out = []
    for c in PREFLIGHT if constraints is None else constraints:
        message = c.check(ctx) if c.check is not None else None
        if message:
            out.append(Violation(rule=c.id, message=message, source=c.source))
    return out
