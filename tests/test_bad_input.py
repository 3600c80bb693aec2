"""Bad input is one clear line and exit status 2, never a traceback, and a broken spec submits nothing (issue 14).

Through the real `graphsweep` CLI (graphsweep.cli.main, in process) and real Snakemake runs (subprocess).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from graphsweep import cli
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


def test_printed_commands_are_the_plan_commands_byte_for_byte(tmp_path, markup_spec):
    plan = tmp_path / "plan.parquet"
    graphsweep = [sys.executable, "-m", "graphsweep.cli", "plan", "--commands"]
    subprocess.run([*graphsweep, "--out", str(plan), str(markup_spec)], check=True, capture_output=True)
    proc = subprocess.run([*graphsweep, "--dry-run", str(markup_spec)], capture_output=True, check=True)
    printed = proc.stdout.decode()
    stored = pd.read_parquet(plan)
    assert len(stored) == MEGATRON["repeats"] * (1 + 4)  # eager + the example's 3 variants + mlp, each repeated
    for run_id, command in zip(stored.run_id, stored.command):
        assert f"\n{run_id}: {command}\n" in printed, run_id
    for text in ("[attn]", "[attn,mlp]", "[mlp]", "[full_iteration]", "[/b]", "[red]", "\t"):
        assert text in printed, text


def test_status_prints_user_text_literally(tmp_path, capsys, markup_spec):
    results = tmp_path / "res[red]ults[/b]"
    rc, _, _ = run_cli(capsys, "plan", "--out", results / "markup" / "plan.parquet", markup_spec)
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
