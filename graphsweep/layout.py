"""The results layout: every path of a sweep's results folder, in one place (like submitit's JobPaths).

`SweepPaths` names the sweep's files (its tables and reports, runs/, logs/, .jobs/, archive/); `RunDir` a run folder's
files, and `RunDir.of(...)` turns a rule's declared files into the run folder every stage takes, refusing any other
file; `JobsDir` a run's job plumbing under .jobs/ (not declared outputs: a killed controller reattaches from there).
With placeholders they give Snakemake's patterns (rules/common.smk PATTERN). And torchrun's per-rank file layout, which
a run folder's ranks/ holds. Standard library only: the entry programs import it inside the user's container too.
tests/house/test_vocabulary.py fails when one of these names is spelled anywhere else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

RANKS_DIR = "ranks"  # runs/{run_id}/ranks/: the per-rank files of a run (torchrun's, or an ingested run's further files)


@dataclass(frozen=True)
class RunDir:
    """One run's folder, `runs/{run_id}/`: the only place where the names of its files exist.

    Every stage takes one: the run rule writes `run_json`, `log` and `ranks`, parse reads `config`, `run_json` and
    `logs()` (`log` and the files under `ranks`) and writes `iterations` and `summary`, aggregate reads `run_json`,
    `summary` and `iterations`. A script builds it from its rule's declared files with `RunDir.of(...)`, which refuses
    a file that is not this folder's, so what a stage reads is what Snakemake declared. With a placeholder root it
    gives Snakemake's patterns.
    """

    root: Path

    CONFIG: ClassVar[str] = "config.yaml"  # what the run executes (plan/planner.py PlannedRun.config)
    RUN: ClassVar[str] = "run.json"  # the job's facts (run/runrule.py, run/ingest.py)
    LOG: ClassVar[str] = "log.txt"  # the training log
    ITERATIONS: ClassVar[str] = "iterations.parquet"  # one row per iteration line (parse/run_dir.py)
    SUMMARY: ClassVar[str] = "summary.json"  # what the log says: outcome, steady window, figures
    SEGMENTS: ClassVar[str] = "segments"  # a pair job's log split into its ABBA segments (parse/run_dir.py)
    RANKS: ClassVar[str] = RANKS_DIR  # the run rule's folder output (empty when the run has no further files)
    FILES: ClassVar[tuple[str, ...]] = (CONFIG, RUN, LOG, RANKS, ITERATIONS, SUMMARY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def of(cls, *files: str | Path) -> "RunDir":
        """The run folder that holds these files (a rule's declared inputs and outputs); ValueError when one is not a
        file of a run folder or they lie in different folders."""
        paths = [Path(f) for f in files]
        roots = {p.parent for p in paths}
        strange = [str(p) for p in paths if p.name not in cls.FILES]
        if strange or len(roots) != 1:
            raise ValueError(f"not the files of one run folder ({', '.join(cls.FILES)}): {', '.join(map(str, paths))}")
        return cls(roots.pop())

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def config(self) -> Path:
        return self.root / self.CONFIG

    @property
    def run_json(self) -> Path:
        return self.root / self.RUN

    @property
    def log(self) -> Path:
        return self.root / self.LOG

    @property
    def iterations(self) -> Path:
        return self.root / self.ITERATIONS

    @property
    def summary(self) -> Path:
        return self.root / self.SUMMARY

    @property
    def ranks(self) -> Path:
        return self.root / self.RANKS

    @property
    def segments(self) -> Path:
        return self.root / self.SEGMENTS

    def logs(self) -> list[Path]:
        """The files of the run's log, in the order the parser reads them (later files are later in time):

        - torchrun's per-rank files (`ranks/<run>/attempt_<n>/<local rank>/{stdout,stderr}.log`, a local multi-GPU
          run); log.txt after them: it holds their `[defaultN]:` copies and then torchrun's own end report;
        - log.txt, then an ingested run's further files (`ranks/NNN.log`, its ranks or restarts in order)."""
        files = [*torchrun_rank_files(self.ranks), self.log]
        files += sorted(self.ranks.glob("*.log")) if self.ranks.is_dir() else []
        return [f for f in files if f.exists()]

    def link_out(self) -> tuple[Path, str, str] | None:
        """A symbolic link on the way to this run's files (runs/, the run's folder, a file, .jobs/{run_id}) that leads
        out of the sweep's folder, as (the link, what is wrong, the fix) of the UnusableFile its caller raises: the
        run's outputs would be written wherever it points."""
        sweep = self.root.parent.parent
        inside = sweep.resolve()
        jobs = sweep / SweepPaths.JOBS
        for p in (self.root.parent, self.root, *(self.root / f for f in self.FILES), jobs, jobs / self.run_id):
            if not p.is_symlink():
                continue
            fix = "remove the link (and move what it holds back in, if it is this run's)"
            try:
                target = p.resolve(strict=True)
            except (OSError, RuntimeError):
                return p, f"is a symbolic link to {os.readlink(p)}, which leads nowhere (missing, or a loop of links)", fix
            if not target.is_relative_to(inside):
                return (p, f"is a symbolic link to {target}, outside the sweep's folder {sweep}: a run's files are "
                        "written only inside it", fix)
        return None

    # How to go on when one of its files is damaged (UnusableFile.fix)
    def fix_for(self, path: str | Path) -> str:
        name = Path(path).name
        if name == self.RUN:
            return (f"it is the only record of that job: restore it from an archive of the sweep, or delete "
                    f"{self.root} to run that run again")
        if name == self.CONFIG:
            return f"delete it: the next snakemake writes it again from the plan (and runs {self.run_id} again)"
        return f"delete it: the next snakemake parses run {self.run_id} again from its log (no job is submitted)"


@dataclass(frozen=True)
class SweepPaths:
    """Every file of a sweep's results folder, in one place.

    With placeholders it gives Snakemake's patterns: ``SweepPaths("{results}", "{sweep}").run_json("{run_id}")``
    is ``"{results}/{sweep}/runs/{run_id}/run.json"``.
    """

    results: str | Path
    sweep: str

    PLAN: ClassVar[str] = "plan.parquet"
    RUNS: ClassVar[str] = "runs.parquet"
    ITERATIONS: ClassVar[str] = "iterations.parquet"
    COMPARISON: ClassVar[str] = "comparison.parquet"
    TABLES: ClassVar[tuple[str, ...]] = (PLAN, RUNS, ITERATIONS, COMPARISON)
    REPORT_MD: ClassVar[str] = "report.md"
    REPORT_HTML: ClassVar[str] = "report.html"
    RUN_DIRS: ClassVar[str] = "runs"  # runs/{run_id}/: RunDir
    LOGS: ClassVar[str] = "logs"  # the rules' logs
    JOBS: ClassVar[str] = ".jobs"  # job plumbing: JobsDir per run, the controller's record
    ARCHIVES: ClassVar[str] = "archive"  # `snakemake archive`'s tar.gz files (store/archive.py)
    LOOKS: ClassVar[str] = "looks"  # the decision loop's looks (plan/decide.py): look-{k}.json

    @classmethod
    def of(cls, sweep_dir: str | Path) -> "SweepPaths":
        """The paths of the sweep whose folder this is."""
        sweep_dir = Path(sweep_dir)
        return cls(sweep_dir.parent, sweep_dir.name)

    @property
    def root(self) -> Path:
        return Path(self.results) / self.sweep

    # the sweep's tables and reports
    @property
    def plan(self) -> Path:
        return self.root / self.PLAN

    @property
    def runs(self) -> Path:
        return self.root / self.RUNS

    @property
    def iterations(self) -> Path:
        return self.root / self.ITERATIONS

    @property
    def comparison(self) -> Path:
        return self.root / self.COMPARISON

    @property
    def report_md(self) -> Path:
        return self.root / self.REPORT_MD

    @property
    def report_html(self) -> Path:
        return self.root / self.REPORT_HTML

    @property
    def extra_repeats(self) -> Path:
        return self.root / "extra_repeats.yaml"  # written by `graphsweep more-repeats`

    def look(self, k: int | str) -> Path:
        """The decision loop's record of look k (plan/decide.py LookRecord)."""
        return self.root / self.LOOKS / f"look-{k}.json"

    @property
    def owner(self) -> Path:
        return self.root / "owner.json"  # which spec this folder belongs to (graphsweep/plan/owner.py)

    @property
    def controller(self) -> Path:
        return self.root / self.JOBS / "controller.json"  # the Snakemake process running the sweep now (run/controller.py)

    @property
    def run_dirs(self) -> Path:
        return self.root / self.RUN_DIRS

    @classmethod
    def rule_log_name(cls, rule: str, run_id: str | None = None) -> str:
        """A rule's log, relative to the sweep folder."""
        return f"{cls.LOGS}/{rule}/{run_id}.log" if run_id else f"{cls.LOGS}/{rule}.log"

    def rule_log(self, rule: str, run_id: str | None = None) -> Path:
        return self.root / self.rule_log_name(rule, run_id)

    def archive(self, name: str) -> Path:
        """archive/{name}.tar.gz"""
        return self.root / self.ARCHIVES / f"{name}.tar.gz"

    # one run's folder (RunDir knows its files)
    def run(self, run_id: str) -> RunDir:
        return RunDir(self.run_dirs / run_id)

    def run_dir(self, run_id: str) -> Path:
        return self.run(run_id).root

    def run_config(self, run_id: str) -> Path:
        return self.run(run_id).config

    def run_json(self, run_id: str) -> Path:
        return self.run(run_id).run_json

    def run_log(self, run_id: str) -> Path:
        return self.run(run_id).log

    def run_ranks(self, run_id: str) -> Path:
        return self.run(run_id).ranks

    def run_iterations(self, run_id: str) -> Path:
        return self.run(run_id).iterations

    def run_summary(self, run_id: str) -> Path:
        return self.run(run_id).summary

    # job plumbing (not declared outputs: a killed controller reattaches from here)
    def jobs(self, run_id: str) -> JobsDir:
        return JobsDir(self.root / self.JOBS / run_id)

    def jobs_dir(self, run_id: str) -> Path:
        return self.jobs(run_id).root


@dataclass(frozen=True)
class JobsDir:
    """`.jobs/{run_id}/`, one run's job plumbing (run/submit.py): not declared outputs, so Snakemake never deletes
    them, and a controller that was killed reattaches to the run's job from here."""

    root: Path

    SIDE: ClassVar[str] = "job.json"  # the in-flight job of a run (cluster, job id, its log): reattach reads it
    FAILURE: ClassVar[str] = "failed.json"  # the last infrastructure failure of a run (for `graphsweep status`)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def side(self) -> Path:
        return self.root / self.SIDE

    @property
    def failure(self) -> Path:
        return self.root / self.FAILURE

    @property
    def submitit(self) -> Path:
        """submitit's folder of the run's jobs (pickles, its own stdout/stderr)."""
        return self.root / "submitit"

    @property
    def local_controller_log(self) -> Path:
        """What submitit's local controller process prints (kept off the terminal: run/submit.py)."""
        return self.submitit / "controller.log"

    def attempt_log(self, attempt: int, when: str) -> Path:
        """The training log of one job, written here while it runs and linked to runs/{run_id}/log.txt at its end."""
        return self.root / "logs" / f"{when}-attempt{attempt}.log"

    def transient_log(self, job_id: str) -> Path:
        """The log of a job that failed on a transient signature and was run again (run/runrule.py)."""
        return self.root / f"log.transient.{job_id}.txt"


# torchrun (torch.distributed.run) with `--tee=3` writes every rank's stdout and stderr to its own file and copies them
# to the console with a `[default<local rank>]:` prefix; `--log-dir` (or its environment form PET_LOG_DIR: run.py's
# `env` argparse action) says where: <dir>/<rdzv run id>_<random>/attempt_<restart>/<local rank>/{stdout,stderr}.log
# (torch.distributed.elastic.multiprocessing.api.DefaultLogsSpecs.reify; same layout in torch 2.11 and 2.13).
TORCHRUN_TEE = "--tee=3"
TORCHRUN_LOG_DIR_ENV = "PET_LOG_DIR"


def torchrun_rank_files(ranks: Path) -> list[Path]:
    """torchrun's per-rank files under `ranks`: run folders by age, then attempt, local rank, stdout before stderr."""
    if not ranks.is_dir():
        return []

    def key(f: Path) -> tuple:
        attempt, local_rank = f.parent.parent.name, f.parent.name
        return (f.parents[2].stat().st_mtime, f.parents[2].name, int(attempt.split("_", 1)[1]), int(local_rank),
                f.name != "stdout.log")

    files = [f for f in ranks.glob("*/attempt_*/*/std*.log") if f.name in ("stdout.log", "stderr.log")
             and f.parent.name.isdigit() and f.parent.parent.name.split("_", 1)[1].isdigit()]
    return sorted(files, key=key)
