"""The run's sequence (graphsweep/run/runrule.py) from a launch record handed over by the rule, as the run rule will
get it (`params.config`, issue 39 item 2): config.yaml is written where the rule says, the job runs (submitit's local
executor, a real child process) and run.json is the typed record it returned; a record that is not a run's launch
record is refused with one line naming the file, and nothing is written or started."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from graphsweep.fileio import UnusableFile
from graphsweep.layout import RunDir
from graphsweep.records import RunRecord
from graphsweep.run.runrule import execute_run

CFG = {"run": {"run_id": "s1.eager.r1", "arm": "eager", "warmup": 3},
       "launch": {"argv": [sys.executable, "-c", "print('a training that prints one line')"]},
       "executor": {"cluster": "local", "timeout_min": 5}}  # fmt: skip


@pytest.mark.slow
def test_the_run_writes_the_config_it_is_handed_and_records_its_job(tmp_path):
    run = RunDir(tmp_path / "s1.eager.r1")
    run.root.mkdir()
    record = execute_run(run, tmp_path / "jobs", say=lambda _: None, config=CFG, config_to=run.config)
    assert yaml.safe_load(run.config.read_text()) == CFG
    assert record.exit_code == 0 and record.executor == "local" and record.job_id
    assert RunRecord.from_dict(json.loads(run.run_json.read_text())) == record
    assert "a training that prints one line" in run.log.read_text()
    assert not (tmp_path / "jobs" / "job.json").exists()  # finished: nothing left to reattach to


def test_a_record_that_is_no_launch_record_is_refused_and_nothing_starts(tmp_path):
    run = RunDir(tmp_path / "s1.eager.r1")
    run.root.mkdir()
    bad = {**CFG, "launch": {"argv": []}}
    with pytest.raises(UnusableFile, match=r"config\.yaml: launch\.argv is not the command of the run"):
        execute_run(run, tmp_path / "jobs", say=lambda _: None, config=bad, config_to=run.config)
    assert sorted(p.name for p in run.root.iterdir()) == [] and not (tmp_path / "jobs").exists()


def test_both_drivers_take_the_record_where_the_rule_hands_it_over():
    """scripts/run.py and the graphsweep executor ask smk.run_config: config.yaml read as today's input, or the record
    of `params.config` written to `output.config` (the rule the lead's change gives the run)."""
    from snakemake.iocontainers import Namedlist

    from graphsweep.smk import run_config

    today = run_config(Namedlist(fromdict={"config": "in/config.yaml"}), Namedlist(fromdict={"run": "run.json"}),
                       Namedlist(fromdict={"jobs_dir": ".jobs/r"}))  # fmt: skip
    handed = run_config(Namedlist(fromdict={}), Namedlist(fromdict={"config": "out/config.yaml"}),
                        Namedlist(fromdict={"jobs_dir": ".jobs/r", "config": CFG}))  # fmt: skip
    assert today == ("in/config.yaml", None) and handed == ("out/config.yaml", CFG)
