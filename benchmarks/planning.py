"""What the workflow costs Snakemake beyond its job count: graphsweep's Snakefile against a trivial Snakefile with
the same number of jobs, for a dry run and for a real local run.

    .venv/bin/python benchmarks/planning.py --dry-runs 2000 --real-runs 6
    .venv/bin/python benchmarks/planning.py --code /tmp/graphsweep-before ...   # another tree (git archive REV)

Dry run: `snakemake -n` (its job listing printed, as a user sees it) on a builtin sweep of N runs planned for Slurm
(nothing blocked, nothing started). It also times graphsweep's rules with stub bodies (SHAPED: the same directives,
the decision loop's checkpoint included, nothing of graphsweep's code behind them): the ratio to the trivial
Snakefile that Snakemake's own work for those directives costs, and what graphsweep's code adds over it.
Real run: `snakemake --cores 2` on a builtin sweep of N eager baselines (one tiny shape per run, its graph arm
blocked on a machine without CUDA: no job) on the local executor, in a fresh folder. The trivial Snakefile has the
same jobs per run (one `touch` job each) and the same fixed jobs, counted from graphsweep's own dry run, so the ratio
is what graphsweep's rules, input functions and scripts cost over Snakemake's floor for that DAG.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

TRIVIAL = """\
N = {runs}
PER_RUN = {per_run}
FIXED = {fixed}


rule all:
    input:
        expand("out/fixed{{i}}", i=range(FIXED)),


rule fixed:
    input:
        expand("out/step{{k}}/{{r}}", k=PER_RUN - 1, r=range(N)) if PER_RUN else [],
    output:
        "out/fixed{{i}}",
    shell:
        "touch {{output}}"


rule step:
    input:
        lambda w: [f"out/step{{int(w.k) - 1}}/{{w.r}}"] if int(w.k) else [],
    output:
        "out/step{{k}}/{{r}}",
    shell:
        "touch {{output}}"
"""


# graphsweep's rules as Snakemake sees them, with nothing of graphsweep's behind them: the same directives per rule
# (input functions, four outputs of the run rule one a directory, update() outputs, logs, a params dict, three
# resource functions, `script:` rules, a checkpoint the final target reads), stub bodies. What this costs over the
# trivial Snakefile is Snakemake's own work for those features; what graphsweep costs over it is graphsweep's code.
SHAPED = """\
N = {runs}

wildcard_constraints:
    r=r"\d+",


def no_inputs(wildcards):
    return []


def launch_record(wildcards):
    return {{"run": {{"run_id": wildcards.r}}, "launch": {{"argv": ["python", "-c", "pass"], "env": {{}}}}}}


def jobs_dir(wildcards):
    return f"out/.jobs/{{wildcards.r}}"


def attempt(wildcards, attempt):
    return attempt


def timeout(wildcards, attempt):
    return 10 * attempt


def gpus(wildcards):
    return 1


def ranks(wildcards):
    return [f"out/runs/{{wildcards.r}}/ranks"]


def final_outputs(wildcards):
    look = checkpoints.look.get().output[0]  # the decision loop's last look (here: one)
    return [look, *expand("out/runs/{{r}}/summary.json", r=range(N))]


rule all:
    input:
        final_outputs,


rule plan:
    input:
        spec="Snakefile",
    output:
        update("out/plan.parquet"),
    log:
        "out/logs/plan.log",
    localrule: True
    params:
        digest="d",
    shell:
        "touch {{output}}"


rule run:
    input:
        gate=no_inputs,
    output:
        config="out/runs/{{r}}/config.yaml",
        run="out/runs/{{r}}/run.json",
        log="out/runs/{{r}}/log.txt",
        ranks=directory("out/runs/{{r}}/ranks"),
    log:
        "out/logs/run/{{r}}.log",
    resources:
        attempt=attempt,
        timeout_min=timeout,
        gpus=gpus,
    params:
        config=launch_record,
        jobs_dir=jobs_dir,
    script:
        "stub.py"


rule parse:
    input:
        run="out/runs/{{r}}/run.json",
        log="out/runs/{{r}}/log.txt",
        ranks=ranks,
        config="out/runs/{{r}}/config.yaml",
    output:
        iterations=update("out/runs/{{r}}/iterations.parquet"),
        summary=update("out/runs/{{r}}/summary.json"),
    log:
        "out/logs/parse/{{r}}.log",
    script:
        "stub.py"


checkpoint look:
    input:
        plan="out/plan.parquet",
        summaries=expand("out/runs/{{r}}/summary.json", r=range(N)),
    output:
        "out/looks/look-1.json",
    localrule: True
    shell:
        "touch {{output}}"
"""


def spec(runs: int, cluster: str) -> dict:
    """A builtin sweep of `runs` runs: runs/2 shapes x (eager + one graph variant)."""
    return {"sweep": "planning", "workload": {"kind": "builtin"},
            "axes": {"micro_batch": list(range(1, runs // 2 + 1))},
            "fixed": {"hidden": 32, "layers": 1, "heads": 2, "seq_length": 16, "vocab": 64},
            "variants": [{"impl": "full_iteration"}], "repeats": 1, "warmup": 1, "iterations": 5,
            "max_runs": 100_000, "budget_gpu_hours": 1e7,  # the schema's most (the loop plans 8 repeats a cell)
            "executor": {"cluster": cluster, "timeout_min": 10}}  # fmt: skip


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} in {cwd}: rc {proc.returncode}\n{proc.stderr[-3000:]}")
    return wall, proc


def job_counts(dry_run_text: str) -> dict[str, int]:
    """Snakemake's job stats table of a dry run: rule -> jobs."""
    table = dry_run_text.split("Job stats:", 1)[1]
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)$", table, re.M) if m[0] != "total"}


def graphsweep_folder(tmp: Path, runs: int, cluster: str) -> Path:
    folder = tmp / f"graphsweep-{cluster}-{runs}"
    (folder / "configs").mkdir(parents=True)
    (folder / "configs" / "planning.yaml").write_text(yaml.safe_dump(spec(runs, cluster)))
    (folder / "configs" / "config.yaml").write_text(yaml.safe_dump({"spec": "configs/planning.yaml"}))
    return folder


def trivial_folder(tmp: Path, name: str, jobs: dict[str, int], runs: int) -> Path:
    """Jobs of rules that run once per run become a chain of `touch` jobs per run; the others fixed jobs."""
    per_run = sum(1 for rule, n in jobs.items() if rule != "all" and n >= runs // 2 and n > 1)
    per_run_jobs = sum(n for rule, n in jobs.items() if rule != "all" and n >= runs // 2 and n > 1)
    fixed = sum(jobs.values()) - per_run_jobs - 1
    folder = tmp / name
    folder.mkdir()
    # the same number of per-run jobs: `per_run` steps over per_run_jobs / per_run chains
    chains = max(1, round(per_run_jobs / max(per_run, 1)))
    (folder / "Snakefile").write_text(TRIVIAL.format(runs=chains, per_run=per_run, fixed=max(fixed, 1)))
    return folder


def shaped_folder(tmp: Path, runs: int) -> Path:
    folder = tmp / f"shaped-{runs}"
    folder.mkdir()
    (folder / "Snakefile").write_text(SHAPED.format(runs=runs))
    (folder / "stub.py").write_text("pass\n")
    return folder


def measure(tmp: Path, runs: int, real: bool, env: dict[str, str], snakefile: Path) -> None:
    cluster = "local" if real else "slurm"
    gs = graphsweep_folder(tmp, runs, cluster)
    base = [sys.executable, "-m", "snakemake", "--cores", "2"]
    dry_wall, dry = timed([*base, "--snakefile", str(snakefile), "-n"], gs, env)
    jobs = job_counts(dry.stdout + dry.stderr)
    total = sum(jobs.values())
    triv = trivial_folder(tmp, f"trivial-{cluster}-{runs}", jobs, runs)
    triv_dry = timed([*base, "-n"], triv, env)
    triv_jobs = sum(job_counts(triv_dry[1].stdout + triv_dry[1].stderr).values())
    what = ", ".join(f"{rule} {n}" for rule, n in sorted(jobs.items()))
    if real:
        wall, _ = timed([*base, "--snakefile", str(snakefile)], gs, env)
        triv_wall, _ = timed(base, triv, env)
        kind = "real local run (snakemake --cores 2)"
    else:
        wall, triv_wall = dry_wall, triv_dry[0]
        kind = "dry run (snakemake -n)"
    print(f"{kind}, {runs} runs: graphsweep {total} jobs ({what}) {wall:.1f} s; trivial Snakefile {triv_jobs} jobs "
          f"{triv_wall:.1f} s; ratio {wall / triv_wall:.2f}", flush=True)
    if not real and jobs.get("run"):
        shaped_wall, shaped = timed([*base, "-n"], shaped_folder(tmp, jobs["run"]), env)
        n = sum(job_counts(shaped.stdout + shaped.stderr).values())
        print(f"  graphsweep's rule shapes with stub bodies (Snakemake's own work for its directives): {n} jobs "
              f"{shaped_wall:.1f} s, ratio to the trivial Snakefile {shaped_wall / triv_wall:.2f}; graphsweep's code "
              f"over it {wall - shaped_wall:.1f} s", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-runs", type=int, nargs="*", default=[2000], help="run counts of the dry runs")
    p.add_argument("--real-runs", type=int, nargs="*", default=[6], help="run counts of the real local runs")
    p.add_argument("--code", type=Path, default=ROOT, help="the graphsweep tree to measure (default: this one)")
    args = p.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.code.resolve())}  # its graphsweep package, its scripts, its rules
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    snakefile = args.code.resolve() / "Snakefile"
    with tempfile.TemporaryDirectory() as tmp:
        for runs in args.dry_runs:
            measure(Path(tmp), runs, False, env, snakefile)
        for runs in args.real_runs:
            measure(Path(tmp), runs, True, env, snakefile)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
