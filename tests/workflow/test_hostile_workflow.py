"""Issue 29 through real Snakemake runs: a hostile spec or workflow setting stops the workflow with one line before
anything is planned or submitted; a run folder linked out of the results is refused before a job writes through it;
and Ctrl-C as the last jobs finish says the sweep is done, not that it stopped before its end. Issue 38 item 6: a crash
line and an ingested folder name reach report.md and report.html as text, no link live, every control character
spelled out.

The in-process half (every case of the CLI): tests/house/test_hostile_input.py. The Slurm half:
tests/slurm/test_slurm_settings.py.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

from graphsweep.cli import main as cli_main
from graphsweep.layout import SweepPaths
from graphsweep.textsafe import CONTROL
from tests.support import BY_HAND, LOGS, ROOT, chromium, copy_workflow, run_chromium, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.snakemake]

BASE = yaml.safe_load((ROOT / "configs" / "sweep.yaml").read_text())


def _spec(**changes) -> dict:
    spec = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split("/")
        node = spec
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return spec


def _last_line(proc: subprocess.CompletedProcess, start: str, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(start), proc.stderr[-3000:]
    for needle in needles:
        assert needle in last, (needle, last)
    return last


@pytest.mark.parametrize("spec, needles", [
    (_spec(**{"executor/slurm/comment": "x\ntouch pwned #"}), ["executor.slurm.comment", "a newline (U+000A)"]),
    (_spec(**{"workload/env": {"A;touch pwned;B": "1"}}), ["workload.env.A;touch pwned;B", "environment variable"]),
    (_spec(budget_gpu_hours=float("nan")), ["budget_gpu_hours", "not a finite number"]),
    (_spec(margin=float("nan")), ["key 'margin' = NaN"]),
    (_spec(**{"executor/slurm/status_interval_s": 1.0e300}),
     ["key 'executor.slurm.status_interval_s' = 1e+300", "is the Slurm profile's setting"]),  # never a spec's
], ids=["newline comment", "env name", "budget nan", "margin nan", "interval 1e300"])  # fmt: skip
def test_a_hostile_spec_stops_snakemake_with_one_line_and_no_job(tmp_path, spec, needles):
    workdir = copy_workflow(tmp_path / "wf")
    (workdir / "configs" / "bad.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    proc = snakemake(workdir, "--cores", "1", "--config", "spec=configs/bad.yaml")
    _last_line(proc, "graphsweep: invalid sweep spec:", "configs/bad.yaml", *needles)
    assert not (workdir / "results").exists() and not (workdir / "pwned").exists()


@pytest.mark.parametrize("settings, needles", [
    ({"cluster": "slurm", "slurm": {"partition": "batch\ntouch pwned #"}}, ["key 'slurm.partition'", "a newline"]),
    ({"slurm": {"sbatch": {"mail-type --wrap=id": "x"}}}, ["key 'slurm.sbatch.mail-type --wrap=id'", "not a name"]),
    ({"slurm": {"status_interval_s": float("inf")}}, ["key 'slurm.status_interval_s' = inf", "not a finite number"]),
    ({"results": "res\x1b[2Jults"}, ["key 'results'", "an escape (ESC)"]),
    # every interval and limit in a range: 1e+300 s between sacct calls would wait for ever without one
    ({"slurm": {"status_interval_s": 1.0e300}}, ["key 'slurm.status_interval_s' = 1e+300", "maximum of 600"]),
    ({"slurm": {"lost_after_min": 0}}, ["key 'slurm.lost_after_min' = 0", "minimum of 0"]),
    ({"slurm": {"progress_interval_s": 0.01}}, ["key 'slurm.progress_interval_s' = 0.01", "minimum of 1"]),
], ids=["partition newline", "sbatch option", "interval inf", "results escape", "interval 1e300", "lost after 0",
        "progress 0.01"])  # fmt: skip
def test_a_hostile_workflow_setting_stops_snakemake_with_one_line(tmp_path, settings, needles):
    """What the Slurm profile's cluster.yaml (a Snakemake config file) or --configfile gives: the line names that
    file."""
    workdir = copy_workflow(tmp_path / "wf")
    (workdir / "bad.yaml").write_text(yaml.safe_dump(settings))
    proc = snakemake(workdir, "--cores", "1", "--configfile", str(workdir / "configs" / "config.yaml"),
                     str(workdir / "bad.yaml"))
    _last_line(proc, "graphsweep: invalid workflow setting (bad.yaml)", *needles)
    assert not any(p.name.startswith("res") for p in workdir.iterdir()) and not (workdir / "pwned").exists()


@pytest.mark.parametrize("value, needles", [
    ('"abc"', ["set-resources run.timeout_min = 'abc' gives 'abc' for attempt 1", "a whole number of minutes"]),
    ("1000000000000000", ["gives 1000000000000000 for attempt 1", "from 1 to 10,080"]),
    ('"1 / 0"', ["cannot be evaluated for attempt 1 (ZeroDivisionError: division by zero)"]),
    ('"60 * attempt - 100"', ["gives -40 for attempt 1"]),
], ids=["text", "10^15", "raises", "negative"])  # fmt: skip
def test_a_profiles_time_limit_that_is_none_stops_snakemake_before_any_job(tmp_path, value, needles):
    """Issue 40: `set-resources: {run: {timeout_min: "abc"}}` gave ValueError tracebacks from every run rule."""
    workdir = copy_workflow(tmp_path / "wf")
    profile = workdir / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(f"retries: 2\nset-resources:\n  run:\n    timeout_min: {value}\n")
    proc = snakemake(workdir, "--cores", "1", "--profile", str(profile))
    _last_line(proc, "graphsweep: invalid workflow setting (the Snakemake profile or --set-resources):", *needles)
    assert not (workdir / "results").exists()


def test_a_profiles_time_limit_expression_of_the_attempt_is_taken(tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    proc = snakemake(workdir, "-n", "--cores", "1", "--set-resources", "run:timeout_min=60*attempt")
    assert proc.returncode == 0, proc.stderr[-3000:]


# --------------------------------------------------------------------------------------------------
# A finished sweep (the default one: six eager baselines on this CPU)

@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("finished"))
    proc = snakemake(workdir, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return workdir


def _copy(finished: Path, tmp_path: Path) -> tuple[Path, SweepPaths]:
    dest = tmp_path / "wf"
    shutil.copytree(finished, dest, symlinks=True)  # mtimes and .snakemake's records come along
    return dest, SweepPaths(dest / "results", "default")


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("what", ["the run folder", "runs/"])
def test_a_run_folder_linked_out_of_the_results_is_refused_and_nothing_is_written_through_it(finished, tmp_path, what):
    workdir, paths = _copy(finished, tmp_path)
    run = paths.run(sorted(p.name for p in paths.run_dirs.iterdir())[0])
    linked = run.root if what == "the run folder" else paths.run_dirs
    outside = tmp_path / "outside" / linked.name
    outside.parent.mkdir()
    shutil.move(linked, outside)
    linked.symlink_to(outside)
    # the run's derived files gone: without the refusal, parse would write them again, through the link
    for name in ("summary.json", "iterations.parquet"):
        (outside / (name if what == "the run folder" else f"{run.run_id}/{name}")).unlink()
    before = _tree(outside)
    proc = snakemake(workdir, "--cores", "2")
    _last_line(proc, "graphsweep:", f"{linked.relative_to(workdir)}: is a symbolic link to {outside}",
               "outside the sweep's folder")
    assert _tree(outside) == before  # not a byte written outside the results
    assert "[graphsweep] submitted" not in proc.stderr


def test_ctrl_c_as_the_last_job_finishes_says_the_sweep_is_done(finished, tmp_path):
    """SIGINT to the controller alone (`kill -INT`, or a terminal whose jobs run in their own group) while the report
    job runs: Snakemake waits for that job, which writes both reports, then stops without recording it. The last
    lines say what the sweep found and how Snakemake's incomplete marks are cleared, not 'stopped before its end'."""
    workdir, paths = _copy(finished, tmp_path)
    paths.report_md.unlink()
    paths.report_html.unlink()
    out = open(workdir / "controller.txt", "w")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--cores", "2"]  # fmt: skip
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, text=True)
    log = workdir / "controller.txt"
    deadline = time.monotonic() + 300
    while "localrule report:" not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)  # the job is in Snakemake's pool by now
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(300) != 0
    text = log.read_text()
    assert "Terminating processes on user request" in text, text[-3000:]
    assert paths.report_html.stat().st_mtime >= started and paths.report_md.exists()  # the job ran to its end
    ours = [line for line in text.splitlines() if line.startswith("graphsweep:")]
    assert ours[-4] == "graphsweep: sweep 'default' was interrupted, but every job had finished: 12 cells: 12 blocked"
    assert ours[-3].startswith("graphsweep: no CUDA device here: graph arms blocked; the eager baselines ran.")
    assert ours[-2] == f"graphsweep: report: {paths.report_html.resolve()}"
    assert ours[-1].startswith("graphsweep: Snakemake stopped before recording the last job(s) (report), so it marks "
                               "their outputs incomplete; this makes them again (no job is submitted): cd ")
    assert "stopped before its end" not in text
    command = ours[-1].split("(no job is submitted): ", 1)[1]
    again = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "[graphsweep] submitted" not in again.stderr, again.stderr[-3000:]
    # the report job made again, or (when Snakemake had recorded it after all) nothing left to make: either way the
    # sweep's own last line
    assert ("graphsweep: sweep 'default' done: 12 cells: 12 blocked" in again.stderr
            or "graphsweep: sweep 'default' is complete, nothing to run: 12 cells: 12 blocked" in again.stderr), \
        again.stderr[-3000:]


# --------------------------------------------------------------------------------------------------
# Issue 38 item 6: text reaches a reader raw. An ingested sweep whose graph log dies on a line carrying a Markdown link,
# a bare address and terminal escapes, and whose other graph arm lies in a folder named like a link with an escape.
HOSTILE = "[click](javascript:alert(1)) www.evil.example \x1b]0;owned\x07\x1b[31m"
HOSTILE_FOLDER = "[click](javascript:alert(2))\x1b[31m"
# What GitHub's autolink extension turns into a link in text: a URL, a `www.` address, an e-mail address
BARE_LINK = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://|\bwww\.|[\w.+-]+@[\w-]+\.\w")


def _crashing_graph_log(dest: Path) -> None:
    """The real TE attn log (tests/fixtures/logs/megatron-h200), cut after iteration 20 as a dying job's log ends, with
    the traceback of a CUDA fault whose message carries the hostile text."""
    lines = (LOGS / "megatron-h200" / "te_attn.log").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if re.search(r"iteration +20/", line))
    dest.write_text("".join(lines[:cut + 1]) + "[rank0]: Traceback (most recent call last):\n"
                    '[rank0]:   File "/opt/Megatron-Bridge/pretrain.py", line 10, in <module>\n'
                    f"[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered {HOSTILE}\n")


@pytest.fixture(scope="module")
def hostile_reports(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-text")
    nemo, odd = root / "logs" / "nemo", root / "logs" / HOSTILE_FOLDER
    nemo.mkdir(parents=True)
    odd.mkdir()
    for k in (1, 2):
        shutil.copyfile(LOGS / "megatron-h200" / "eager.log", nemo / f"eager-{k}.log")
        shutil.copyfile(LOGS / "megatron-h200" / "local_full.log", odd / f"local_full-{k}.log")
    shutil.copyfile(LOGS / "megatron-h200" / "te_attn.log", nemo / "te_attn-1.log")
    _crashing_graph_log(nemo / "te_attn-2.log")
    spec = {**BY_HAND, "sweep": "hostile-text", "description": "by hand [x](javascript:alert(3)) <img src=x>",
            "source": {"logs": str(root / "logs"),
                       "pattern": r"(?P<prov_container>[^/]+)/(?P<variant>eager|te_attn|local_full)-(?P<repeat>\d)\.log"},
            "variants": BY_HAND["variants"][:2], "repeats": 2}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert cli_main(["ingest", str(root / "spec.yaml"), "--results", str(root / "results")]) == 0
    return root / "results" / "hostile-text"


def test_a_crash_line_and_a_folder_name_reach_report_md_as_inert_text(hostile_reports):
    md = (hostile_reports / "report.md").read_text()
    assert not CONTROL.search(md.replace("\n", ""))  # no escape, no bell: spelled out
    assert "\\\\x1b]0;owned\\\\x07\\\\x1b[31m" in md  # `\x1b` as text (its backslash escaped for Markdown)
    # the crashed run is named in its shape's headline, with its cause: the line it died on
    headline = next(line for line in md.splitlines() if line.startswith("- **model.seq_length=1024**"))
    assert "not te_attn: its run " in headline and "an illegal memory access was encountered [click\\](javascript" \
        in headline
    assert "graph [click\\](javascript:alert(2))\\\\x1b[31m" in md  # the folder name, in the not-comparable reason
    # what a Markdown renderer makes of it: not one link, no HTML, and every bare address in a code span
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    inline = [c for t in tokens if t.type == "inline" for c in t.children or []]
    assert not [c for c in inline if c.type in ("link_open", "image", "html_inline")]
    assert not [t for t in tokens if t.type == "html_block"]
    assert not [c.content for c in inline if c.type == "text" and BARE_LINK.search(c.content)]
    assert "www.evil.example" in [c.content for c in inline if c.type == "code_inline"]


@pytest.mark.chromium
def test_a_crash_line_and_a_folder_name_reach_report_html_as_text(hostile_reports, tmp_path):
    page = (hostile_reports / "report.html").read_text()
    assert not CONTROL.search(page.replace("\n", ""))
    # a title attribute and a cell: the escapes spelled out, the link text
    assert 'title="not comparable: the runs of this cell differ in container: eager nemo vs graph ' \
           '[click](javascript:alert(2))\\x1b[31m' in page
    assert "<img" not in page.split("<svg", 1)[0].replace("&lt;img", "")
    res = run_chromium(chromium(), tmp_path / "profile", "--dump-dom", (hostile_reports / "report.html").as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    hrefs = re.findall(r'<a [^>]*href="([^"]*)"', res.stdout)
    assert hrefs and all(h.startswith(("runs/", "#")) for h in hrefs), hrefs  # logs and cells: nothing else
    assert 'class="crashed">not te_attn: its run ' in res.stdout and "owned\\x07" in res.stdout
