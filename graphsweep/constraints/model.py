"""One constraint of Megatron's CUDA-graph support: the rule that sees it before a job, the text that proves it after.

A `Constraint` joins what preflight checks (`check`, a predicate over the graph view of a config) with what Megatron
prints when a run hits the same constraint (`needles`, literal texts searched in the log), under one id: a cell
blocked by preflight and a run that hit the assertion carry the same id. `at` says when Megatron checks it, which is
also how the log classifier ranks it (graphsweep/parse/signatures.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from graphsweep.constraints.graph import Ctx

# When Megatron checks a constraint (and so how a run that hits it is classified)
LAUNCH = "launch"  # argparse / Hydra, before any Megatron code: blocked (launch rejected)
CONFIG = "config"  # config validation and model setup (Bridge ConfigContainer.validate, MCore __post_init__, helpers)
CAPTURE = "capture"  # inside the graph capture or its first replay: blocked (capture)
NEVER = "never"  # graphsweep's own rule: nobody prints a text for it


@dataclass(frozen=True)
class Constraint:
    id: str  # stable: preflight violations and run-time signatures carry it
    summary: str  # what the constraint says, for `graphsweep check --rules`
    source: str  # where it comes from (file:line @ version), or "graphsweep"
    check: Callable[[Ctx], str | None] | None = None  # preflight: the message when it fires; None: run time only
    needles: tuple[str, ...] = ()  # exact texts Megatron prints when a run hits it (any one proves it)
    at: str = CONFIG
    requires: str | None = None  # a second text the proving line must contain (an assertion, not a log line)
    frame: str | None = None  # a function the traceback must pass through (the cause behind a generic CUDA error)
    notes: tuple[str, ...] = field(default=(), compare=False)
    # what could reach the same goal instead, for the report's Recommendations where a cell is blocked by it: a
    # sentence whose {variant} and {reach} (what it could reach, e.g. the GPU-busy ceiling) the report fills in
    advice: str = field(default="", compare=False)
