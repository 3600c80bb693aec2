"""What user text may be where graphsweep puts it, and what a number must be.

Spec and profile values land in batch scripts (submitit writes each Slurm setting as one `#SBATCH --key='value'`
line: quoted, but a newline inside the quotes still ends the comment and starts a shell line), in command lines that
are printed to be pasted, and on the terminal (a log line's escape sequence would repaint it). So a value is one line
of printable text, an environment variable's name is a shell name, and text from a log is shown with its control
characters spelled out. Numbers: YAML's `.nan` and `.inf` pass every JSON-schema bound (any comparison with NaN is
false), so finiteness is checked here, once, for every number of a spec or a profile.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterator

# C0 controls (newline, carriage return, tab, escape, ...), DEL and the C1 controls (U+009B is a one-byte CSI to
# some terminals)
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# The names a POSIX shell assigns (`NAME=value cmd`); anything else in front of a command is run as a word
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An sbatch option's name (`mail-type`, `reservation`): submitit writes it unquoted after `#SBATCH --`
SBATCH_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x1b": "an escape (ESC)", "\x00": "a NUL"}

# The sbatch options that decide what a job is rather than where it runs, and who decides them. Nobody sets them (a
# spec or the profile, in `sbatch:` or `slurm_additional_parameters:`): graphsweep does, per run.
_SIZE = "the job's size comes from each run's launch plan (gpus, executor.gpus_per_node)"
_TIME = "the time limit is executor.timeout_min x attempt"
_FILES = "Slurm's files and folder are submitit's, inside the results folder"
_OWN = "submitit's job name, signal, environment and submission are its own"
PLAN_SBATCH_OPTIONS: dict[str, str] = {
    **dict.fromkeys(("nodes", "ntasks", "ntasks-per-node", "ntasks-per-gpu", "ntasks-per-socket", "ntasks-per-core",
                     "gpus", "gpus-per-node", "gpus-per-task", "gpus-per-socket"), _SIZE),
    **dict.fromkeys(("time", "time-min"), _TIME),
    **dict.fromkeys(("output", "error", "input", "chdir", "open-mode"), _FILES),
    **dict.fromkeys(("job-name", "array", "wrap", "export", "export-file", "get-user-env", "signal", "parsable", "wait",
                     "test-only", "uid", "gid", "dependency", "hold", "batch"), _OWN),
}  # fmt: skip
# What a sweep spec may add as `#SBATCH` lines: where its jobs run and who is told (sbatch(1) spells them so). The
# profile, which belongs to the cluster's user, may add any other option but PLAN_SBATCH_OPTIONS.
SPEC_SBATCH_OPTIONS = frozenset({
    "partition", "account", "qos", "reservation", "constraint", "prefer", "cluster-constraint", "exclude", "nodelist",
    "switches", "network", "licenses", "wckey", "comment", "mail-type", "mail-user", "nice", "hint", "gpu-bind",
    "gres-flags", "mem", "mem-per-cpu", "mem-per-gpu", "cpus-per-task", "cpus-per-gpu", "exclusive",
    "threads-per-core", "core-spec", "tmp", "profile", "acctg-freq",
})  # fmt: skip


def sbatch_option_problem(key: str, spec: bool) -> str | None:
    """Why an extra `#SBATCH --key` line may not be set (by a sweep spec when `spec`, else by the profile), or None.

    submitit writes the key with '_' as '-' (`mail_type` is `--mail-type`); sbatch reads an option from any
    unambiguous start of its name (`--outp` is `--output`), so a spec gets exactly the names SPEC_SBATCH_OPTIONS
    spells and the profile none that begins a PLAN_SBATCH_OPTIONS name."""
    option = str(key).replace("_", "-")
    starts = [o for o in PLAN_SBATCH_OPTIONS if o.startswith(option)]
    owned = option if option in PLAN_SBATCH_OPTIONS else next(iter(starts), None)
    if owned:
        named = "" if owned == option else f" (it begins --{owned}: sbatch takes the start of a name for the option)"
        return f"is an sbatch option graphsweep sets for every run{named}: {PLAN_SBATCH_OPTIONS[owned]}; remove it"
    if spec and option not in SPEC_SBATCH_OPTIONS:
        return ("is not an sbatch option a sweep spec may set: a spec says where its jobs run, not what they are "
                f"(the Slurm profile may set it); a spec may set {', '.join(sorted(SPEC_SBATCH_OPTIONS))}")
    return None


def char_name(ch: str) -> str:
    """'a newline (U+000A)', 'a control character (U+0007)'."""
    return f"{_NAMES.get(ch, 'a control character')} (U+{ord(ch):04X})"


def _walk(data: Any, key: str = "") -> Iterator[tuple[str, Any, bool]]:
    """(dotted key, item, is it a mapping key?) for every key and leaf of nested mappings and lists."""
    if isinstance(data, dict):
        for k, v in data.items():
            where = f"{key}.{k}" if key else str(k)
            yield where, k, True
            yield from _walk(v, where)
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            yield from _walk(v, f"{key}.{i}" if key else str(i))
    else:
        yield key, data, False


def control_character(data: Any, key: str = "", allow: str = "\t") -> tuple[str, str, str] | None:
    """The first text (a key or a value, at any depth) holding a control character not in `allow` (a tab is text:
    it ends no line and moves no cursor): (its dotted key, the text, what the character is), or None."""
    for where, item, _ in _walk(data, key):
        if isinstance(item, str):
            for m in CONTROL.finditer(item):
                if m.group() not in allow:
                    return spelled(where) or "(top level)", item, char_name(m.group())
    return None


def spelled(text: str) -> str:
    """Text with every control character written as Python writes it in a string (`\\n`, `\\x1b`): one line."""
    return CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def not_finite(data: Any, key: str = "") -> tuple[str, float] | None:
    """The first number (at any depth) that is NaN or infinite: (its dotted key, the number), or None."""
    for where, item, _ in _walk(data, key):
        if isinstance(item, float) and not math.isfinite(item):
            return where or "(top level)", item
    return None


def one_line_problem(what: str) -> str:
    """The sentence for a control character in a value that reaches a batch script or a command line."""
    return (f"contains {what}: every value reaches a Slurm batch script or a command line as one line of text, "
            "where a line break would start a shell command; write it on one line, without control characters")


NOT_FINITE = "is not a finite number (YAML .nan / .inf): every number here is a real bound or size; give one"


def for_terminal(text: str) -> str:
    """Text from a log or a spec as the terminal should show it: control characters spelled out as `\\x1b` (an escape
    sequence would recolour, move or retitle the terminal), newlines and tabs kept."""
    return CONTROL.sub(lambda m: m.group() if m.group() in "\n\t" else f"\\x{ord(m.group()):02x}", text)
