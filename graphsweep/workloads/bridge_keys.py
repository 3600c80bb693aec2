"""A megatron_bridge spec's config keys and recipe, checked against the catalogue of one Megatron Bridge / Core release
(package data: graphsweep/catalogues/megatron-bridge-0.6.2.json, made by tools/bridge_catalogue.py from the imported
dataclasses of Bridge 0.6.2 / Core 0.19.2), so that a typo stops the spec instead of every run:
`model.context_paralel_size: 1` -> "did you mean model.context_parallel_size?".

Checked: every key of workload.overrides, axes, fixed, include and the variants' overrides (graphsweep's own settings,
`gpus`, `est_step_s`, `compute_dtype`, and `env.*` aside; a `+key` adds a key on purpose and is left alone), and
workload.recipe for the entry and run_recipe launchers (`package.module:function` and the perf harness's
`family:recipe` are names of other catalogues: not checked). With `preflight: megatron` Bridge itself checks every
key and recipe, in the release the sweep runs (workloads/bridge_check.py); with `preflight: none`, or a
`workload.mcore_version` of another release line than the catalogue's (0.17, 0.18), nothing is checked here.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from graphsweep import resources
from graphsweep.records import SpecError

SKIPPED_KEYS = ("gpus", "est_step_s", "compute_dtype")  # graphsweep's own settings (megatron_bridge.SPECIAL_KEYS)
UNCHECKED_MODES = ("megatron", "none")  # preflight modes in which the catalogue is not consulted


@dataclass(frozen=True)
class Catalogue:
    bridge: str
    core: str
    recipes: frozenset[str]
    keys: frozenset[str]
    open: tuple[str, ...]  # a dict or Any field: any key below it is the user's

    @property
    def release(self) -> str:
        return f"Megatron Bridge {self.bridge} / Core {self.core}"

    def knows(self, key: str) -> bool:
        return key in self.keys or any(key.startswith(o + ".") for o in self.open)

    def closest(self, key: str) -> str | None:
        """The catalogue's key nearest to a misspelt one, looked for in its own section first (model., train. ...)."""
        section = key.split(".", 1)[0] + "."
        for pool in ([k for k in self.keys if k.startswith(section)], list(self.keys)):
            near = difflib.get_close_matches(key, pool, n=1, cutoff=0.6)
            if near:
                return near[0]
        return None


@functools.cache
def catalogue() -> Catalogue:
    data = json.loads(resources.read_text(resources.BRIDGE_CATALOGUE))
    versions = data["versions"]
    return Catalogue(versions["megatron-bridge"], versions["megatron-core"], frozenset(data["recipes"]),
                     frozenset(data["keys"]), tuple(data["open"]))


def _where() -> str:
    return f"graphsweep/{resources.BRIDGE_CATALOGUE}"


SPEC_ESCAPE = "a key of another release: preflight: megatron checks with that release's Bridge"


def key_problem(key: str, escape: str = SPEC_ESCAPE) -> str | None:
    """Why `key` is no config key of the catalogue's release (with the closest one), or None; `escape` says what to
    do for a key of another release."""
    cat = catalogue()
    if key.startswith(("+", "~")) or cat.knows(key):
        return None
    near = cat.closest(key)
    hint = f"did you mean {near}?" if near else "see the catalogue for the keys of each section"
    return f"not a config key of {cat.release} (ConfigContainer and its dataclasses, {_where()}); {hint} ({escape})"


def covers(mcore: str) -> bool:
    """Whether a Megatron Core version (0.19, 0.19.2, auto: the newest) is the catalogue's release line."""
    core = catalogue().core.split(".")
    return mcore == "auto" or mcore.split(".")[:2] == core[:2]


def recipe_problem(recipe: str) -> str | None:
    """Why `recipe` is no recipe function of the catalogue's release (with the closest one), or None."""
    cat = catalogue()
    if ":" in recipe or recipe in cat.recipes:
        return None
    near = difflib.get_close_matches(recipe, sorted(cat.recipes), n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}?" if near else "give a function of megatron.bridge.recipes or package.module:function"
    return (f"not a recipe of {cat.release} (megatron.bridge.recipes, {_where()}); {hint} (a recipe of another "
            "release: preflight: megatron checks with that release's Bridge)")


def spec_keys(raw: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """(where in the spec, Bridge config key, value) of every config key a megatron_bridge spec gives."""
    wl = raw["workload"]
    sections: list[tuple[str, Mapping[str, Any]]] = [("workload.overrides", wl.get("overrides") or {}),
                                                      ("axes", raw["axes"]), ("fixed", raw.get("fixed") or {})]
    sections += [(f"include.{i}", item) for i, item in enumerate(raw.get("include") or [])]
    sections += [(f"variants.{i}.overrides", v.get("overrides") or {}) for i, v in enumerate(raw["variants"])]
    return [(f"{where}.{key}", key, value) for where, mapping in sections for key, value in mapping.items()
            if key not in SKIPPED_KEYS and not key.startswith("env.")]


def _mcore(raw: Mapping[str, Any]) -> str:
    return str(raw["workload"].get("mcore_version", "0.19"))


def checks_recipe(raw: Mapping[str, Any]) -> bool:
    return raw["workload"].get("launch", "entry") in ("entry", "run_recipe")


def check_spec(raw: Mapping[str, Any], path: str | Path) -> None:
    """SpecError (file, key, value, the closest real key) for the first key or recipe the catalogue does not know."""
    if raw.get("preflight") in UNCHECKED_MODES or not covers(_mcore(raw)):
        return
    recipe = raw["workload"].get("recipe")
    if recipe and checks_recipe(raw) and (problem := recipe_problem(str(recipe))):
        raise SpecError(path, "workload.recipe", recipe, problem)
    for where, key, value in spec_keys(raw):
        if problem := key_problem(key):
            raise SpecError(path, where, value, problem)


def what_was_checked(raw: Mapping[str, Any]) -> str:
    """One line for check-spec: which keys were checked against which release, or why none was."""
    cat = catalogue()
    if raw.get("preflight") in UNCHECKED_MODES:
        how = ("Megatron Bridge checks them itself (preflight: megatron)" if raw.get("preflight") == "megatron" else
               "preflight: none")
        return f"config keys and recipe not checked against the catalogue: {how}"
    if not covers(_mcore(raw)):
        return (f"config keys and recipe not checked: workload.mcore_version {_mcore(raw)} is not the catalogue's "
                f"release ({cat.release}); preflight: megatron checks them with the release's own Bridge")
    keys = len({key for _, key, _ in spec_keys(raw)})
    recipe = raw["workload"].get("recipe")
    what = f"recipe {recipe} and " if recipe and checks_recipe(raw) and ":" not in str(recipe) else \
        "recipe not checked (launch perf_harness or package:function) and "
    return f"{what}{keys} config keys checked against {cat.release} ({_where()})"
