"""graphsweep parse [--warmup N] [--arm eager|graph] [--json] LOG...: classify your own Megatron logs.

All LOG files are one run (per-rank files, all-ranks log, restarts in order) merged by iteration.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.table import Table
from rich.text import Text

from graphsweep.commands import console, fail, output_file_problem, plain
from graphsweep.records import GateDecision, RunSummary
from graphsweep.parse.run import parse_run
from graphsweep.store.tables import write_table
from graphsweep.textsafe import for_terminal
from graphsweep.vocab import BLOCKED, COMPLETED, CRASHED, EAGER, GRAPH, INVALID, OOM, TIMEOUT, UNCAPTURED, UNPARSEABLE

NAME = "parse"
HELP = "parse Megatron Bridge / Megatron-LM logs of one run: outcome, phase, proving line, steady step time"



def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("logs", nargs="+", metavar="LOG", help="log files of ONE run, in chronological order")
    p.add_argument("--warmup", type=int, default=None,
                   help="cuda_graph_warmup_steps (capture on iteration warmup+1); the steady window starts at "
                        "warmup+2 for both arms. Default: from the capture markers, else iteration 2")
    p.add_argument("--arm", choices=(EAGER, GRAPH), default=None,
                   help="what the run was meant to be (default: graph when the log shows a capture, else eager); "
                        "a graph arm without capture and replay evidence is 'invalid'")
    p.add_argument("--run-info", type=Path, default=None, metavar="RUN_JSON",
                   help="run.json of the job (Slurm state, exit code) to join with the log")
    p.add_argument("--min-steady", type=int, default=5, help="fewest steady iterations for a usable window")
    p.add_argument("--iterations", type=Path, default=None, metavar="PARQUET", help="also write the iteration rows")
    p.add_argument("--json", action="store_true", help="print one JSON object (the full summary)")


def _run_info(path: Path) -> dict:
    """run.json as a dict, or ValueError with one line saying why it cannot be read."""
    try:
        info = json.loads(path.read_bytes().decode("utf-8"))
    except IsADirectoryError:
        raise ValueError(f"--run-info {path}: a folder, not a run.json file") from None
    except OSError as exc:
        raise ValueError(f"--run-info {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"--run-info {path}: not a text file (run.json is JSON)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--run-info {path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(info, dict):
        raise ValueError(f"--run-info {path}: a JSON {type(info).__name__}, not the object a run.json holds")
    return info


def _gate(info: dict | None, path: Path) -> GateDecision | None:
    """run.json's launch-gate record as the record it is, or ValueError naming the field."""
    if not info or info.get("gate") is None:
        return None
    try:
        return GateDecision.from_dict(info["gate"])
    except ValueError as exc:
        raise ValueError(f"--run-info {path}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    missing = [p for p in args.logs if not Path(p).exists()]
    if missing:
        return fail(NAME, f"no such file: {', '.join(missing)}")
    folders = [p for p in args.logs if Path(p).is_dir()]
    if folders:
        return fail(NAME, f"{', '.join(folders)}: a folder; give the log files of one run")
    if args.warmup is not None and args.warmup < 0:
        return fail(NAME, f"--warmup {args.warmup}: cuda_graph_warmup_steps is 0 or more")
    if args.min_steady < 1:
        return fail(NAME, f"--min-steady {args.min_steady}: give at least 1 steady iteration")
    if args.iterations and (problem := output_file_problem(args.iterations)):
        return fail(NAME, f"--iterations: {problem}")
    try:
        info = _run_info(args.run_info) if args.run_info else None
        gate = _gate(info, args.run_info)
    except ValueError as exc:
        return fail(NAME, str(exc))
    arm = args.arm
    if arm is None:  # guess from the log: a capture line means the graph arm
        probe = parse_run(args.logs, arm=EAGER, warmup=args.warmup, run_info=info, min_steady=args.min_steady,
                          gate=gate)
        arm = GRAPH if probe.summary.capture_seen or probe.summary.capture_iteration else EAGER
    parsed = parse_run(args.logs, arm=arm, warmup=args.warmup, run_info=info, run_id=Path(args.logs[0]).stem,
                       min_steady=args.min_steady, gate=gate)
    s = parsed.summary
    if args.iterations:
        try:
            if not Path(args.iterations).parent.is_dir():  # an output file, not a folder to make
                raise FileNotFoundError(f"no folder {Path(args.iterations).parent}")
            write_table(parsed.iterations, args.iterations, "iterations")
        except OSError as exc:
            return fail(NAME, f"--iterations {args.iterations}: cannot write it: {exc}")
    if args.json:
        print(json.dumps(s.to_dict(), default=str))
        return 0
    _table(s)
    return 0


def _num(v: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if v is None else fmt.format(v)


def _rows(s: RunSummary) -> list[tuple[str, str]]:
    rows = [("outcome", s.outcome + (f" ({s.error_class})" if s.error_class else "")
             + (f", phase {s.phase}" if s.phase else "")),
            ("reason", s.reason)]
    if s.signature:
        rows.append(("proving line", f"{s.signature_file}:{s.signature_line}\n{s.signature}"))
    rows += [
        ("arm", s.arm + (f", warmup {s.warmup}" if s.warmup is not None else "")),
        ("iterations", f"{s.n_iterations}" + (f" (last {s.last_iteration} of {s.train_iters})"
                                              if s.last_iteration else "")),
        ("steady window", s.steady_reason or "–"),
        ("step ms", f"median {_num(s.step_ms_median)}  mean {_num(s.step_ms_mean)}  "
                    f"p10 {_num(s.step_ms_p10)}  p90 {_num(s.step_ms_p90)}"),
        ("peak memory", f"{_num(s.peak_mem_gb, '{:.3f} GB')} (before capture "
                        f"{_num(s.peak_mem_before_capture_gb, '{:.3f} GB')})"),
        ("capture", f"seen {s.capture_seen}, replay {s.replay_seen}"
                    + (f", {s.capture_s:.3f} s" if s.capture_s is not None else "")
                    + (f", {s.graphable_layers} graphable layers" if s.graphable_layers is not None else "")
                    + (f", {s.graphs_captured} graphs held" if s.graphs_captured is not None else "")),
    ]
    if s.transient:
        rows.append(("transient", s.transient))
    rows += [("note", n) for n in s.notes]
    return rows


def _table(s: RunSummary) -> None:
    """A coloured table on a terminal; plain `key  value` lines when piped, so no path or message is folded."""
    rows = _rows(s)
    if not sys.stdout.isatty():
        for key, value in rows:
            lines = for_terminal(value).split("\n")  # a log line's escape sequences spelled out, never sent raw
            print(f"{key:<14} {lines[0]}")
            for more in lines[1:]:
                print(f"{'':<14} {more}")
        return

    colour = {COMPLETED: "green", BLOCKED: "yellow", OOM: "red", CRASHED: "red", TIMEOUT: "magenta",
              INVALID: "red", UNCAPTURED: "red", UNPARSEABLE: "red"}.get(s.outcome, "cyan")
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    for key, value in rows:
        t.add_row(key, Text(value, style=colour) if key == "outcome" else plain(value))  # log text is never markup
    console().print(t)
