"""What a run trained and how much work a step did, as its log says: the training configuration and the work per step.

Two arms are compared only when they train the same thing (judge/work.py compares these records across a cell), so
every run records:

- **its training configuration**: the configuration summary Megatron Bridge prints once at start-up (every field of
  the optimizer, DDP and model configs that differs from Megatron Core's default, with that default; every field of
  the other configs that is set), or Megatron-LM's `arguments` block; then what its config.yaml gave it (the overrides
  of its command, the builtin's settings) for the keys the log does not print. Keys are Bridge's config paths
  (`model.num_layers`, `train.global_batch_size`; Megatron-LM's argument names as they are), values canonical text
  (`True`, `true` and YAML's true read the same; `1.0` and `1` too).
- **its work per step**: the global batch size printed on the iteration lines of its steady window (of every line
  when it has none), the sequence length of its configuration, and their product, tokens per step.

The log's formats are logformat.py's (CONFIG_*, MLM_ARG*, GLOBAL_BATCH, with their sources). Reading stops at the
first iteration line: both summaries are printed before training, and a log's iteration lines are the scan's
(parse/scan.py) to read. The global batch is read from the lines the scan found, by their numbers.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from graphsweep import logformat as lf
from graphsweep.layout import RunDir
from graphsweep.parse.records import RunSummary

# Where a run's configuration was read (train_config_source)
BRIDGE_SUMMARY = "Bridge configuration summary"
MLM_ARGUMENTS = "Megatron-LM arguments"
CONFIG_YAML = RunDir.CONFIG
# The sequence length of a configuration: Bridge's dataset and model paths, the builtin's setting, Megatron-LM's
# argument (first found)
SEQ_KEYS = ("dataset.seq_length", "model.seq_length", "dataset.sequence_length", "seq_length")
MAX_HEAD_LINES = 200_000  # a log's start-up before its first iteration line, read for the summary at most
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # `<Timers object at 0x7f..>`: the same object in every run


@dataclass
class TrainConfig:
    """A run's training configuration (runs.parquet `train_config`, JSON)."""

    values: dict[str, str] = field(default_factory=dict)  # key -> canonical value
    # Megatron Core's default of each key Bridge's summary listed as non-default: a run whose summary has that section
    # but not the key ran with this value
    defaults: dict[str, str] = field(default_factory=dict)
    sections: list[str] = field(default_factory=list)  # the summary's sections (a key of one left out: default/None)
    mcore_sections: list[str] = field(default_factory=list)  # ... of them those that list non-defaults only
    sources: list[str] = field(default_factory=list)  # BRIDGE_SUMMARY / MLM_ARGUMENTS, CONFIG_YAML, in that order

    def to_record(self) -> dict[str, Any] | None:
        if not self.values:
            return None
        return {"values": dict(sorted(self.values.items())), "defaults": dict(sorted(self.defaults.items())),
                "sections": self.sections, "mcore_sections": self.mcore_sections}


@dataclass
class Work:
    """What a run trained and the work of one of its steps (runs.parquet columns, docs/tables.md)."""

    config: TrainConfig
    global_batch: int | None = None  # the global batch size its iteration lines print (steady window)
    seq_length: int | None = None  # from its configuration
    tokens_per_step: int | None = None  # global_batch x seq_length


def canonical(value: Any) -> str:
    """One text per value, whichever way it was written: a Python repr of Bridge's summary, Megatron-LM's str(), a
    YAML value of config.yaml (True/true -> `true`, None/null -> `null`, 1.0/1 -> `1`, 'RMSNorm' -> `RMSNorm`)."""
    if isinstance(value, str):
        text = _ADDRESS.sub("", value.strip())
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return text
        return text if isinstance(parsed, str) and parsed == text else canonical(parsed)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(canonical(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{canonical(k)}: {canonical(v)}" for k, v in sorted(value.items(), key=str)) + "}"
    return str(value)


def _unprefixed(raw: bytes, prefix: bytes) -> bytes:
    """A line without the prefix its block's first line had (`[default0]:`, an srun label)."""
    line = raw.rstrip(b"\r\n")
    return line[len(prefix):] if prefix and line.startswith(prefix) else line


def read_summary(path: Path | str) -> TrainConfig:
    """The configuration summary of one log file (Bridge's, else Megatron-LM's arguments), the first one printed."""
    cfg = TrainConfig()
    try:
        with open(path, "rb") as f:
            _read(f, cfg)
    except OSError:
        return TrainConfig()
    return cfg


def _read(lines: Iterable[bytes], cfg: TrainConfig) -> None:
    block, prefix, section, mcore = None, b"", None, False
    for n, raw in enumerate(lines):
        if n >= MAX_HEAD_LINES or (block is None and lf.ITER_NEEDLE in raw):
            return  # both summaries come before training
        if block is None:
            if lf.CONFIG_SUMMARY in raw:
                block, prefix = BRIDGE_SUMMARY, raw[: raw.index(lf.CONFIG_SUMMARY)].rstrip(b"=")
            elif lf.MLM_ARGS_START in raw:
                block, prefix = MLM_ARGUMENTS, raw[: raw.index(lf.MLM_ARGS_START)]
            continue
        line = _unprefixed(raw, prefix)
        if block == MLM_ARGUMENTS:
            if lf.MLM_ARGS_END in line:
                break
            if m := lf.MLM_ARG.match(line):
                cfg.values[m[1].decode()] = canonical(m[2].decode("utf-8", "replace"))
            continue
        if lf.ITER_NEEDLE in line:
            break  # a summary cut short: what it said so far stands
        if m := lf.CONFIG_MCORE_SECTION.search(line):
            section, mcore = m[1].decode(), True
            cfg.sections.append(section)
            cfg.mcore_sections.append(section)
        elif lf.CONFIG_OTHER in line:
            section = None
        elif (m := lf.CONFIG_SECTION.search(line)) and not line.startswith(b"  "):
            section, mcore = m[1].decode(), False
            cfg.sections.append(section)
        elif section and (m := lf.CONFIG_FIELD.match(line)):
            key = f"{section}.{m[1].decode()}"
            cfg.values[key] = canonical(m[2].decode("utf-8", "replace"))
            if mcore and m[3] is not None:
                cfg.defaults[key] = canonical(m[3].decode("utf-8", "replace"))
        elif line.strip() == lf.CONFIG_RULE and cfg.sections:
            break  # the closing rule
    if cfg.values:
        cfg.sources.append(block or "")


def given_config(run_config: Mapping[str, Any]) -> dict[str, str]:
    """What a run's config.yaml gave it: its settings (the builtin's, a spec's axes and fixed values) and the overrides
    of its command (Megatron Bridge paths), canonical."""
    run, launch = run_config.get("run") or {}, run_config.get("launch") or {}
    given = {**(run.get("settings") or {}), **(launch.get("overrides") or {})}
    return {str(k): canonical(v) for k, v in given.items()}


def _global_batch(iterations: pd.DataFrame, first: int | None, last: int | None) -> int | None:
    """The global batch size the iteration lines print, over the steady window (every line without one): the value
    most lines print."""
    if not len(iterations) or "source_file" not in iterations.columns:
        return None
    rows = iterations
    if first is not None and last is not None:
        window = iterations[(iterations.iteration >= first) & (iterations.iteration <= last)]
        rows = window if len(window) else iterations
    found: Counter[int] = Counter()
    for path, group in rows.groupby("source_file", sort=False):
        for raw in _lines(str(path), sorted(int(x) for x in group["line"])):
            if m := lf.GLOBAL_BATCH.search(raw):
                found[int(m[1])] += 1
    return max(found, key=lambda b: (found[b], b)) if found else None


def _lines(path: str, wanted: Sequence[int]) -> Iterable[bytes]:
    """The lines of a file with these 1-based numbers (sorted), in one pass that stops at the last."""
    if not wanted:
        return
    want = iter(wanted)
    nxt = next(want)
    try:
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                if n == nxt:
                    yield raw
                    nxt = next(want, None)
                    if nxt is None:
                        return
    except OSError:
        return


def _seq_length(values: Mapping[str, str]) -> int | None:
    for key in SEQ_KEYS:
        try:
            return int(float(values[key]))
        except (KeyError, ValueError):
            continue
    return None


def of_run(paths: Sequence[Path | str], iterations: pd.DataFrame, steady_first: int | None,
           steady_last: int | None, given: Mapping[str, str] | None = None) -> Work:
    """A run's configuration (its log's summary, the first file that has one, then `given` for the keys it does not
    print) and its work per step."""
    cfg = TrainConfig()
    for p in paths:
        cfg = read_summary(p)
        if cfg.values:
            break
    extra = {k: v for k, v in (given or {}).items() if k not in cfg.values}
    if extra:
        cfg.values.update(extra)
        cfg.sources.append(CONFIG_YAML)
    batch = _global_batch(iterations, steady_first, steady_last)
    seq = _seq_length(cfg.values)
    return Work(cfg, batch, seq, batch * seq if batch is not None and seq is not None else None)


def record(summary: RunSummary, w: Work) -> None:
    """The run's summary (summary.json, runs.parquet) gets its work."""
    summary.train_config = w.config.to_record()
    summary.train_config_source = " + ".join(w.config.sources) or None
    summary.global_batch, summary.seq_length, summary.tokens_per_step = w.global_batch, w.seq_length, w.tokens_per_step
