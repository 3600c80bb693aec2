"""Which spec a results/{sweep} folder belongs to, so a second spec that reuses the sweep name cannot take it over.

The first run of a sweep writes results/{sweep}/owner.json: the spec's path and its **identity**, a hash of the
validated spec (defaults filled in) without the keys that only add runs or say where they run (`GROWTH_KEYS`:
more repeats, the executor, the description). A later spec is the same sweep when

- its identity is the owner's (the same sweep from a copied or moved spec file, with more repeats or another
  executor), or
- it is the owner's spec file itself (the owner edits its own sweep: new cells are added, finished runs stay);
  the record then takes the new identity.

Anything else (another spec file that happens to give the same `sweep:` name) is refused with `SweepOwnedError`,
before anything is planned or submitted. A folder without owner.json (made before graphsweep wrote one) is adopted
by the next spec that runs it; an owner.json that cannot be read refuses every spec (fail closed: it may be another
spec's), with the line that says how to go on.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from graphsweep.sweepspec.sweep import Spec
from graphsweep.fileio import write_json
from graphsweep.layout import SweepPaths
from graphsweep.fileio import read_json

# Spec keys whose change keeps a sweep the same sweep: they add runs or change where runs go, not what one measures.
GROWTH_KEYS = ("repeats", "description", "executor", "budget_gpu_hours", "max_runs", "decide")


class SweepOwnedError(ValueError):
    """results/{sweep} belongs to another spec. The message says which one and how to proceed."""


def spec_identity(raw: Mapping[str, Any]) -> str:
    """A short hash of what makes a sweep this sweep (the validated spec without GROWTH_KEYS)."""
    ident = {k: v for k, v in raw.items() if k not in GROWTH_KEYS}
    blob = json.dumps(ident, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def _spec_path(spec: Spec) -> str:
    return str(Path(spec.path).resolve())


def read_owner(paths: SweepPaths, spec: Spec | None = None) -> dict[str, Any] | None:
    """owner.json, None when there is none; UnusableFile when it cannot be read (it never counts as no owner)."""
    if not (paths.owner.exists() or paths.owner.is_symlink()):
        return None
    mine = f"if {spec.path} made this folder, " if spec is not None else "if the spec you run made this folder, "
    fix = (f"it says which spec owns {paths.root}: {mine}delete it (the next run records the owner again); if not, "
           f"give your spec its own `sweep:` name or results folder (--config results=DIR)")
    return read_json(paths.owner, fix, required=("spec", "identity"))


def check_owner(paths: SweepPaths, spec: Spec) -> dict[str, Any] | None:
    """Raise SweepOwnedError when results/{sweep} belongs to another spec; return the owner record (None: no owner)."""
    owner = read_owner(paths, spec)
    if owner is None:
        return None
    identity, path = spec_identity(spec.raw), _spec_path(spec)
    if owner.get("identity") == identity or owner.get("spec") == path:
        return owner
    raise SweepOwnedError(
        f"{paths.root} belongs to {owner.get('spec')} (spec identity {owner.get('identity')}), not to {spec.path} "
        f"(identity {identity}), which gives the same sweep name '{spec.name}': give {spec.path} its own `sweep:` "
        f"name or another results folder (--config results=DIR), or move {paths.root} away to hand it over"
    )


def claim(paths: SweepPaths, spec: Spec) -> None:
    """Check, then record this spec as the folder's owner (after an edit of the owner's own spec: its new identity).

    A copy with the owner's identity leaves the record as it is: the folder stays the original spec file's."""
    owner = check_owner(paths, spec)
    identity, path = spec_identity(spec.raw), _spec_path(spec)
    if owner is not None and owner.get("identity") == identity:
        return
    record = {"sweep": spec.name, "spec": path, "identity": identity, "growth_keys": list(GROWTH_KEYS),
              "claimed_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if owner is not None:
        record["previous"] = {k: owner.get(k) for k in ("spec", "identity", "claimed_utc")}
    write_json(paths.owner, record)
