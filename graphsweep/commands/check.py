"""graphsweep check KEY=VALUE ...: would Megatron accept these CUDA-graph settings? No GPU, no Megatron import.

Keys are Megatron Bridge config paths with Hydra-style values, exactly as on a Bridge command line
(``model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=[attn,mlp]``); ``env.NAME=VALUE`` gives the
job environment (``env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``) and ``gpus=N`` the GPU count.
Exit status: 0 when no rule fires, 1 when the settings are blocked, 2 when an argument cannot be read.

The settings are checked as typed (a command typed by hand) and as a sweep runs them: a sweep adds the TE RNG
tracker to every graph arm and turns the NaN checks off for a full-iteration graph (workloads/megatron_bridge.py
sweep_additions). A rule that only the typed command breaks says so, and what to add by hand; the exit status is
the typed command's.
"""

from __future__ import annotations

import argparse
import json
import re

from graphsweep.commands import say
from graphsweep.constraints import catalogue
from graphsweep.constraints.graph import SCOPE_API, graph_field_problem, graph_view, normalise_mcore
from graphsweep.constraints.hydra import OverrideError, format_override, parse_override, parse_value, split_env
from graphsweep.records import Violation
from graphsweep.workloads import bridge_keys
from graphsweep.workloads.megatron_bridge import NAN_CHECKS_OFF, RNG_TRACKER_ON, sweep_additions

NAME = "check"
ESCAPE = "a key of another release: give its --mcore; keys are checked for --mcore auto and the catalogue's Core"
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
        if bridge_keys.covers(args.mcore):  # a typo is no setting Megatron would read: the closest key instead
            for key in pairs:
                if not key.startswith("env.") and (problem := bridge_keys.key_problem(key, ESCAPE)):
                    raise OverrideError(f"{key}: {problem}")
            if args.recipe and (problem := bridge_keys.recipe_problem(args.recipe)):
                raise OverrideError(f"--recipe {args.recipe}: {problem}")
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
    versions = dict(gpus=gpus, mcore=args.mcore, te_version=args.te_version, torch_version=args.torch_version,
                    bridge_version=args.bridge_version, recipe=args.recipe)
    violations = catalogue.check(settings, env, **versions)
    adds = _sweep_adds(settings, args.mcore)
    in_sweep = catalogue.check({**settings, **adds}, env, **versions) if adds and violations else violations
    added = " ".join(format_override(k, v) for k, v in adds.items())
    if args.json:
        out = {"ok": not violations, "violations": [_record(v) for v in violations],
               "sweep_adds": [format_override(k, v) for k, v in adds.items()], "ok_in_sweep": not in_sweep,
               "sweep_violations": [_record(v) for v in in_sweep]}
        print(json.dumps(out))
    elif not violations:
        api = "cuda_graph_scope" if normalise_mcore(args.mcore) == SCOPE_API else "cuda_graph_modules"
        print(f"ok: no preflight rule rejects these settings ({len(catalogue.PREFLIGHT)} rules, Megatron Core "
              f"{args.mcore}: the {api} API)")
    else:
        still = {v.rule for v in in_sweep}
        head = f"blocked: {len(violations)} rule(s) fire"
        if len(still) < len(violations):
            left = f"{len(still)} ({', '.join(sorted(still))})" if still else "none"
            head += f" as typed; in a sweep {left}: a sweep adds {added} itself"
        print(head)
        meets = _what_meets(settings, env, adds, versions, [v.rule for v in violations if v.rule not in still])
        for v in violations:
            say(f"  {v.rule}: {v.message}\n      source: {v.source}")  # the message quotes the value given
            if v.rule not in still:
                say(f"      met in a sweep, which adds {meets[v.rule]}; typing the command by hand, add the same")
    return 1 if violations else 0


def _what_meets(settings: dict[str, object], env: dict[str, str], adds: dict[str, object], versions: dict[str, object],
                rules: list[str]) -> dict[str, str]:
    """Per rule that a sweep's additions meet, the group of them that does (the RNG tracker, the NaN checks off)."""
    out: dict[str, str] = {}
    for group in (RNG_TRACKER_ON, NAN_CHECKS_OFF, adds):
        part = {k: v for k, v in adds.items() if k in group}
        fired = {v.rule for v in catalogue.check({**settings, **part}, env, **versions)} if part else set(rules)
        for rule in rules:
            if rule not in fired:
                out.setdefault(rule, " ".join(format_override(k, v) for k, v in part.items()))
    return out


def _sweep_adds(settings: dict[str, object], mcore: str) -> dict[str, object]:
    """What a sweep would add to these settings as a graph arm (nothing when they switch no graph on)."""
    parsed = {k: parse_value(v) if isinstance(v, str) else v for k, v in settings.items()}
    view = graph_view(parsed, normalise_mcore(mcore))
    return sweep_additions(settings, view.graphs_on, view.effective == "full_iteration")


def _record(v: Violation) -> dict[str, str]:
    return {"rule": v.rule, "message": v.message, "source": v.source}
