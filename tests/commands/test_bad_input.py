"""Bad input is one clear line and exit status 2, never a traceback, and a broken spec submits nothing (issue 14).

Through the real `graphsweep` CLI (graphsweep.cli.main, in process) and real Snakemake runs (subprocess).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

import graphsweep
from graphsweep import resources
from graphsweep import cli
from graphsweep.store.tables import write_table
from graphsweep.layout import RunDir, SweepPaths
from tests.support import ROOT, copy_workflow, snakemake

BASE_TEXT = (ROOT / "configs" / "sweep.yaml").read_text()
MEGATRON = yaml.safe_load((ROOT / "configs" / "examples" / "megatron-tiny-vanilla-gpt.yaml").read_text())
LOG = ROOT / "tests" / "fixtures" / "logs" / "megatron-h200" / "local_full.log"


def run_cli(capsys, *argv: object) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(rc: int, err: str, *needles: str) -> str:
    """The standard: exit 2 and exactly one line on stderr that names what is wrong."""
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, (rc, err)
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def megatron(**changes) -> dict:
    spec = json.loads(json.dumps(MEGATRON))
    for key, value in changes.items():
        section, _, name = key.partition("__")
        spec[section][name.replace("_DOT_", ".")] = value
    return spec


# --------------------------------------------------------------------------------------------------
# Broken specs: check-spec, plan, more-repeats and Snakemake give one line each and submit nothing

def _megatron_unbalanced() -> str:
    spec = megatron(axes__model_DOT_normalization=["[RMSNorm", "LayerNorm"])
    del spec["fixed"]["model.normalization"]
    return yaml.safe_dump(spec, sort_keys=False)


BROKEN_SPECS = {
    # name: (file content, what the line must name)
    "equal-numbers": (BASE_TEXT.replace("hidden: [64, 128]", "hidden: [64, 64.0]"), ["axes.hidden", "64 and 64.0"]),
    "equal-numbers-megatron": (yaml.safe_dump(megatron(axes__train_DOT_micro_batch_size=[1, 1.0])),
                               ["axes.train.micro_batch_size", "1 and 1.0"]),
    "binary": (b"\xff\xfe\x00sweep: x\n\x80\x81", ["not UTF-8", "0xff"]),
    "unbalanced-bracket": (BASE_TEXT.replace("hidden: [64, 128]", "hidden: [64, [128]"), ["not valid YAML", "line"]),
    "self-alias": (BASE_TEXT.replace("hidden: [64, 128]", "hidden: &a [*a]"), ["axes.hidden", "refer to itself"]),
    "unbalanced-bracket-in-a-value": (_megatron_unbalanced(), ["axes.model.normalization", "'[RMSNorm'", "closing ']'"]),
    # builtin sizes: each would cost a failed job per run if it reached a GPU
    "builtin-non-number": (BASE_TEXT.replace("hidden: [64, 128]", "hidden: [64, abc]"),
                           ["axes.hidden", "'abc'", "whole number"]),
    "builtin-heads-do-not-divide": (BASE_TEXT.replace("hidden: [64, 128]", "hidden: [64, 66]"),
                                    ["hidden 66 is not divisible by heads 4"]),
    "builtin-negative": (BASE_TEXT.replace("hidden: [64, 128]", "hidden: [64, -128]"), ["axes.hidden", "-128", ">= 1"]),
    "duplicate-yaml-key": (BASE_TEXT.replace("  micro_batch: [1, 2]", "  micro_batch: [1, 2]\n  hidden: [32]"),
                           ["'hidden' is given twice"]),
}  # fmt: skip


def _write(tmp_path: Path, name: str) -> Path:
    content = BROKEN_SPECS[name][0]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.parametrize("command", [["check-spec"], ["plan", "--dry-run"], ["plan"], ["more-repeats"]])
@pytest.mark.parametrize("name", sorted(BROKEN_SPECS))
def test_a_broken_spec_is_one_line_in_every_command(tmp_path, capsys, monkeypatch, name, command):
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, name)
    rc, out, err = run_cli(capsys, *command, path)
    one_line(rc, err, str(path), *BROKEN_SPECS[name][1])
    assert not (tmp_path / "results").exists()  # nothing written


@pytest.mark.slow
@pytest.mark.snakemake
@pytest.mark.parametrize("name", sorted(BROKEN_SPECS))
def test_a_broken_spec_stops_snakemake_with_one_line_and_no_job(tmp_path, name):
    workdir = copy_workflow(tmp_path / "wf")
    path = _write(workdir / "configs", name)
    proc = snakemake(workdir, "--cores", "1", "--config", f"spec={path}")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("graphsweep: invalid sweep spec:") and str(path) in last, proc.stderr[-3000:]
    for needle in BROKEN_SPECS[name][1]:
        assert needle in last
    assert not (workdir / "results").exists()  # no plan, no job


def test_distinct_numbers_and_bools_stay_apart(tmp_path, capsys):
    ok = tmp_path / "ok.yaml"
    ok.write_text(BASE_TEXT.replace("hidden: [64, 128]", "hidden: [64, 128.0]"))
    rc, _, err = run_cli(capsys, "check-spec", ok)
    assert "duplicate" not in err  # 128.0 is not 64 (the builtin's own check may still want whole numbers)


# --------------------------------------------------------------------------------------------------
# parse, catalog, output paths

@pytest.fixture()
def files(tmp_path):
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00\x81")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "folder").mkdir()
    return tmp_path


PARSE_CASES = {
    "run-info missing": (["--run-info", "{t}/nope.json"], ["--run-info", "nope.json"]),
    "run-info binary": (["--run-info", "{t}/binary.json"], ["--run-info", "not a text file"]),
    "run-info a list": (["--run-info", "{t}/list.json"], ["--run-info", "not the object"]),
    "iterations below a file": (["--iterations", "{t}/afile/it.parquet"], ["--iterations", "afile is a file"]),
    "iterations a folder": (["--iterations", "{t}/folder"], ["--iterations", "is a folder"]),
    "iterations in no folder": (["--iterations", "{t}/no/such/it.parquet"], ["--iterations", "cannot write"]),
    "negative warmup": (["--warmup", "-1"], ["--warmup -1"]),
    "zero min-steady": (["--min-steady", "0"], ["--min-steady 0"]),
}


@pytest.mark.parametrize("case", sorted(PARSE_CASES))
def test_parse_bad_arguments(files, capsys, case):
    args, needles = PARSE_CASES[case]
    rc, _, err = run_cli(capsys, "parse", *[a.format(t=files) for a in args], LOG)
    one_line(rc, err, *needles)


def test_parse_a_folder_as_a_log(files, capsys):
    rc, _, err = run_cli(capsys, "parse", files / "folder")
    one_line(rc, err, "a folder")


CATALOG_CASES = {
    "results missing": (["{t}/cat", "--results", "/nonexistent"], ["--results /nonexistent", "no such folder"]),
    "out is a file": (["{t}/afile", "--results", "{t}/folder"], ["afile is a file"]),
    "out below a file": (["{t}/afile/cat", "--results", "{t}/folder"], ["afile is a file"]),
    "archive missing": (["{t}/cat", "--archives", "{t}/nope.tar.gz"], ["--archives", "no such file"]),
    "nothing to catalog": (["{t}/cat"], ["nothing to catalog"]),
}


@pytest.mark.parametrize("case", sorted(CATALOG_CASES))
def test_catalog_bad_arguments(files, capsys, case):
    args, needles = CATALOG_CASES[case]
    rc, _, err = run_cli(capsys, "catalog", *[a.format(t=files) for a in args])
    one_line(rc, err, *needles)
    assert not (files / "cat").exists()


def test_plan_out_below_a_file_writes_nothing(files, capsys):
    rc, out, err = run_cli(capsys, "plan", "--out", files / "afile" / "plan.parquet", ROOT / "configs" / "sweep.yaml")
    one_line(rc, err, "--out", "afile is a file")
    assert out == ""  # refused before the table


def test_status_of_a_missing_spec_file_says_so(files, capsys):
    rc, _, err = run_cli(capsys, "status", files / "mistyped.yaml")
    one_line(rc, err, "mistyped.yaml: no such spec file")


def test_verify_archive_of_a_missing_file(files, capsys):
    rc, out, err = run_cli(capsys, "verify-archive", files / "nope.tar.gz")
    one_line(rc, err, "nope.tar.gz", "no such file")


# --------------------------------------------------------------------------------------------------
# graphsweep check: never "ok" to what Megatron would not read

CHECK_CASES = {
    "misspelled field": (["model.cuda_graph_implementation=local"], ["model.cuda_graph_implementation",
                                                                      "did you mean model.cuda_graph_impl?"]),
    "misspelled rng field": (["rng.te_rng_traker=true"], ["did you mean rng.te_rng_tracker?"]),
    "negative gpus": (["--gpus", "-3", "model.cuda_graph_impl=none"], ["--gpus -3"]),
    "gpus pair not a number": (["gpus=abc", "model.cuda_graph_impl=none"], ["gpus='abc'"]),
    "mcore not a version": (["--mcore", "banana", "model.cuda_graph_impl=none"], ["--mcore 'banana'"]),
    "te not a version": (["--te-version", "x", "model.cuda_graph_impl=none"], ["--te-version 'x'"]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CHECK_CASES))
def test_check_refuses_what_megatron_would_not_read(capsys, case):
    args, needles = CHECK_CASES[case]
    rc, out, err = run_cli(capsys, "check", *args)
    one_line(rc, err, *needles)
    assert "ok" not in out


def test_check_still_says_ok_to_real_fields(capsys):
    rc, out, _ = run_cli(capsys, "check", "--mcore", "0.19.2", "--te-version", "2.20.2", "gpus=1",
                         "model.cuda_graph_impl=none", "model.hidden_size=1024")  # fmt: skip
    assert rc == 0 and out.startswith("ok")


def test_a_misspelled_graph_field_in_a_spec_is_refused(tmp_path, capsys):
    path = tmp_path / "misspelled.yaml"
    path.write_text(yaml.safe_dump(megatron(fixed__model_DOT_cuda_graph_implementation="local")))
    rc, _, err = run_cli(capsys, "check-spec", path)
    one_line(rc, err, "fixed.model.cuda_graph_implementation", "did you mean model.cuda_graph_impl?")


# --------------------------------------------------------------------------------------------------
# Snakemake settings: one line, and archive_logs=false as the README writes it

@pytest.mark.slow
@pytest.mark.snakemake
@pytest.mark.parametrize("setting, needle", [
    ("archive_logs=maybe", "key 'archive_logs' = 'maybe': must be one of"),
    ("cluster=slrum", "key 'cluster' = 'slrum'"),
    ("specs=configs/sweep.yaml", "unknown key 'specs'"),
    ("results=afile", "afile is a file"),
])  # fmt: skip
def test_a_bad_workflow_setting_is_one_line(tmp_path, setting, needle):
    workdir = copy_workflow(tmp_path)
    (workdir / "afile").write_text("x")
    proc = snakemake(workdir, "-n", "--cores", "1", "--config", setting)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("graphsweep: invalid workflow setting") and needle in last, proc.stderr[-2000:]


# --------------------------------------------------------------------------------------------------
# Item 4: printed commands are the commands that run; user text is never markup

MARKUP = "x[/b]y[red]z\tt"  # closes a tag that was never opened, opens a colour, and a tab rich would expand


@pytest.fixture()
def markup_spec(tmp_path) -> Path:
    spec = megatron(workload__overrides=dict(MEGATRON["workload"]["overrides"], **{"logger.wandb_exp_name": MARKUP}))
    spec["sweep"] = "markup"
    spec["variants"].append({"name": "mlp", "impl": "transformer_engine", "scope": ["mlp"]})
    path = tmp_path / "markup.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.slow
def test_printed_commands_are_the_plan_commands_byte_for_byte(tmp_path, markup_spec):
    plan = tmp_path / "plan.parquet"
    graphsweep = [sys.executable, "-m", "graphsweep.cli", "plan", "--commands"]
    subprocess.run([*graphsweep, "--out", str(plan), str(markup_spec)], check=True, capture_output=True)
    proc = subprocess.run([*graphsweep, "--dry-run", str(markup_spec)], capture_output=True, check=True)
    printed = proc.stdout.decode()
    stored = pd.read_parquet(plan)
    first = stored[stored.look == 1]  # the first look: eager + the example's 3 variants + mlp, each repeated
    assert len(first) == MEGATRON["repeats"] * (1 + 4)
    for run_id, command in zip(stored.run_id, stored.command):  # the loop's later runs too
        assert f"\n{run_id}: {command}\n" in printed, run_id
    for text in ("[attn]", "[attn,mlp]", "[mlp]", "[full_iteration]", "[/b]", "[red]", "\t"):
        assert text in printed, text


def test_status_prints_user_text_literally(tmp_path, capsys, markup_spec):
    results = tmp_path / "res[red]ults[/b]"
    # planned for a cluster (here the local executor could start no Megatron run: no CUDA device)
    rc, _, _ = run_cli(capsys, "plan", "--cluster", "slurm", "--out", results / "markup" / "plan.parquet", markup_spec)
    assert rc == 0
    run_id = pd.read_parquet(results / "markup" / "plan.parquet").run_id[0]
    failure = results / "markup" / ".jobs" / run_id / "failed.json"
    failure.parent.mkdir(parents=True)
    failure.write_text(json.dumps({"state": "FAILED", "message": "boom [/b] [red]literal[/red]", "attempt": 1}))
    rc, out, err = run_cli(capsys, "status", "--results", results, "markup")
    assert rc == 0, err
    assert "boom [/b] [red]literal[/red]" in out
    assert str(results) in out


def test_a_literal_string_with_a_quote_is_not_a_traceback(tmp_path, capsys):
    # it's valid input: the rules read it as text and the launch quotes it (it used to crash in preflight)
    path = tmp_path / "quote.yaml"
    path.write_text(yaml.safe_dump(megatron(fixed__logger_DOT_wandb_exp_name="it's a run; rm -rf")))
    rc, out, err = run_cli(capsys, "check-spec", path)
    assert rc == 0 and err == "" and f"{MEGATRON['repeats'] * 4} runs" in out


# --------------------------------------------------------------------------------------------------
# Issue 24: every file read back is validated where it is read. A damaged one is one line naming the file, what
# is wrong and how to go on, exit status 2, before any job; nothing of the sweep is lost; the printed fix works.
# Real Snakemake on a real finished sweep (the default one: six eager baselines on this CPU), real Parquet.

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


def _files(paths: SweepPaths) -> dict[str, bytes]:
    """Every file of the results folder but the rule logs (the snapshot that must survive a refusal)."""
    return {str(p.relative_to(paths.root)): p.read_bytes() for p in sorted(paths.root.rglob("*"))
            if p.is_file() and "logs" not in p.relative_to(paths.root).parts[:1]}


def _eager(paths: SweepPaths) -> RunDir:
    return paths.run(sorted(p.name for p in paths.run_dirs.iterdir())[0])


def _flip(path: Path, start: int = 200, n: int = 50) -> None:
    """Damage a Parquet file's pages and keep its footer: a reader finds it only by reading the data."""
    data = bytearray(path.read_bytes())
    data[start:start + n] = bytes(b ^ 0xFF for b in data[start:start + n])
    path.write_bytes(bytes(data))


def _without_column(path: Path, table: str, column: str) -> None:
    write_table(pd.read_parquet(path).drop(columns=[column]), path, table)


DAMAGED = {
    # name: (damage(paths) -> the damaged file, what the line says after the file, the fix works with no job)
    "comparison is garbage": (lambda p: _write_bytes(p.comparison, b"garbage"),
                              ["not a readable Parquet file", "delete it"], True),
    "comparison pages damaged": (lambda p: _damage(p.comparison, _flip), ["not a readable Parquet file"], True),
    "comparison lacks verdict": (lambda p: _damage(p.comparison, lambda f: _without_column(f, "comparison", "verdict")),
                                 ["lacks its column(s) verdict"], True),
    "runs holds the plan": (lambda p: _write_bytes(p.runs, p.plan.read_bytes()), ["holds the 'plan' table"], True),
    "plan is empty": (lambda p: _write_bytes(p.plan, b""), ["not a readable Parquet file"], True),
    "run.json cut short": (lambda p: _damage(_eager(p).run_json, lambda f: f.write_text(f.read_text()[:40])),
                           ["not valid JSON (line", "restore it from an archive", "to run that run again"], False),
    "run.json a list": (lambda p: _write_bytes(_eager(p).run_json, b"[1, 2]"), ["holds a JSON list"], False),
    "summary.json empty": (lambda p: _write_bytes(_eager(p).summary, b""), ["empty", "parses run"], True),
    "summary.json binary": (lambda p: _write_bytes(_eager(p).summary, b"\xff\xfe\x00"), ["not UTF-8"], True),
    # a field records.RunSummary holds as a count, written as text (by hand, or by another tool)
    "summary.json field": (lambda p: _damage(_eager(p).summary, lambda f: f.write_text(
        f.read_text().replace('"steady_n": ', '"steady_n": "many", "was": '))), ["steady_n = 'many' is not a whole number"],
        True),
    "run iterations garbage": (lambda p: _write_bytes(_eager(p).iterations, b"PAR1xx"), ["not a readable Parquet"],
                               True),
    "config.yaml not YAML": (lambda p: _write_bytes(_eager(p).config, b"run: [\n"), ["not valid YAML"], False),
    "owner.json garbage": (lambda p: _write_bytes(p.owner, b"{"), ["says which spec owns", "delete it"], True),
    "controller.json garbage": (lambda p: _write_bytes(p.controller, b"pid 12"), ["if no snakemake runs sweep"], True),
    "job.json garbage": (lambda p: _write_bytes(p.jobs(_eager(p).run_id).side, b"{\"cluster\": "),
                         ["squeue --name", "scancel"], True),
}  # fmt: skip


def _write_bytes(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _damage(path: Path, how) -> Path:
    how(path)
    return path


def _refusal(proc: subprocess.CompletedProcess, damaged: Path, workdir: Path, needles: list[str]) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr, proc.stderr[-3000:]
    ours = [line for line in proc.stderr.splitlines() if line.startswith("graphsweep")]
    assert len(ours) == 1 and proc.stderr.strip().splitlines()[-1] == ours[0], proc.stderr[-3000:]
    assert str(damaged.relative_to(workdir)) in ours[0], ours[0]
    for needle in needles:
        assert needle in ours[0], (needle, ours[0])
    return ours[0]


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_file_stops_the_sweep_with_one_line_and_loses_nothing(finished, tmp_path, case):
    workdir, paths = _copy(finished, tmp_path)
    damage, needles, no_job = DAMAGED[case]
    damaged = damage(paths)
    before = _files(paths)
    proc = snakemake(workdir, "--cores", "2")
    _refusal(proc, damaged, workdir, needles)
    assert _files(paths) == before  # not one byte changed: the report, the tables, every run's files
    assert "[graphsweep] submitted" not in proc.stderr
    if no_job:  # the fix the line gives: delete the file; the next snakemake rebuilds it and submits nothing
        verdicts = pd.read_parquet(finished / "results/default/comparison.parquet").set_index("cell_id").verdict
        damaged.unlink()
        again = snakemake(workdir, "--cores", "2")
        assert again.returncode == 0, again.stderr[-3000:]
        assert "[graphsweep] submitted" not in again.stderr
        fresh = pd.read_parquet(paths.comparison).set_index("cell_id").verdict
        pd.testing.assert_series_equal(fresh.sort_index(), verdicts.sort_index())
        assert paths.report_html.stat().st_size > 10_000


@pytest.mark.slow
def test_a_file_damaged_under_a_good_footer_fails_its_job_restores_the_outputs_and_the_hint_works(finished, tmp_path):
    """A run's iterations.parquet with damaged pages passes the controller's first check (footer and columns): the
    look job meets it, fails with the one line, and Snakemake restores the look's record (an update() output, as the
    tables are) instead of deleting it; the last line names the file, its fix and the command that goes on."""
    workdir, paths = _copy(finished, tmp_path)
    run = _eager(paths)
    _flip(run.iterations)
    before = _files(paths)
    proc = snakemake(workdir, "--cores", "2")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"graphsweep: results/default/runs/{run.run_id}/iterations.parquet: not a readable Parquet file" in proc.stderr
    # the first job that reads it is the decision loop's look (it judges the runs' files); its record is update()
    assert "Restored previous version of results/default/looks/look-1.json" in proc.stderr
    assert _files(paths) == before  # the tables, the looks, the reports: the last good versions
    last = proc.stderr.strip().splitlines()
    last = next(line for line in reversed(last) if line.startswith("graphsweep: sweep 'default' stopped"))
    assert f"runs/{run.run_id}/iterations.parquet" in last and "delete it" in last
    run.iterations.unlink()  # what the line says, then its command
    command = last.split("then carry on (finished runs are kept): ", 1)[1]
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "[graphsweep] submitted" not in done.stderr, done.stderr[-3000:]
    assert "graphsweep: sweep 'default' done: 12 cells: 12 blocked" in done.stderr


@pytest.mark.slow
def test_extra_repeats_that_is_not_what_more_repeats_writes_is_refused(finished, tmp_path):
    for text, needle in (("repeat: {x: 3}\n", "unknown key 'repeat'"), ("max_repeats: [\n", "not valid YAML"),
                         ("sweep: other\nmax_repeats: 12\n", "key 'sweep' = 'other', but this is sweep 'default'"),
                         ("max_repeats: 0\n", "key 'max_repeats' = 0: a budget in jobs per arm is an integer"),
                         ("- 1\n", "holds list, not the mapping")):  # fmt: skip
        workdir, paths = _copy(finished, tmp_path / str(abs(hash(text))))
        damaged = _write_bytes(paths.extra_repeats, text.encode())
        before = _files(paths)
        line = _refusal(snakemake(workdir, "--cores", "2"), damaged, workdir, [needle])
        assert line.startswith("graphsweep: invalid sweep spec:")
        assert _files(paths) == before


@pytest.mark.slow
def test_results_in_a_place_that_cannot_hold_a_folder_is_one_line(tmp_path):
    workdir = copy_workflow(tmp_path)
    proc = snakemake(workdir, "-n", "--cores", "1", "--config", "results=/proc/graphsweep-results")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "graphsweep: invalid workflow setting: results '/proc/graphsweep-results': /proc does not let user")


# The commands that read the same files say the same line (status used to show a damaged run as `planned`)

@pytest.mark.slow
@pytest.mark.parametrize("case", ["comparison is garbage", "run.json a list", "summary.json empty",
                                  "job.json garbage", "plan is empty"])
def test_status_names_a_damaged_file_instead_of_guessing(finished, tmp_path, capsys, case):
    workdir, paths = _copy(finished, tmp_path)
    damaged = DAMAGED[case][0](paths)
    rc, out, err = run_cli(capsys, "status", "--results", workdir / "results", "default")
    one_line(rc, err, str(damaged), *DAMAGED[case][1])


def test_more_repeats_names_a_damaged_comparison(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "adaptive.yaml"
    spec.write_text(BASE_TEXT.replace("sweep: default", "sweep: adaptive"))
    damaged = _write_bytes(SweepPaths("results", "adaptive").comparison, b"garbage")
    rc, _, err = run_cli(capsys, "more-repeats", spec)
    one_line(rc, err, str(damaged), "not a readable Parquet file", "delete it")
    assert not SweepPaths("results", "adaptive").extra_repeats.exists()


@pytest.mark.slow
def test_catalog_names_a_damaged_table(finished, tmp_path, capsys):
    workdir, paths = _copy(finished, tmp_path)
    _write_bytes(paths.comparison, b"garbage")
    rc, _, err = run_cli(capsys, "catalog", tmp_path / "cat", "--results", workdir / "results")
    one_line(rc, err, "comparison.parquet", "not a readable Parquet file")
    assert not list((tmp_path / "cat").rglob("*.parquet"))  # nothing damaged copied into a catalog


# --------------------------------------------------------------------------------------------------
# Item 3: specs that cannot give a verdict, or cost too much, are refused by check-spec and by the workflow

def _spec_with(**changes) -> str:
    raw = yaml.safe_load(BASE_TEXT)
    raw.update(changes)
    return yaml.safe_dump(raw, sort_keys=False)


CANNOT_RUN = {
    "exclude value as text": (_spec_with(exclude=[{"hidden": "128", "micro_batch": 2}]),
                              ["exclude.0.hidden", "'128'", "is text but axis 'hidden' holds a number",
                               "write 128 without quotes"]),
    "exclude value not on the axis": (_spec_with(exclude=[{"hidden": 256}]),
                                      ["exclude.0.hidden", "256", "not a value of axis 'hidden'"]),
    "exclude of values that never meet": (_spec_with(axes={"hidden": [64, 128], "micro_batch": [1, 2]},
                                                     exclude=[{"hidden": 128, "micro_batch": 2}, {"micro_batch": 2, "hidden": 128}]),
                                          ["exclude.1", "excludes nothing that exclude.0 does not already exclude"]),
    "include of a shape the axes have": (_spec_with(include=[{"hidden": 64, "micro_batch": 1}]),
                                         ["include.0", "includes nothing"]),
    "include value as text": (_spec_with(include=[{"hidden": "96", "micro_batch": 1}]),
                              ["include.0.hidden", "is text but axis 'hidden' holds a number"]),
    "too few measured iterations": (_spec_with(iterations=3), ["key 'iterations' = 3", "at least 5 measured iterations"]),
    "beyond the time limit": (_spec_with(iterations=20000, executor={"cluster": "slurm", "timeout_min": 1}),
                              ["executor.timeout_min", "estimated at", "raise executor.timeout_min to at least"]),
    "over the GPU-hour budget": (_spec_with(budget_gpu_hours=0.001, executor={"cluster": "slurm", "timeout_min": 10}),
                                 ["budget_gpu_hours", "estimated at", "over its budget"]),
    "more runs than a plan may have": (_spec_with(axes={"hidden": [64], "micro_batch": list(range(1, 10_001))},
                                                  exclude=[]),
                                       ["key 'axes'", "10000 shapes give 100000 runs, more than max_runs (20000)", "split the sweep"]),
}  # fmt: skip


# planning 100000 runs before refusing them takes seconds
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c == "more runs than a plan may have" else c
                                  for c in sorted(CANNOT_RUN)])
def test_check_spec_refuses_what_cannot_give_a_verdict(tmp_path, capsys, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "spec.yaml"
    path.write_text(CANNOT_RUN[case][0])
    t0 = time.monotonic()
    rc, out, err = run_cli(capsys, "check-spec", path)
    one_line(rc, err, str(path), *CANNOT_RUN[case][1])
    assert time.monotonic() - t0 < 30  # refused before 50,000 runs are planned
    rc, out, err = run_cli(capsys, "plan", path)
    one_line(rc, err, str(path))
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", ["exclude value as text", "over the GPU-hour budget", "more runs than a plan may have"])
def test_the_workflow_refuses_it_before_any_job(tmp_path, case):
    workdir = copy_workflow(tmp_path)
    path = workdir / "configs" / "bad.yaml"
    path.write_text(CANNOT_RUN[case][0])
    proc = snakemake(workdir, "--cores", "1", "--config", "spec=configs/bad.yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("graphsweep: invalid sweep spec:") and all(n in last for n in CANNOT_RUN[case][1]), last
    assert not (workdir / "results").exists()


def test_the_budget_has_a_default_a_user_can_see(tmp_path, capsys):
    rc, out, _ = run_cli(capsys, "check-spec", ROOT / "configs" / "sweep.yaml")
    assert rc == 0 and "(budget_gpu_hours 500)" in out
    schema = yaml.safe_load(resources.data_file(resources.SWEEP_SCHEMA).read_text())
    assert schema["properties"]["budget_gpu_hours"]["default"] == 500


@pytest.mark.slow
def test_the_examples_still_pass(capsys):
    for spec in sorted((ROOT / "configs" / "examples").glob("*.yaml")):
        rc, _, err = run_cli(capsys, "check-spec", spec)
        assert rc == 0, (spec, err)


# --------------------------------------------------------------------------------------------------
# Item 4: the small things

def test_a_yaml_alias_bomb_is_refused_fast(tmp_path, capsys):
    levels = ["a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("sweep: bomb\nworkload: {kind: builtin}\n" + "\n".join(levels) + "\naxes: {hidden: *i}\n"
                    "variants: [{impl: full_iteration}]\n")
    t0 = time.monotonic()
    rc, _, err = run_cli(capsys, "check-spec", path)
    one_line(rc, err, str(path), "expand to more than 1,000,000 values", "alias bomb")
    assert time.monotonic() - t0 < 5


def test_an_ingest_pattern_that_backtracks_forever_is_stopped_with_one_line(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / ("a" * 40 + "!")).write_text("x")
    spec = {"sweep": "hang", "workload": {"kind": "megatron_bridge", "recipe": "vanilla_gpt_pretrain_config"},
            "source": {"logs": str(logs), "pattern": r"(?P<variant>(a|aa)+)+\.log"},
            "axes": {"train.micro_batch_size": [1]}, "variants": [{"name": "full", "impl": "full_iteration"}]}
    path = tmp_path / "hang.yaml"
    path.write_text(yaml.safe_dump(spec))
    t0 = time.monotonic()
    rc, _, err = run_cli(capsys, "ingest", path)
    one_line(rc, err, "source.pattern", "took more than 1 s", "backtracks")
    assert time.monotonic() - t0 < 20


@pytest.mark.slow
def test_version():
    proc = subprocess.run([sys.executable, "-m", "graphsweep.cli", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == f"graphsweep {graphsweep.__version__}"


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    "-m graphsweep.cli check --rules", "-m graphsweep.cli plan --dry-run --commands configs/sweep.yaml",
    "-m graphsweep.cli check-spec configs/examples/megatron-tiny-moe.yaml", "-m graphsweep.provenance",
    "-m graphsweep.cli status --json default",
])  # fmt: skip
def test_output_piped_to_head_ends_quietly(command):
    proc = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} {command} | head -1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


# --------------------------------------------------------------------------------------------------
# README examples work when pasted

README = (ROOT / "README.md").read_text()
README_WORDS = " ".join(README.split())  # prose wraps anywhere
RUNNING_WORDS = " ".join((ROOT / "docs" / "running.md").read_text().split())  # the README's details


def test_readme_is_a_quick_start_and_its_specs_are_valid(tmp_path, capsys):
    assert len(README.split()) < 2000  # five minutes' reading; the details are in docs/
    for i, block in enumerate(README.split("```yaml\n")[1:]):
        path = tmp_path / f"spec{i}.yaml"
        path.write_text(block.split("```", 1)[0])
        rc, _, err = run_cli(capsys, "check-spec", path)
        assert rc == 0, err


@pytest.mark.slow
def test_readme_check_example_runs_as_pasted_in_a_shell(tmp_path):
    block = README.split(".venv/bin/graphsweep check model.", 1)[1].split("\n.venv/bin/graphsweep plan", 1)[0]
    command = "graphsweep check model." + block.replace("\\\n", " ")
    (tmp_path / "model.cuda_graph_scope=a").write_text("")  # what an unquoted [attn] would glob to
    proc = subprocess.run(["bash", "-c", command.replace("graphsweep", f"{shlex.quote(sys.executable)} -m "
                                                         "graphsweep.cli", 1)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert "[attn]" in command.split("'model.cuda_graph_scope=")[1][:8], command
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.startswith("blocked: 2 rule(s) fire"), proc.stdout  # attn graphs + full recompute, as it says


def test_readme_counts_the_rules_check_lists(capsys):
    rc, out, _ = run_cli(capsys, "check", "--rules")
    rules = [line for line in out.splitlines() if line and not line.startswith(" ")]
    assert rc == 0 and f"{len(rules)} preflight rules (`graphsweep check --rules` lists them" in README_WORDS


def test_more_repeats_works_for_every_shipped_spec_and_a_retired_key_is_one_line(capsys, tmp_path, monkeypatch):
    for spec in sorted((ROOT / "configs").rglob("*.yaml")):
        if spec.name == "config.yaml":
            continue
        rc, out, err = run_cli(capsys, "more-repeats", "--dry-run", "--results", ROOT / "results" / "examples", spec)
        assert rc == 0, (spec, err)
        assert out.strip(), spec
    monkeypatch.chdir(tmp_path)
    old = tmp_path / "old.yaml"
    old.write_text(BASE_TEXT + "adaptive_repeats: true\n")
    rc, _, err = run_cli(capsys, "more-repeats", old)
    one_line(rc, err, "adaptive_repeats", "decision loop")


def test_readme_catalog_of_results_includes_the_examples(tmp_path, capsys):
    assert "--results results" in RUNNING_WORDS and "results/examples/h200-builtin" in RUNNING_WORDS
    rc, out, err = run_cli(capsys, "catalog", tmp_path / "cat", "--results", ROOT / "results")
    assert rc == 0, err
    sweeps = {p.name for p in (tmp_path / "cat" / "comparison").iterdir()}
    assert {"sweep=h200-builtin", "sweep=megatron-tiny-moe", "sweep=megatron-tiny-vanilla-gpt"} <= sweeps
