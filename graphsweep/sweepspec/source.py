"""The `source:` block of a spec: logs that already exist become the runs of the sweep (nothing is submitted).

Spec-time checks of its pattern and groups; graphsweep/run/ingest.py maps the files onto the runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import regex

from graphsweep import provenance
from graphsweep.records import SpecError
from graphsweep.vocab import EAGER

RESERVED_GROUPS = {"variant", "repeat", "part"}
# A user's pattern is matched with the `regex` module (Python's own syntax) under a time limit per file name: a
# backtracking pattern such as (a+)+$ on a long name fails in this time with a line, instead of hanging the sweep.
MATCH_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Source:
    folder: Path
    pattern: "regex.Pattern[str]"
    eager: str = EAGER
    seed: int | None = None  # the training seed of the logs that print none (loss parity compares runs of one seed)

    def fullmatch(self, name: str) -> "regex.Match[str] | None":
        """source.pattern against one relative path; TimeoutError past MATCH_TIMEOUT_S."""
        return self.pattern.fullmatch(name, timeout=MATCH_TIMEOUT_S)


def _folder(raw: Mapping[str, Any], spec_path: str | Path) -> Path:
    folder = Path(raw["source"]["logs"]).expanduser()
    if not folder.is_absolute():
        folder = Path(spec_path).resolve().parent / folder
    return folder


def group_name(axis: str) -> str:
    """The regex group of an axis: its name with every non-identifier character as '_' (train.micro_batch_size ->
    train_micro_batch_size), since Python group names must be identifiers."""
    name = re.sub(r"\W", "_", axis)
    return name if not name[:1].isdigit() else f"_{name}"


def check_source(raw: Mapping[str, Any], path: str | Path) -> None:
    """Spec-time checks of the source block (spec.validate_spec calls this): the pattern and its groups."""
    src = raw["source"]
    try:
        pattern = regex.compile(src["pattern"])
    except regex.error as exc:
        raise SpecError(path, "source.pattern", src["pattern"], f"not a valid regular expression: {exc}") from None
    groups = set(pattern.groupindex)
    if "variant" not in groups:
        raise SpecError(path, "source.pattern", src["pattern"],
                        "needs a named group (?P<variant>...) that says eager or which graph variant a file is")  # fmt: skip
    axes = raw["axes"]
    missing = [group_name(k) for k, values in axes.items() if len(values) > 1 and group_name(k) not in groups]
    if missing:
        raise SpecError(path, "source.pattern", src["pattern"],
                        f"axes with several values need a named group each: {', '.join(missing)} "
                        "(the axis name with '.' and other non-identifier characters as '_')")  # fmt: skip
    unknown = sorted(groups - RESERVED_GROUPS - {group_name(k) for k in axes} - set(provenance.COLUMNS))
    if unknown:
        raise SpecError(path, "source.pattern", src["pattern"],
                        f"unknown named group(s) {', '.join(unknown)}: use variant, repeat, part, an axis name "
                        "or a provenance column (prov_container, prov_gpu_name, ...)")  # fmt: skip
    if raw.get("pairing"):
        raise SpecError(path, "pairing", True, "ingested logs were not run as pairs: remove pairing or set it false")
    if raw.get("launch_gate"):
        raise SpecError(path, "launch_gate", True, "does not apply to ingested logs: every run ran already, so no "
                        "graph arm is left to skip; remove launch_gate or set it false")


def source_of(raw: Mapping[str, Any], spec_path: str | Path) -> Source | None:
    src = raw.get("source")
    if not src:
        return None
    return Source(_folder(raw, spec_path), regex.compile(src["pattern"]), str(src.get("eager", EAGER)), src.get("seed"))
