"""The constraint catalogue: every constraint graphsweep knows, and the preflight check of a run's settings."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from graphsweep.constraints import rules, runtime
from graphsweep.constraints.graph import Ctx, graph_view, normalise_mcore
from graphsweep.constraints.hydra import parse_value
from graphsweep.constraints.model import Constraint
from graphsweep.vocab import Violation

CONSTRAINTS: tuple[Constraint, ...] = (*rules.PREFLIGHT, *runtime.RUNTIME_ONLY)
BY_ID: dict[str, Constraint] = {c.id: c for c in CONSTRAINTS}
PREFLIGHT: tuple[Constraint, ...] = tuple(c for c in CONSTRAINTS if c.check is not None)
assert len(BY_ID) == len(CONSTRAINTS), "constraint ids must be unique"


def check(
    settings: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    gpus: int,
    mcore: str = "0.19",
    te_version: str | None = None,
    constraints: Iterable[Constraint] | None = None,
) -> list[Violation]:
    """Every preflight constraint that rejects these settings, in catalogue order. Strings are read as Hydra values."""
    parsed = {k: parse_value(v) if isinstance(v, str) else v for k, v in settings.items()}
    generation = normalise_mcore(mcore)
    ctx = Ctx(parsed, {k: str(v) for k, v in env.items()}, int(gpus), generation, te_version,
              graph_view(parsed, generation))
    out = []
    for c in PREFLIGHT if constraints is None else constraints:
        message = c.check(ctx) if c.check is not None else None
        if message:
            out.append(Violation(rule=c.id, message=message, source=c.source))
    return out
