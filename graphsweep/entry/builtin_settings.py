"""The builtin GPT's settings and their checks: standard library only, so both the controller (spec checks in
graphsweep/workloads/builtin.py) and the trainer inside the job (graphsweep/entry/builtin_gpt.py) use these."""

from __future__ import annotations

from typing import Any, Mapping

TRAINER = "graphsweep.entry.builtin_gpt"  # python -m TRAINER ...
SCOPES = ("attn", "mlp")  # names of Megatron's cuda_graph_modules that this model has
# setting -> (type, smallest value); the trainer's flags are these names with '-' for '_'
SETTINGS: dict[str, tuple[type, float]] = {
    "hidden": (int, 1), "layers": (int, 1), "heads": (int, 1), "seq_length": (int, 1), "micro_batch": (int, 1),
    "vocab": (int, 2), "mem_fraction": (float, 0.0), "dtype": (str, 0),
}  # fmt: skip
REQUIRED = ("hidden", "layers", "heads", "seq_length", "micro_batch")
DTYPES = ("bf16", "fp32")


def setting_problem(key: str, value: Any) -> str | None:
    """Why one value of a builtin setting cannot run (the trainer checks its flags with the same function)."""
    typ, low = SETTINGS[key]
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"'{key}' must be a whole number (got {type(value).__name__} {value!r})"
        if value < low:
            return f"'{key}' must be >= {int(low)} (got {value})"
    elif typ is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) <= 1.0:
            return f"'{key}' is a fraction of the GPU's memory in (0, 1] (got {value!r})"
    elif value not in DTYPES:
        return f"'{key}' must be one of {', '.join(DTYPES)} (got {value!r})"
    return None


def shape_problem(settings: Mapping[str, Any]) -> str | None:
    """Why a whole shape cannot run although each value can: the heads must divide the hidden size."""
    hidden, heads = settings.get("hidden"), settings.get("heads")
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads:
        return f"hidden {hidden} is not divisible by heads {heads} (attention splits hidden across heads)"
    return None
