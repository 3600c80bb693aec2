"""Hydra override values: the grammar every Megatron Bridge entry point reads on its command line (docs/megatron-facts.md §4.1).

``parse_value`` / ``parse_override`` read ``KEY=VALUE`` as Bridge would, ``format_value`` / ``format_override`` write a
Python value back so that Bridge reads the same value.
"""

from __future__ import annotations

import re
from typing import Any, Mapping


class OverrideError(ValueError):
    """A KEY=VALUE argument that Hydra would not accept (or would read as a sweep)."""


_INT = re.compile(r"^[+-]?\d[\d_]*$")

_FLOAT = re.compile(r"^[+-]?((\d[\d_]*)?\.\d[\d_]*([eE][+-]?\d+)?|\d[\d_]*[eE][+-]?\d+|\d[\d_]*\.([eE][+-]?\d+)?|inf|nan)$", re.I)

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")

# Characters Hydra accepts in an unquoted string value (override grammar: ID / UNQUOTED_CHAR).
_UNQUOTED = re.compile(r"^[A-Za-z0-9_\-+./:@%*$?|\\]+$")


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets, braces and quotes."""
    parts, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if quote or depth:
        raise OverrideError(f"unbalanced quotes or brackets in {text!r}")
    parts.append("".join(cur))
    return parts


def parse_value(text: str) -> Any:
    """A Hydra override value as Python: null, true/false, int, float, [list], {dict}, 'quoted' or bare string."""
    s = text.strip()
    if not s:
        return ""
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1].replace("\\" + s[0], s[0])  # Hydra unescapes the quote character
    if s[0] == "[":
        if s[-1] != "]":
            raise OverrideError(f"list value {text!r} has no closing ']'")
        inner = s[1:-1].strip()
        return [parse_value(p) for p in _split_top(inner)] if inner else []
    if s[0] == "{":
        if s[-1] != "}":
            raise OverrideError(f"dict value {text!r} has no closing '}}'")
        inner = s[1:-1].strip()
        out: dict[str, Any] = {}
        for item in _split_top(inner) if inner else []:
            k, sep, v = item.partition(":")
            if not sep:
                raise OverrideError(f"dict item {item!r} in {text!r} needs key:value")
            out[k.strip()] = parse_value(v)
        return out
    low = s.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    if _INT.match(s):
        return int(s.replace("_", ""))
    if _FLOAT.match(s):
        return float(s.replace("_", ""))
    if len(_split_top(s)) > 1:
        raise OverrideError(
            f"{text!r} is a Hydra sweep (a,b), not a list; write it as [{s}] (Bridge parses overrides with Hydra)"
        )
    return s


def parse_override(arg: str) -> tuple[str, Any, bool]:
    """`key=value`, `+key=value`, `++key=value` or `~key` -> (key, value, delete)."""
    if arg.startswith("~"):
        key = arg[1:].split("=", 1)[0]
        if not _KEY.match(key):
            raise OverrideError(f"{arg!r}: '{key}' is not a config path such as model.cuda_graph_impl")
        return key, None, True
    key, sep, value = arg.partition("=")
    key = key.lstrip("+")
    if not sep:
        raise OverrideError(f"{arg!r} is not KEY=VALUE (e.g. model.cuda_graph_impl=transformer_engine)")
    if not _KEY.match(key):
        raise OverrideError(f"{arg!r}: '{key}' is not a config path such as model.cuda_graph_impl")
    return key, parse_value(value), False


def format_value(value: Any) -> str:
    """A Python value in Hydra override syntax (what goes after `key=`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{format_value(v)}" for k, v in value.items()) + "}"
    s = str(value)
    # Quote strings that Hydra would otherwise read as another type or cannot take bare.
    if _UNQUOTED.match(s) and parse_value(s) == s:
        return s
    q = '"' if "'" in s and '"' not in s else "'"
    return q + s.replace(q, "\\" + q) + q


def is_config_path(key: str) -> bool:
    """Whether a spec key is a config path a Hydra override may set (`model.seq_length`, `+logger.x` to add one):
    anything else (`--config-file`) would reach the training command as a word of its own, an option of the entry."""
    return bool(_KEY.match(key.removeprefix("++").removeprefix("+")))


def format_override(key: str, value: Any) -> str:
    return f"{key}={format_value(value)}"


def split_env(pairs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`env.NAME` keys are the job environment; everything else is a config path."""
    settings: dict[str, Any] = {}
    env: dict[str, str] = {}
    for k, v in pairs.items():
        if k.startswith("env."):
            env[k[4:]] = "" if v is None else (format_value(v) if isinstance(v, bool) else str(v))
        else:
            settings[k] = v
    return settings, env
