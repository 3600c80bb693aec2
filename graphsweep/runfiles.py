"""The files of one run directory, and turning them into iterations.parquet + summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from graphsweep import parse
from graphsweep.tables import write_table


def log_files(run_dir: Path) -> list[Path]:
    """The run's full log plus any per-rank logs (multi-process launches write ranks/<n>.log)."""
    files = [run_dir / "log.txt"]
    files += sorted((run_dir / "ranks").glob("*.log")) if (run_dir / "ranks").is_dir() else []
    return [f for f in files if f.exists()]


def parse_run_dir(run_dir: Path, iterations_out: Path, summary_out: Path) -> parse.RunSummary | dict:
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    info = json.loads((run_dir / "run.json").read_text())
    run = cfg["run"]
    if run["arm"] == "pair":
        return parse_pair_dir(run_dir, run, info, iterations_out, summary_out)
    arm = "graph" if run["arm"] == "graph" else "eager"
    parsed = parse.parse_run(log_files(run_dir), arm=arm, warmup=int(run["warmup"]), run_info=info, run_id=run["run_id"])
    write_table(parsed.iterations, iterations_out, "iterations")
    summary = parse.summary_to_dict(parsed.summary)
    tmp = summary_out.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    tmp.replace(summary_out)
    return parsed.summary


def parse_pair_dir(run_dir: Path, run: dict, info: dict, iterations_out: Path, summary_out: Path) -> dict:
    """A pair job (graphsweep/abba.py): split log.txt into segments/{label}.log, parse each segment as a run, and
    combine each arm's two segments into one measured run. summary.json holds both arms under `arms`."""
    import pandas as pd

    from graphsweep import abba
    from graphsweep.spec import pair_run_id

    segments = abba.split_segments((run_dir / "log.txt").read_text(errors="replace"))
    seg_dir = run_dir / "segments"
    seg_dir.mkdir(exist_ok=True)
    arms: list[abba.ArmOfPair] = []
    records = []
    expected = ["eager", "control" if run.get("impl") == "none" else "graph"]
    for arm in expected + [a for a in dict.fromkeys(seg.arm for seg in segments) if a not in expected]:
        parsed = []
        for seg in sorted((s for s in segments if s.arm == arm), key=lambda s: s.label):
            path = seg_dir / f"{seg.label}.log"
            path.write_text(seg.text)
            # each segment is its own training process: its own exit code and wall time, the job's other facts
            seg_info = {**info, "exit_code": seg.exit_code if seg.exit_code is not None else info.get("exit_code"),
                        "wall_s": seg.wall_s}  # fmt: skip
            p = parse.parse_run([path], arm="graph" if arm == "graph" else "eager", warmup=int(run["warmup"]),
                                run_info=seg_info, run_id=pair_run_id(run["run_id"], arm))  # fmt: skip
            parsed.append((seg, p))
            records.append(abba.segment_record(seg, parse.summary_to_dict(p.summary)))
        arms.append(abba.combine_arm(pair_run_id(run["run_id"], arm), arm, parsed))
    abba.split_cost(arms, float(info.get("wall_s") or 0.0), int(info.get("gpus") or run.get("gpus") or 1))
    frames = [a.iterations for a in arms if len(a.iterations)]
    iterations = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"run_id": pd.Series(dtype=str)})
    write_table(iterations, iterations_out, "iterations")
    by_arm = {a.arm: {**a.summary, "run_id": a.run_id, "wall_s": a.wall_s, "gpu_seconds": a.gpu_seconds} for a in arms}
    summary = {
        "pair_id": run["run_id"],
        # top level: what `graphsweep status` shows for the job
        "outcome": ", ".join(f"{a.arm} {a.summary['outcome']}" for a in arms) or "unparseable (no segment markers)",
        "order": [seg.label for seg in segments],
        "segments": records,
        "arms": by_arm,
    }
    tmp = summary_out.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    tmp.replace(summary_out)
    return summary
