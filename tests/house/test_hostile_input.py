"""Issue 29: no spec or profile text becomes shell code, no number switches a check off, the spec's Slurm settings
reach sbatch, and the small things a careless (or hostile) user meets end in one line or the right result.

In process through the real `graphsweep` CLI, on real artefacts: the repository's specs, the recorded H200 logs
(tests/fixtures/logs/megatron-h200), a real archive made from results/examples/h200-builtin, and submitit's own
batch-script renderer. The Snakemake and Slurm halves: tests/workflow/test_hostile_workflow.py,
tests/slurm/test_slurm_settings.py.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import tarfile
from pathlib import Path

import pytest
import submitit
import yaml

from graphsweep import smk, textsafe
from graphsweep.report.write import write_reports
from graphsweep.run.sbatch import SLURM_DEFAULTS, SubmitRefused, merged_slurm, sbatch_transient, slurm_parameters
from graphsweep.store import catalog
from graphsweep.store.archive import make_archive, verify_archive
from graphsweep.store.tables import read_table, table_info, write_table
from graphsweep.sweepspec.load import load_spec
from graphsweep.layout import SweepPaths
from graphsweep.fileio import UnusableFile
from graphsweep.records import LaunchPlan, SpecError
from tests.support import ROOT, one_line, run_cli
from tests.support import rewrite_archive as _rewrite
from tests.support import spec_with as _spec

BASE = yaml.safe_load((ROOT / "configs" / "sweep.yaml").read_text())
MEGATRON = yaml.safe_load((ROOT / "configs" / "examples" / "megatron-tiny-vanilla-gpt.yaml").read_text())
LOGS = ROOT / "tests" / "fixtures" / "logs" / "megatron-h200"
EXAMPLE = ROOT / "results" / "examples" / "h200-builtin"


def _without(spec: dict, section: str, key: str) -> dict:
    del spec[section][key]
    return spec


# --------------------------------------------------------------------------------------------------
# 1, 2: a value that reaches a batch script or a command line is one line; an environment variable's name is a name

HOSTILE_SPECS = {
    # name: (spec, what the line names)
    "newline in the Slurm comment": (_spec(BASE, **{"executor/slurm/comment": "x\ntouch /tmp/gs-pwned #"}),
                                     ["executor.slurm.comment", "'x\\ntouch /tmp/gs-pwned #'", "a newline (U+000A)"]),
    "carriage return in the partition": (_spec(BASE, **{"executor/slurm/partition": "batch\rrm -rf ~"}),
                                         ["executor.slurm.partition", "a carriage return"]),
    "escape in an override": (_spec(MEGATRON, **{"workload/overrides/logger.wandb_exp_name": "a\x1b[2Jb"}),
                              ["workload.overrides.logger.wandb_exp_name", "an escape (ESC)"]),
    "newline in an axis name": (_spec(MEGATRON, **{"axes/model.x\ny": [1]}), ["axes.model.x\\ny", "a newline"]),
    "newline in an sbatch line": (_spec(BASE, **{"executor/slurm/sbatch": {"mail-type": "FAIL\ntouch x"}}),
                                  ["executor.slurm.sbatch.mail-type", "a newline"]),
    "an sbatch option that is no name": (_spec(BASE, **{"executor/slurm/sbatch": {"x --wrap=id": 1}}),
                                         ["executor.slurm.sbatch.x --wrap=id", "not a name this setting takes"]),
    "env name with a command": (_spec(BASE, **{"workload/env": {"A;touch /tmp/gs-pwned;B": 1}}),
                                ["workload.env.A;touch /tmp/gs-pwned;B", "not an environment variable name"]),
    "env name starting with a digit": (_spec(BASE, **{"workload/env": {"1X": 1}}), ["workload.env.1X"]),
    "setup lines in a spec": (_spec(BASE, **{"executor/slurm/setup": ["curl x | sh"]}),
                              ["executor.slurm.setup", "a sweep spec does not carry shell code"]),
    "python wrapper in a spec": (_spec(BASE, **{"executor/slurm/python": "sh -c id; python"}),
                                 ["executor.slurm.python", "shell code"]),
    "unknown Slurm setting": (_spec(BASE, **{"executor/slurm/partiton": "batch"}),
                              ["executor.slurm.partiton", "unknown key"]),
}  # fmt: skip

# Numbers: YAML's .nan and .inf pass every schema bound; negatives and zero where a count or a time is meant
NAN, INF = float("nan"), float("inf")
BAD_NUMBERS = {
    "budget .nan": (_spec(BASE, budget_gpu_hours=NAN), ["budget_gpu_hours", "NaN", "not a finite number"]),
    "margin .nan": (_spec(BASE, margin=NAN), ["margin", "not a finite number"]),
    "builtin seq_length .nan": (_spec(BASE, **{"fixed/seq_length": NAN}), ["fixed.seq_length", "not a finite"]),
    "est_step_s .nan": (_spec(MEGATRON, **{"fixed/est_step_s": NAN}), ["fixed.est_step_s", "not a finite"]),
    "est_step_s .inf": (_spec(MEGATRON, **{"fixed/est_step_s": INF}), ["fixed.est_step_s", "Infinity"]),
    "est_step_s negative": (_spec(MEGATRON, **{"fixed/est_step_s": -5}), ["fixed.est_step_s", "-5", "above 0"]),
    "est_step_s zero": (_spec(MEGATRON, **{"fixed/est_step_s": 0}), ["fixed.est_step_s", "above 0"]),
    "gpus .inf": (_spec(MEGATRON, **{"fixed/gpus": INF}), ["fixed.gpus", "not a finite"]),
    "gpus 0": (_spec(MEGATRON, **{"fixed/gpus": 0}), ["fixed.gpus", "= 0", "1 or more"]),
    "gpus negative": (_spec(MEGATRON, **{"fixed/gpus": -2}), ["fixed.gpus", "1 or more"]),
    "gpus a fraction": (_spec(MEGATRON, **{"fixed/gpus": 1.5}), ["fixed.gpus", "whole number"]),
    "gpus on an axis": (_without(_spec(MEGATRON, **{"axes/gpus": [1, 0]}), "fixed", "gpus"), ["axes.gpus", "= 0"]),
    "seq_length .nan on an axis": (_spec(MEGATRON, **{"axes/model.seq_length": [NAN]}),
                                   ["axes.model.seq_length.0", "not a finite"]),
    "timeout .inf": (_spec(BASE, **{"executor/timeout_min": INF}), ["executor.timeout_min", "not a finite"]),
    "submit_retry_s .nan": (_spec(BASE, **{"executor/slurm/submit_retry_s": NAN}),
                            ["executor.slurm.submit_retry_s", "not a finite"]),
}  # fmt: skip


@pytest.mark.parametrize("command", [["check-spec"], ["plan", "--dry-run"], ["plan"]])
@pytest.mark.parametrize("case", sorted({**HOSTILE_SPECS, **BAD_NUMBERS}))
def test_a_hostile_spec_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch, case, command):
    monkeypatch.chdir(tmp_path)
    spec, needles = {**HOSTILE_SPECS, **BAD_NUMBERS}[case]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    rc, out, err = run_cli(capsys, *command, path)
    one_line(rc, err, str(path), *needles)
    assert not (tmp_path / "results").exists()


def test_what_stays_valid_input(tmp_path, capsys):
    """Quotes, semicolons and `$(...)` are text (quoted where they land), a tab is text, a description may have line
    breaks, and a spec's Slurm settings that are no shell code are taken."""
    spec = _spec(BASE, description="line one\nline two",
                 **{"executor/slurm": {"comment": "it's $(id); `id`\tx", "partition": "debug", "account": "a",
                                       "request_gpus": False, "submit_retry_s": 0, "sbatch": {"mail-type": "FAIL"}},
                    "workload/env": {"GS_X": "a b; c", "_Y2": 1}})  # fmt: skip
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(spec))
    rc, out, err = run_cli(capsys, "check-spec", path)
    assert rc == 0 and err == "", err
    assert load_spec(path).executor.slurm["comment"] == "it's $(id); `id`\tx"


def test_a_spec_slurm_block_gets_none_of_the_profile_defaults(tmp_path):
    """The spec says only what it sets: were the profile schema's defaults filled in (request_gpus: true,
    submit_retry_s: 300, ...), the spec would 'say' them and override the profile with them."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_spec(BASE, **{"executor/slurm": {"account": "a"}})))
    assert load_spec(path).executor.slurm == {"account": "a"}


def test_the_printed_command_never_runs_a_name_as_a_command():
    """A plan read back from a hand-edited config.yaml may hold any env name: the command is then printed with env(1),
    which takes NAME=value words without a shell reading them; a clean plan keeps the plain form."""
    plan = LaunchPlan(argv=["python", "-m", "x"], env={"A;touch /tmp/gs-pwned;B": "1", "OK": "v w"}, gpus=1, nodes=1,
                      gpus_per_node=1)  # fmt: skip
    assert plan.shell() == "env 'A;touch /tmp/gs-pwned;B=1' 'OK=v w' python -m x"
    clean = LaunchPlan(argv=["python"], env={"OK": "v w"}, gpus=1, nodes=1, gpus_per_node=1)
    assert clean.shell() == "OK='v w' python"


def test_the_schema_and_the_last_look_agree_on_names():
    sweep = yaml.safe_load((ROOT / "graphsweep" / "schemas" / "sweep.schema.yaml").read_text())
    config = yaml.safe_load((ROOT / "graphsweep" / "schemas" / "config.schema.yaml").read_text())
    env = sweep["properties"]["workload"]["properties"]["env"]["propertyNames"]["pattern"]
    sbatch = config["properties"]["slurm"]["properties"]["sbatch"]["propertyNames"]["pattern"]
    assert env == f"^{textsafe.ENV_NAME.pattern}$" and sbatch == f"^{textsafe.SBATCH_OPTION.pattern}$"
    spec_slurm = sweep["properties"]["executor"]["properties"]["slurm"]["properties"]
    for key, sub in spec_slurm.items():  # a spec's Slurm settings are the profile's, with the profile's checks
        assert sub == {"$ref": f"config.schema.yaml#/properties/slurm/properties/{key}"}, key
        assert key in config["properties"]["slurm"]["properties"]


# --------------------------------------------------------------------------------------------------
# The batch script submitit writes from what graphsweep hands it: the last look refuses a line break, and a hostile
# value that is one line stays inside its quotes (the Slurm half runs such a script on the real cluster)

PLAN = LaunchPlan(argv=["python", "-m", "graphsweep.entry.builtin_gpt"], env={}, gpus=1, nodes=1, gpus_per_node=1)


def _batch_script(params: dict, tmp: Path) -> str:
    """The sbatch script submitit's Slurm executor renders for these parameters (nothing is submitted)."""
    path = os.environ["PATH"]
    if not shutil.which("srun"):  # submitit's Slurm executor starts only where srun is on PATH
        (tmp / "srun").write_text("#!/bin/sh\nexit 1\n")
        (tmp / "srun").chmod(0o755)
        os.environ["PATH"] = f"{tmp}{os.pathsep}{path}"
    try:
        ex = submitit.AutoExecutor(folder=str(tmp / "%j"), cluster="slurm")
    finally:
        os.environ["PATH"] = path
    ex.update_parameters(**params)
    return ex._executor._make_submission_file_text("python -u -m submitit.core._submit /x", "uuid")


@pytest.mark.parametrize("setting", [{"comment": "x\ntouch /tmp/gs-pwned #"}, {"partition": "debug\nid"},
                                     {"sbatch": {"mail-type": "FAIL\nid"}}, {"setup": ["echo a\necho b"]},
                                     {"slurm_additional_parameters": {"x\nid": 1}}])  # fmt: skip
def test_the_last_look_refuses_a_line_break_before_submitit_writes_it(setting):
    with pytest.raises(SpecError, match="a newline"):
        slurm_parameters(PLAN, setting, 10, "gs-x")


def test_an_sbatch_option_that_is_no_name_is_refused_before_submitit_writes_it():
    with pytest.raises(SpecError, match="not an sbatch option name"):
        slurm_parameters(PLAN, {"sbatch": {"x --wrap=id": "1"}}, 10, "gs-x")


def test_one_line_values_stay_inside_their_quotes(tmp_path):
    hostile = "a'; touch /tmp/gs-pwned; echo '$(id)`id`"
    text = _batch_script(slurm_parameters(PLAN, {"comment": hostile, "request_gpus": False}, 10, "gs-x"), tmp_path)
    (line,) = [ln for ln in text.splitlines() if ln.startswith("#SBATCH --comment=")]
    assert shlex.split(line.removeprefix("#SBATCH --comment=")) == [hostile]


# --------------------------------------------------------------------------------------------------
# Slurm settings: the spec wins where it says something; only Slurm's transient sbatch failures are retried

def test_the_spec_wins_over_the_profiles_nulls_and_defaults():
    profile = {**SLURM_DEFAULTS, "partition": None, "account": None, "sbatch": {"mail-type": "FAIL"}}
    spec = {"partition": "gpu", "account": "proj", "request_gpus": False, "submit_retry_s": 0, "qos": None,
            "sbatch": {"reservation": "r"}}
    merged = merged_slurm(profile, spec)
    assert merged["partition"] == "gpu" and merged["account"] == "proj"
    assert merged["request_gpus"] is False and merged["submit_retry_s"] == 0
    assert merged["sbatch"] == {"mail-type": "FAIL", "reservation": "r"}
    params = slurm_parameters(PLAN, merged, 10, "gs-x")
    assert params["slurm_partition"] == "gpu" and params["slurm_account"] == "proj" and "gpus_per_node" not in params
    assert merged_slurm({"partition": "batch", "qos": "normal"}, {"qos": None}) == {"partition": "batch", "qos": "normal"}


@pytest.mark.parametrize("stderr, transient", [
    ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation", True),
    ("sbatch: error: Batch job submission failed: Resource temporarily unavailable", True),
    ("sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying.", True),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)", True),
    ("sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification", False),
    ("sbatch: error: Batch job submission failed: Invalid partition name specified", False),
    ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified", False),
    ("sbatch: error: invalid partition specified: nosuch", False),
])  # fmt: skip
def test_only_what_slurm_calls_transient_is_retried(stderr, transient):
    assert sbatch_transient(stderr) is transient


def test_a_refusal_is_one_line_with_sbatchs_whole_message():
    line = "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification" + " x" * 80
    exc = SubmitRefused(line)
    assert isinstance(exc, SpecError) and line in str(exc) and "\n" not in str(exc)


# --------------------------------------------------------------------------------------------------
# 6: log text on the terminal, spec text in report.md

ESC = "\x1b[2J\x1b]0;owned\x07\x1b[31m"


def _with_escapes(tmp: Path, log: str, after: str) -> Path:
    """A recorded H200 log with a terminal escape sequence in the line that its verdict quotes."""
    text = (LOGS / log).read_text()
    assert after in text
    path = tmp / log
    path.write_text(text.replace(after, f"{after}{ESC}"))
    return path


def test_parse_spells_out_a_log_lines_escape_sequences(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "parse", _with_escapes(tmp_path, "oom.log", "CUDA out of memory."))
    assert rc == 0 and "\x1b" not in out and "\x07" not in out
    assert "CUDA out of memory.\\x1b[2J\\x1b]0;owned\\x07\\x1b[31m" in out


def test_compare_spells_out_a_log_lines_escape_sequences(capsys, tmp_path):
    graph = _with_escapes(tmp_path, "invalid_full.log", "Set rerun_state_machine.check_for_nan_in_loss=False.")
    rc, out, err = run_cli(capsys, "compare", "--eager", LOGS / "eager.log", "--graph", graph)
    assert rc == 0 and out.startswith("blocked") and "\x1b" not in out and "\x07" not in out
    assert "check_for_nan_in_loss=False.\\x1b[2J\\x1b]0;owned" in out


@pytest.mark.slow
def test_report_md_shows_the_description_as_text_not_html(tmp_path):
    sweep = tmp_path / "h200-builtin"
    shutil.copytree(EXAMPLE, sweep)
    plan = read_table(sweep / "plan.parquet", "plan")
    extra = table_info(sweep / "plan.parquet")["extra"]
    extra["spec"]["description"] = "<script>alert(1)</script> <img src=x onerror=alert(2)> a -> b"
    write_table(plan, sweep / "plan.parquet", "plan", extra=extra)
    write_reports(*(sweep / f"{t}.parquet" for t in ("plan", "runs", "iterations", "comparison")),
                  sweep / "report.md", sweep / "report.html")
    md = (sweep / "report.md").read_text()
    assert not re.search(r"(?<!\\)<(script|img|/script)", md)  # every tag opener backslash-escaped: text
    assert "\\<script>alert(1)\\</script> \\<img src=x onerror=alert(2)> a -> b" in md  # `>` opens nothing
    assert "&lt;script&gt;" in (sweep / "report.html").read_text()


# --------------------------------------------------------------------------------------------------
# 3, 5: an archive names no path outside, and verify reads a bounded amount

@pytest.fixture()
def archive(tmp_path) -> Path:
    """A real archive of the real H200 builtin sweep (results/examples/h200-builtin), as `snakemake archive` makes."""
    sweep = tmp_path / "h200-builtin"
    shutil.copytree(EXAMPLE, sweep)
    return make_archive(sweep, ROOT / "configs" / "examples" / "h200-builtin.yaml")


@pytest.mark.parametrize("sweep", ["../../outside", "/tmp/outside", "a/b", "", None, 7])
def test_a_manifest_sweep_that_is_a_path_fails_verification_and_catalogs_nothing(archive, tmp_path, capsys, sweep):
    top = archive.name.removesuffix(".tar.gz")
    bad = _rewrite(archive, tmp_path / "bad.tar.gz", lambda m: {**m, "sweep": sweep},
                   rename=lambda n: n.replace(top, f"{sweep}-{top.rsplit('-', 1)[1]}") if isinstance(sweep, str)
                   and "/" not in sweep and sweep else n)  # fmt: skip
    rc, out, _ = run_cli(capsys, "verify-archive", bad)
    assert rc == 1 and out.startswith(f"FAILED {bad}") and "is not a sweep name" in out
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    rc, _, err = run_cli(capsys, "catalog", tmp_path / "cat" / "x", "--archives", bad)
    one_line(rc, err, "does not verify", "is not a sweep name")
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # not a file written, in the catalog or outside


def test_a_top_folder_that_is_not_the_manifests_sweep_fails(archive, tmp_path):
    top = archive.name.removesuffix(".tar.gz")
    bad = _rewrite(archive, tmp_path / "bad.tar.gz", lambda m: m, rename=lambda n: n.replace(top, "x-y"))
    v = verify_archive(bad)
    assert not v.ok and any("top folder 'x-y' is not 'h200-builtin-<UTC timestamp>'" in p for p in v.problems)


@pytest.mark.parametrize("manifest", [b"[1, 2]", {"files": "x"}, {"files": [{"path": 1}]},
                                      {"manifest_version": "9"}])  # fmt: skip
def test_a_manifest_of_the_wrong_shape_fails_without_a_traceback(archive, tmp_path, capsys, manifest):
    bad = _rewrite(archive, tmp_path / "bad.tar.gz",
                   lambda m: manifest if isinstance(manifest, bytes) else {**m, **manifest})
    rc, out, err = run_cli(capsys, "verify-archive", bad)
    assert rc == 1 and out.startswith("FAILED") and "Traceback" not in err + out


def test_the_real_archive_still_verifies_and_catalogs(archive, tmp_path, capsys):
    rc, out, _ = run_cli(capsys, "verify-archive", archive)
    assert rc == 0 and out.startswith("OK")
    rc, _, err = run_cli(capsys, "catalog", tmp_path / "cat", "--archives", archive)
    assert rc == 0, err
    assert list((tmp_path / "cat" / "comparison").glob("sweep=h200-builtin/archive=*/comparison.parquet"))


@pytest.mark.slow
def test_a_one_gib_manifest_in_a_small_tarball_is_refused_unread(tmp_path, capsys):
    class Zeros(io.RawIOBase):
        def __init__(self, n: int):
            self.n = n

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:
            k = min(len(b), self.n)
            b[:k], self.n = bytes(k), self.n - k
            return k

    path = tmp_path / "bomb.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("x-20260101T000000Z/manifest.json")
        info.size = 1 << 30
        tar.addfile(info, io.BufferedReader(Zeros(1 << 30), 1 << 20))
    assert path.stat().st_size < 8 << 20  # a small file
    rc, out, _ = run_cli(capsys, "verify-archive", path)
    assert rc == 1 and "manifest.json: 1,073,741,824 bytes, more than a manifest.json of a graphsweep archive" in out


# --------------------------------------------------------------------------------------------------
# Numbers in logs: a step time of 0 or less is a damaged line, never a traceback

@pytest.mark.parametrize("value", ["0.0", "-3.0"])
def test_a_log_whose_step_times_are_not_times_is_unparseable(tmp_path, capsys, value):
    path = tmp_path / "bad.log"
    path.write_text(re.sub(r"elapsed time per iteration \(ms\): [0-9.]+", f"elapsed time per iteration (ms): {value}",
                           (LOGS / "eager.log").read_text()))  # fmt: skip
    rc, out, err = run_cli(capsys, "parse", "--json", path)
    s = json.loads(out)
    assert rc == 0 and s["outcome"] == "unparseable"
    assert s["reason"] == "the run ended normally but none of its 30 iteration lines has a readable elapsed time (a damaged log)"
    rc, out, err = run_cli(capsys, "compare", "--eager", path, LOGS / "eager.log", "--graph", LOGS / "local_full.log")
    assert rc == 0 and "Traceback" not in err and "eager 1 unparseable" in out


def test_one_zero_step_time_is_left_out_of_the_window(tmp_path, capsys):
    text = (LOGS / "eager.log").read_text()
    line = next(ln for ln in text.splitlines() if "iteration       10/" in ln)
    path = tmp_path / "one.log"
    path.write_text(text.replace(line, re.sub(r"\(ms\): [0-9.]+", "(ms): 0.0", line)))
    rc, out, _ = run_cli(capsys, "parse", "--json", path)
    s = json.loads(out)
    assert s["outcome"] == "completed" and s["step_ms_median"] > 0
    assert "1 iteration line(s) without a readable elapsed time (cut, glued, <= 0 ms)" in s["notes"]


# --------------------------------------------------------------------------------------------------
# Small: compare, plan --out, catalog

@pytest.fixture()
def linked(tmp_path) -> dict[str, Path]:
    (tmp_path / "sym.log").symlink_to(LOGS / "eager.log")
    shutil.copy(LOGS / "eager.log", tmp_path / "eager.log")
    os.link(tmp_path / "eager.log", tmp_path / "hard.log")
    return {"symlink": tmp_path / "sym.log", "hard link": tmp_path / "hard.log", "./": "./eager.log"}


@pytest.mark.parametrize("how", ["symlink", "hard link", "./"])
def test_the_same_log_twice_is_one_line(capsys, monkeypatch, linked, tmp_path, how):
    monkeypatch.chdir(tmp_path)
    first = LOGS / "eager.log" if how == "symlink" else Path("eager.log")
    rc, out, err = run_cli(capsys, "compare", "--eager", first, linked[how], "--graph", LOGS / "local_full.log")
    one_line(rc, err, "a log is given twice", f"{linked[how]} is {first} again")
    assert out == ""


def test_a_warmup_beyond_every_log_is_one_line_not_no_eager_runs(capsys):
    rc, out, err = run_cli(capsys, "compare", "--warmup", 1_000_000_000, "--eager", LOGS / "eager.log", "--graph",
                           LOGS / "local_full.log")  # fmt: skip
    one_line(rc, err, "--warmup 1000000000", "the logs end by iteration 30")


@pytest.fixture()
def seeded(tmp_path) -> dict[str, Path]:
    """The recorded logs (they print `> setting random seeds to 1234 ...`) with another seed, and with none."""
    text = (LOGS / "eager.log").read_text()
    assert "> setting random seeds to 1234 ..." in text
    (tmp_path / "seed5.log").write_text(text.replace("setting random seeds to 1234", "setting random seeds to 5")
                                        .replace("  seed: 1234", "  seed: 5"))
    (tmp_path / "noseed.log").write_text("\n".join(ln for ln in text.splitlines()
                                                   if "setting random seeds" not in ln and "  seed: " not in ln))
    return {"seed5": tmp_path / "seed5.log", "noseed": tmp_path / "noseed.log"}


def test_aa_of_logs_of_different_seeds_names_the_seeds_not_an_unknown_seed(capsys, seeded):
    rc, out, err = run_cli(capsys, "compare", "--aa", "--eager", LOGS / "eager.log", "--graph", seeded["seed5"])
    assert rc == 0 and "the seed is unknown" not in out
    assert "they trained from seed(s) 5 and the eager runs from 1234" in out


def test_seed_7_with_logs_that_print_theirs_does_not_say_no_seed_was_given(capsys, seeded):
    rc, out, err = run_cli(capsys, "compare", "--seed", 7, "--eager", seeded["noseed"], "--graph",
                           LOGS / "local_full.log")  # fmt: skip
    assert rc == 0 and "no --seed" not in out and "seed(s) 1234 and the eager runs from 7" in out
    assert "loss parity: loss parity" not in out


def test_an_unseeded_log_still_says_the_seed_is_unknown(capsys, seeded):
    rc, out, _ = run_cli(capsys, "compare", "--aa", "--eager", LOGS / "eager.log", "--graph", seeded["noseed"])
    assert rc == 0 and "the seed is unknown" in out


@pytest.mark.parametrize("where", ["/proc/graphsweep-x/plan.parquet", "/sys/graphsweep-plan.parquet"])
def test_plan_out_where_nothing_can_be_written_is_one_line(capsys, where):
    rc, out, err = run_cli(capsys, "plan", "--out", where, ROOT / "configs" / "sweep.yaml")
    one_line(rc, err, "--out", "does not let user")
    assert out == ""


def test_catalog_into_a_folder_that_cannot_be_written_is_one_line(capsys):
    rc, out, err = run_cli(capsys, "catalog", "/proc/graphsweep-catalog", "--results", ROOT / "results")
    one_line(rc, err, "/proc/graphsweep-catalog", "does not let user")


def test_catalog_that_fails_while_writing_is_one_line(tmp_path, capsys, monkeypatch):
    """The folder is writable when looked at, but a write fails later (a full disk, a read-only remount)."""
    def full(dest: Path, *_: object) -> None:
        raise OSError(28, "No space left on device", str(dest))

    monkeypatch.setattr(catalog, "write_bytes", full)  # the catalog writes through graphsweep/fileio.py
    monkeypatch.setattr(catalog, "copy_file", lambda src, dest: full(Path(dest)))
    rc, out, err = run_cli(capsys, "catalog", tmp_path / "cat", "--results", EXAMPLE.parent)
    one_line(rc, err, "cannot write into", "No space left on device")


def test_ingest_refuses_a_log_linked_twice(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(LOGS / "eager.log", logs / "eager-1.log")
    (logs / "eager-2.log").symlink_to(logs / "eager-1.log")
    shutil.copy(LOGS / "local_full.log", logs / "full-1.log")
    shutil.copy(LOGS / "local_full.log", logs / "full-2.log")
    spec = {"sweep": "linked", "workload": {"kind": "megatron_bridge", "recipe": "vanilla_gpt_pretrain_config"},
            "source": {"logs": str(logs), "pattern": r"(?P<variant>eager|full)-(?P<repeat>\d)\.log"},
            "axes": {"train.micro_batch_size": [1]}, "variants": [{"name": "full", "impl": "full_iteration"}],
            "repeats": 2}  # fmt: skip
    path = tmp_path / "linked.yaml"
    path.write_text(yaml.safe_dump(spec))
    rc, _, err = run_cli(capsys, "ingest", path)
    assert rc == 2 and "eager-2.log: the same file as eager-1.log (a link)" in err


# --------------------------------------------------------------------------------------------------
# 4: a run folder linked out of the results (the Snakemake half, before any job:
# tests/workflow/test_hostile_workflow.py)

def test_a_rule_refuses_a_run_folder_linked_out_while_the_sweep_runs(tmp_path):
    """A link made after the controller looked: the rule's own script refuses it before writing (exit 2, one line)."""
    paths = SweepPaths(tmp_path / "results", "s")
    paths.run_dirs.mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    run = paths.run("r1")
    run.root.symlink_to(tmp_path / "outside")
    with pytest.raises(UnusableFile, match=f"r1: is a symbolic link to {tmp_path / 'outside'}, outside the sweep's"):
        smk.run_dir(run.config, run.run_json, run.log)
    loop = paths.run("r2")
    loop.root.symlink_to(loop.root)  # a link to itself leads nowhere inside either
    with pytest.raises(UnusableFile, match="r2: is a symbolic link"):
        smk.run_dir(loop.config, loop.run_json, loop.log)


def test_a_link_that_stays_inside_the_sweep_is_fine(tmp_path):
    paths = SweepPaths(tmp_path / "results", "s")
    (paths.root / "moved" / "r1").mkdir(parents=True)
    paths.run_dirs.mkdir()
    run = paths.run("r1")
    run.root.symlink_to(paths.root / "moved" / "r1")
    assert smk.run_dir(run.config, run.run_json, run.log) == run
