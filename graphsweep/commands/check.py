"""graphsweep check KEY=VALUE ...: would Megatron accept these CUDA-graph settings? No GPU, no Megatron import.

Keys are Megatron Bridge config paths with Hydra-style values, exactly as on a Bridge command line
(``model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=[attn,mlp]``); ``env.NAME=VALUE`` gives the
job environment (``env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``) and ``gpus=N`` the GPU count.
Exit status: 0 when no rule fires, 1 when the settings are blocked, 2 when an argument cannot be read.
"""

from __future__ import annotations

import argparse
import json
import re

from graphsweep.commands import say
from graphsweep.constraints import catalogue
from graphsweep.constraints.graph import SCOPE_API, graph_field_problem, normalise_mcore
from graphsweep.constraints.hydra import OverrideError, parse_override, split_env

NAME = "check"
HELP = "check Megatron Bridge CUDA-graph settings (KEY=VALUE, Hydra syntax) against the preflight rules"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pairs", nargs="*", metavar="KEY=VALUE", help="Bridge config paths, env.NAME=VALUE, gpus=N")
    p.add_argument("--json", action="store_true", help='print {"ok": bool, "violations": [{"rule", "message"}]}')
    p.add_argument("--gpus", type=int, default=None, help="GPUs of the run (default 1; also gpus=N)")
    p.add_argument("--mcore", default="auto", help="Megatron Core version of the container (0.17, 0.18.2, 0.19 ...): "
                   "<= 0.17 is the cuda_graph_scope API, >= 0.18 cuda_graph_modules and the full_iteration impl; "
                   "auto (default): the newest API, release-bound rules as for an unknown release")
    p.add_argument("--te-version", default=None, help="Transformer Engine version (for the delayed-wgrad rule)")
    p.add_argument("--torch-version", default=None, help="torch version of the container (torch >= 2.14 rules)")
    p.add_argument("--bridge-version", default=None,
                   help="Megatron Bridge release (rules of Bridge main, e.g. 0.7.0; unknown: those whose keys only "
                        "that release has)")
    p.add_argument("--recipe", default=None, help="Bridge recipe function (model-family rules, e.g. qwen3_vl_*)")
    p.add_argument("--rules", action="store_true", help="list every rule with its source and exit")


def _list_rules(as_json: bool) -> int:
    if as_json:
        print(json.dumps([{"rule": r.id, "summary": r.summary, "source": r.source} for r in catalogue.PREFLIGHT]))
        return 0
    for r in catalogue.PREFLIGHT:
        print(f"{r.id}\n    {r.summary}\n    source: {r.source}")
    return 0


def _gpus(flag: int | None, pair: object) -> int:
    """The GPU count from --gpus or gpus=N: a whole number of at least 1."""
    given, value = ("--gpus ", flag) if flag is not None else ("gpus=", pair)
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OverrideError(f"{given}{value!r}: the GPU count must be a whole number of at least 1")
    return value


def _version(flag: str, value: str, what: str) -> None:
    if value != "auto" and not re.fullmatch(r"\d+\.\d+[0-9A-Za-z.+-]*", value):
        raise OverrideError(f"{flag} {value!r}: not {what}")
    if value == "auto" and flag != "--mcore":
        raise OverrideError(f"{flag} {value!r}: not {what}")


def run(args: argparse.Namespace) -> int:
    if args.rules:
        return _list_rules(args.json)
    pairs: dict[str, object] = {}
    try:
        for arg in args.pairs:
            key, value, delete = parse_override(arg)
            if delete:
                pairs.pop(key, None)
            else:
                pairs[key] = value
        for key in pairs:
            if problem := graph_field_problem(key):
                raise OverrideError(f"{key}: {problem}")
        gpus = _gpus(args.gpus, pairs.pop("gpus", None))
        _version("--mcore", args.mcore, "a Megatron Core version such as 0.17, 0.18 or 0.19.2, or auto")
        if args.te_version is not None:
            _version("--te-version", args.te_version, "a Transformer Engine version such as 2.20.2")
        if args.torch_version is not None:
            _version("--torch-version", args.torch_version, "a torch version such as 2.11.0")
        if args.bridge_version is not None:
            _version("--bridge-version", args.bridge_version, "a Megatron Bridge version such as 0.6.2")
    except OverrideError as exc:
        if args.json:
            print(json.dumps({"ok": False, "error": str(exc), "violations": []}))
        else:
            say(f"graphsweep check: {exc}", err=True)
        return 2
    settings, env = split_env(pairs)
    violations = catalogue.check(settings, env, gpus=gpus, mcore=args.mcore, te_version=args.te_version,
                                 torch_version=args.torch_version, bridge_version=args.bridge_version,
                                 recipe=args.recipe)
    if args.json:
        out = {"ok": not violations, "violations": [{"rule": v.rule, "message": v.message, "source": v.source} for v in violations]}
        print(json.dumps(out))
    elif not violations:
        api = "cuda_graph_scope" if normalise_mcore(args.mcore) == SCOPE_API else "cuda_graph_modules"
        print(f"ok: no preflight rule rejects these settings ({len(catalogue.PREFLIGHT)} rules, Megatron Core "
              f"{args.mcore}: the {api} API)")
    else:
        print(f"blocked: {len(violations)} rule(s) fire")
        for v in violations:
            say(f"  {v.rule}: {v.message}\n      source: {v.source}")  # the message quotes the value given
    return 1 if violations else 0
