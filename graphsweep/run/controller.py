"""The controller of a sweep (the Snakemake process): who holds the sweep now, and what it says when it stops.

- `holder(paths)`, when the Snakefile is read: another live controller of this sweep, so a second `snakemake`
  stops with one line instead of Snakemake's IncompleteFilesException and its advice to `--rerun-incomplete`,
  which is wrong while the first controller is alive (it would rerun the runs that controller is waiting for);
  a record that cannot be read refuses too (fail closed: it may be a live controller's), saying how to go on;
- `hold(paths)` (Snakemake `onstart:`) records this process in results/{sweep}/.jobs/controller.json, and
  `release(paths)` (`onsuccess:` / `onerror:`) removes the record; a record whose process is gone counts for nothing;
- `end_of_sweep(paths)` (`onsuccess:`, and when a rerun finds nothing to do): the verdict counts and the path of
  report.html;
- `how_to_resume(paths)` (`onerror:`, Ctrl-C included): the exact command that carries on, after the damaged file
  a job failed on and what to do with it, when that is why it stopped.

A process is named by host, pid and its start time (run/process.py), so a pid reused after a reboot is not mistaken
for the controller.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import socket
import sys
from pathlib import Path
from typing import Any, Sequence

from graphsweep import resources
from graphsweep.fileio import write_json
from graphsweep.run.process import process_alive, this_process
from graphsweep.store.readback import check_sweep
from graphsweep.store.tables import read_table
from graphsweep.layout import SweepPaths
from graphsweep.fileio import UnusableFile, read_json
from graphsweep.vocab import BLOCKED, EAGER, cell_counts
from graphsweep.workloads import builtin, megatron_bridge
from graphsweep.workloads.base import NO_CUDA_HERE

# The committed sweep that ran each workload's graph variants on an H200 (results/examples/{sweep}/, in the checkout):
# where a sweep that could not run its graphs here points to see what they do on a GPU.
H200_EXAMPLES = {builtin.KIND: "h200-builtin", megatron_bridge.KIND: "megatron-tiny-vanilla-gpt"}


def _fix(paths: SweepPaths) -> str:
    return (f"it may be the record of a controller running this sweep now: if no snakemake runs sweep "
            f"'{paths.sweep}' (ps -ef | grep snakemake, on every host that shares this folder), delete it")


def _read(paths: SweepPaths) -> dict[str, Any] | None:
    """controller.json, None when there is none; UnusableFile when it cannot be read (never taken as free)."""
    if not (paths.controller.exists() or paths.controller.is_symlink()):
        return None
    return read_json(paths.controller, _fix(paths), required=("pid", "host"))


def holder(paths: SweepPaths) -> str | None:
    """One line naming another controller that holds this sweep, or None (free, ours, or its process is gone).

    Fails closed: an unreadable record raises UnusableFile (with how to go on), it never counts as free."""
    record = _read(paths)
    if not record or record.get("pid") == os.getpid() and record.get("host") == socket.gethostname():
        return None
    alive = process_alive(record.get("pid"), record.get("host"), record.get("start"))
    if alive is False:
        return None
    where = f"pid {record.get('pid')} on {record.get('host')}"
    if alive is None:
        where += " (another host: cannot check from here)"
    return (f"sweep '{paths.sweep}' is being run by another controller ({where}, since {record.get('since_utc')}, "
            f"in {record.get('cwd')}): wait for it to finish, or follow it with `graphsweep status {paths.sweep}`; "
            f"do not --rerun-incomplete its runs. If that controller is gone, delete {paths.controller}")  # fmt: skip


def hold(paths: SweepPaths, argv: Sequence[str] | None = None) -> None:
    record = {**this_process(), "since_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "cwd": os.getcwd(), "argv": list(sys.argv if argv is None else argv)}  # fmt: skip
    write_json(paths.controller, record)


def release(paths: SweepPaths) -> None:
    try:
        record = _read(paths)
    except UnusableFile:
        return  # not ours to remove: holder() names it to the next controller
    if record and record.get("pid") == os.getpid() and record.get("host") == socket.gethostname():
        paths.controller.unlink(missing_ok=True)
        try:
            paths.controller.parent.rmdir()  # .jobs/ held nothing else (an ingested sweep submits no job)
        except OSError:
            pass


def verdict_counts(paths: SweepPaths) -> tuple[dict[str, int], int]:
    """(cells per verdict in report order, A/A control cells) of comparison.parquet, counted as the report counts
    them (vocab.py cell_counts); ({}, 0) when there is no comparison yet, UnusableFile when it is damaged."""
    if not paths.comparison.exists():
        return {}, 0
    cmp = read_table(paths.comparison, "comparison")
    return cell_counts(list(cmp.verdict), list(cmp.variant))


def end_of_sweep(paths: SweepPaths, already: bool = False) -> str:
    """What the sweep found, in two lines: the verdict counts and where the report is. `already`: a rerun found
    every run and table of the sweep up to date (Snakemake's "Nothing to be done")."""
    try:
        counts, control = verdict_counts(paths)
    except UnusableFile as exc:
        return f"graphsweep: sweep '{paths.sweep}' finished, but {exc}"
    if not counts and not control:
        return f"graphsweep: sweep '{paths.sweep}' finished; no comparison yet ({paths.comparison} is missing)"
    total = sum(counts.values())
    found = ", ".join(f"{n} {verdict}" for verdict, n in counts.items()) or "none"
    aa = f" (and {control} A/A control cell{'s' if control != 1 else ''})" if control else ""
    report = paths.report_html.resolve() if paths.report_html.exists() else paths.report_html
    done = "is complete, nothing to run" if already else "done"
    no_cuda = no_cuda_note(paths)
    return (f"graphsweep: sweep '{paths.sweep}' {done}: {total} cells: {found}{aa}\n"
            + (f"graphsweep: {no_cuda}\n" if no_cuda else "") + f"graphsweep: report: {report}")


def no_cuda_note(paths: SweepPaths) -> str | None:
    """When this machine's missing CUDA device blocked the sweep's runs (plan time, rule no_cuda_here): what ran, and
    the committed report of the same workload's graph variants on an H200. None otherwise."""
    try:
        plan = read_table(paths.plan, "plan")
    except UnusableFile:
        return None
    here = plan.rule_id.fillna("").str.split(";").map(lambda rules: NO_CUDA_HERE in rules)
    if not here.any():
        return None
    eager_ran = ((plan.arm == EAGER) & (plan.status != BLOCKED)).any()
    what = "graph arms blocked; the eager baselines ran" if eager_ran else "every run blocked; none ran"
    example = H200_EXAMPLES.get(str(plan.workload.iloc[0]))
    if example is None:
        return f"no CUDA device here: {what}"
    repo = resources.checkout()
    report = SweepPaths((repo or Path()) / "results" / "examples", example).report_html
    where = str(report) if repo is not None and report.is_file() else f"{report} in the graphsweep repository"
    return f"no CUDA device here: {what}. What graph variants of this workload did on an H200: {where}"


def written_since(outputs: Sequence[str | Path], since: float) -> bool:
    """Every file exists and was written at or after `since` (this controller's start): a job that made them ran to
    its end in this invocation (a failed job's update() outputs are restored with their old times, a killed one's
    are missing)."""
    try:
        return all(Path(p).stat().st_mtime >= since for p in outputs)
    except OSError:
        return False


def done_when_interrupted(paths: SweepPaths, unrecorded: Sequence[str], argv: Sequence[str] | None = None,
                          cwd: str | None = None) -> str:
    """The last lines when Ctrl-C (or SIGINT) came as the last jobs finished: Snakemake waits for its running local
    jobs, but stops before recording them, so it marks their outputs incomplete although every job ran to its end.
    `unrecorded`: the rules of those jobs."""
    found = end_of_sweep(paths).replace(f"sweep '{paths.sweep}' done", f"sweep '{paths.sweep}' was interrupted, but "
                                        "every job had finished", 1)
    if not unrecorded:
        return found
    cost = "" if "run" in unrecorded else " (no job is submitted)"
    return (f"{found}\ngraphsweep: Snakemake stopped before recording the last job(s) ({', '.join(unrecorded)}), so it "
            f"marks their outputs incomplete; this makes them again{cost}: {resume_command(argv, cwd)}")


def resume_command(argv: Sequence[str] | None = None, cwd: str | None = None) -> str:
    """The command that carries on where this one stopped: this very command, from the folder it was typed in."""
    argv = list(sys.argv if argv is None else argv)
    if argv and argv[0].endswith("__main__.py"):  # python -m snakemake
        argv = [sys.executable, "-m", "snakemake", *argv[1:]]
    # Snakemake marks the outputs of the jobs it was running when stopped as incomplete and refuses to start again
    # without this flag. Remaking them is what resuming means: an interrupted run rule reattaches to its Slurm job
    # (job.json) or submits a fresh local one; finished runs are not incomplete and stay.
    if not any(a in ("--rerun-incomplete", "--ri") for a in argv):
        argv.append("--rerun-incomplete")
    cwd = cwd or os.environ.get("PWD") or os.getcwd()
    return f"cd {shlex.quote(cwd)} && {shlex.join(argv)}"


def how_to_resume(paths: SweepPaths, argv: Sequence[str] | None = None, cwd: str | None = None,
                  run_ids: Sequence[str] = (), pairs: Sequence[str] = (), problem: str | None = None) -> str:
    """The last line of a sweep that stopped early. When a file the jobs read is damaged (what a failed job met),
    or `problem` says what else stops every job (a full disk: smk.room_problem), it names that and its fix first:
    resuming before that would fail the same way."""
    if problem:
        return (f"graphsweep: sweep '{paths.sweep}' stopped: {problem}; then carry on (finished runs and the last "
                f"good tables are kept): {resume_command(argv, cwd)}")
    try:
        check_sweep(paths, run_ids, pairs, full=True)
    except UnusableFile as exc:
        return (f"graphsweep: sweep '{paths.sweep}' stopped: {exc}; then carry on (finished runs are kept): "
                f"{resume_command(argv, cwd)}")
    return (f"graphsweep: sweep '{paths.sweep}' stopped before its end (interrupted, or a job failed: see above); "
            f"finished runs are kept and a rerun submits only the rest: {resume_command(argv, cwd)}")  # fmt: skip
