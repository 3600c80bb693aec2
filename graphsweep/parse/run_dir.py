"""A run's folder into its parsed tables: iterations.parquet and summary.json (the parse rule).

The folder is a RunDir (graphsweep/layout.py) built from the rule's declared files; config.yaml and run.json are
validated as they are read (UnusableFile: the file, what is wrong, how to go on), and both outputs are written
whole (a temp file renamed) only once the run has been parsed.

A pair job's folder (graphsweep/parse/pairs.py) gives both measured arms: its log is split into
segments/{label}.log, each segment parsed as a run, and each arm's two segments combined into one measured run.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from graphsweep.parse.pairs import ArmOfPair, combine_arm, segment_record, split_cost
from graphsweep.parse.segments import split_segments
from graphsweep.records import RunSummary
from graphsweep.parse.evidence import provenance_lines
from graphsweep.parse.run import parse_run
from graphsweep.parse.work import given_config
from graphsweep.store.tables import write_table
from graphsweep.fileio import write_json
from graphsweep.store.runfiles import read_run_config, read_run_info
from graphsweep.layout import RunDir
from graphsweep.fileio import UnusableFile
from graphsweep.records import GateDecision
from graphsweep.smk import run_dir
from graphsweep.vocab import CONTROL, EAGER, GRAPH, INGEST, PAIR, pair_run_id


def parse_rule(input: Any, output: Any) -> RunSummary | dict:
    """The parse rule's job (rules/parse.smk): the run folder of exactly its declared files (Snakemake's input and
    output lists; RunDir.of refuses any other), parsed. The rule's script calls it, and so does the graphsweep
    executor, in the controller (run/executor.py)."""
    return parse_run_dir(run_dir(input.config, input.run, input.log, *input.ranks, output.iterations, output.summary))


def parse_run_dir(run: RunDir) -> RunSummary | dict:
    cfg = read_run_config(run, parse=True)
    rec = cfg["run"]
    info = read_run_info(run)
    gate = None
    if info.get("gate") is not None:  # the launch gate's decision (run/gate.py): the classifier takes it typed
        try:
            gate = GateDecision.from_dict(info["gate"])
        except ValueError as exc:
            raise UnusableFile(run.run_json, str(exc), run.fix_for(run.run_json)) from None
    if rec["arm"] == PAIR:
        return parse_pair_dir(run, rec, info)
    arm = GRAPH if rec["arm"] == GRAPH else EAGER
    # what config.yaml gave the run, for the keys its log does not print (an ingested run's is the plan's, not its own)
    given = None if info.get("executor") == INGEST else given_config(cfg)
    parsed = parse_run(run.logs(), arm=arm, warmup=int(rec["warmup"]), run_info=info, run_id=rec["run_id"],
                       given=given, gate=gate)
    if parsed.summary.seed is None and info.get("seed") is not None:  # an ingest spec's source.seed
        parsed.summary.seed = int(info["seed"])
    write_table(parsed.iterations, run.iterations, "iterations")
    write_json(run.summary, parsed.summary.to_dict())
    return parsed.summary


def parse_pair_dir(run_dir: RunDir, run: dict, info: dict) -> dict:
    """A pair job (graphsweep/entry/abba.py): split log.txt into segments/{label}.log, parse each segment as a run, and
    combine each arm's two segments into one measured run. summary.json holds both arms under `arms`."""
    segments = split_segments(run_dir.log.read_text(errors="replace"))
    seg_dir = run_dir.segments
    seg_dir.mkdir(exist_ok=True)
    arms: list[ArmOfPair] = []
    records = []
    lines: list[dict] = []  # the segments' provenance lines: the job's
    expected = [EAGER, CONTROL if run.get("impl") == "none" else GRAPH]
    for arm in expected + [a for a in dict.fromkeys(seg.arm for seg in segments) if a not in expected]:
        parsed = []
        for seg in sorted((s for s in segments if s.arm == arm), key=lambda s: s.label):
            path = seg_dir / f"{seg.label}.log"
            path.write_text(seg.text)
            # each segment is its own training process: its own exit code and wall time, the job's other facts
            seg_info = {**info, "exit_code": seg.exit_code if seg.exit_code is not None else info.get("exit_code"),
                        "wall_s": seg.wall_s}  # fmt: skip
            p = parse_run([path], arm=GRAPH if arm == GRAPH else EAGER, warmup=int(run["warmup"]),
                                run_info=seg_info, run_id=pair_run_id(run["run_id"], arm))  # fmt: skip
            parsed.append((seg, p))
            lines += p.summary.provenance_lines
            records.append(segment_record(seg, p.summary.to_dict()))
        arms.append(combine_arm(pair_run_id(run["run_id"], arm), arm, parsed))
    split_cost(arms, float(info.get("wall_s") or 0.0), int(info.get("gpus") or run.get("gpus") or 1))
    frames = [a.iterations for a in arms if len(a.iterations)]
    iterations = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"run_id": pd.Series(dtype=str)})
    write_table(iterations, run_dir.iterations, "iterations")
    by_arm = {a.arm: {**a.summary, "run_id": a.run_id, "wall_s": a.wall_s, "gpu_seconds": a.gpu_seconds} for a in arms}
    summary = {
        "pair_id": run["run_id"],
        # top level: what `graphsweep status` shows for the job
        "outcome": ", ".join(f"{a.arm} {a.summary['outcome']}" for a in arms) or "unparseable (no segment markers)",
        "order": [seg.label for seg in segments],
        "segments": records,
        "arms": by_arm,
        "provenance_lines": provenance_lines(lines),
    }
    write_json(run_dir.summary, summary)
    return summary
