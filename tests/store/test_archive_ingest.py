"""A folder of hand-made logs becomes a report through the real workflow with no job submitted; the sweep is
archived, verified, and its archive is read elsewhere by DuckDB, pandas and polars (also through the catalog)."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import shutil
import tarfile
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pytest
import yaml

from graphsweep.store import catalog
from graphsweep.store.archive import ArchiveError, make_archive, safe_extract, verify_archive
from graphsweep.cli import main as cli_main
from graphsweep.run.ingest import IngestError, match_files
from graphsweep.sweepspec.load import load_spec
from graphsweep.records import SpecError
from tests.support import BY_HAND, LOGS, ROOT, run_spec, snakemake




def _sql(query: str) -> list[tuple]:
    with duckdb.connect() as con:  # a fresh in-memory database: nothing but the files
        return con.execute(query).fetchall()


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    return run_spec(tmp_path_factory.mktemp("ingest"), "by-hand", BY_HAND)


@pytest.fixture(scope="module")
def archived(ingested):
    proc = snakemake(ingested, "--cores", "1", "archive", "--config", "spec=configs/by-hand.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    (archive,) = (ingested / "results" / "h200-by-hand" / "archive").glob("*.tar.gz")
    return archive


@pytest.mark.slow
@pytest.mark.snakemake
def test_hand_made_logs_become_a_report_with_no_job_submitted(ingested):
    out = ingested / "results" / "h200-by-hand"
    assert not (out / ".jobs").exists()  # submit.py keeps every submitted job's side file and submitit folder here
    for run_json in (out / "runs").glob("*/run.json"):
        info = json.loads(run_json.read_text())
        assert info["executor"] == "ingest" and info["job_id"] is None
        assert info["source_files"][0]["path"].startswith(str(LOGS / "megatron-h200"))
    cmp = pd.read_parquet(out / "comparison.parquet").set_index("variant")
    # one log per arm is a thin design: the 6.6x full-iteration graph is decided, the 1.5x TE graph waits for repeats
    assert cmp.loc["local_full", "verdict"] == "speedup" and cmp.loc["te_attn", "verdict"] == "inconclusive"
    assert cmp.loc["te_attn", "thin"] and "fewer than 3 jobs in an arm" in cmp.loc["te_attn", "reason"]
    assert cmp.loc["local_full", "speedup"] > cmp.loc["te_attn", "speedup"] > 1
    assert cmp.loc["invalid_full", "verdict"] == "blocked"
    assert "check_for_nan_in_loss must be disabled" in cmp.loc["invalid_full", "reason"]
    report = (out / "report.md").read_text()
    assert "h200-by-hand" in report and "te_attn" in report


@pytest.mark.slow
@pytest.mark.snakemake
def test_archive_verifies_and_is_queried_from_another_folder(archived, tmp_path):
    assert archived.name.startswith("h200-by-hand-") and archived.name.endswith("Z.tar.gz")
    assert cli_main(["verify-archive", str(archived)]) == 0
    # "another machine": a copy of the file alone, in a folder that knows nothing of the workflow
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy = elsewhere / archived.name
    shutil.copyfile(archived, copy)
    top = safe_extract(copy, elsewhere / "x")
    manifest = json.loads((top / "manifest.json").read_text())
    assert manifest["sweep"] == "h200-by-hand" and manifest["logs_included"] is True
    assert manifest["pipeline"]["version"] and manifest["spec"]["hash"] and manifest["analysis"]["margin"] == 0.02
    assert {"plan.parquet", "runs.parquet", "iterations.parquet", "comparison.parquet", "report.md", "report.html",
            "spec.yaml"} <= {f["path"] for f in manifest["files"]}  # fmt: skip
    assert any(f["path"].endswith("/log.txt") for f in manifest["files"])
    cmp = top / "comparison.parquet"
    n = _sql(f"select count(*) from read_parquet('{cmp}') where verdict = 'speedup'")[0][0]
    assert n == 1
    assert set(pd.read_parquet(cmp).verdict) == {"speedup", "inconclusive", "blocked"}
    assert pl.read_parquet(cmp).filter(pl.col("verdict") == "blocked").height == 1
    runs = top / "runs.parquet"
    assert _sql(f"select count(distinct prov_key) from read_parquet('{runs}')") == [(1,)]
    iters = pl.read_parquet(top / "iterations.parquet")
    assert iters.height > 0 and iters["elapsed_ms"].min() > 0


@pytest.mark.slow
@pytest.mark.snakemake
def test_catalog_spans_the_live_sweep_and_its_archive(ingested, archived, tmp_path):
    out = tmp_path / "catalog"
    assert catalog.main([str(out), "--results", str(ingested / "results")]) == 0
    q = f"""select archive, verdict, count(*) as cells from read_parquet('{out}/comparison/*/*/*.parquet',
            hive_partitioning = true, union_by_name = true) group by all order by all"""
    rows = _sql(q)
    stamp = archived.name.removesuffix(".tar.gz").removeprefix("h200-by-hand-")
    assert rows == [(stamp, "blocked", 1), (stamp, "inconclusive", 1), (stamp, "speedup", 1),
                    ("live", "blocked", 1), ("live", "inconclusive", 1), ("live", "speedup", 1)]
    idx = _sql(f"select sweep, logs_included from read_parquet('{out}/archives/*/*/*.parquet', hive_partitioning = true)")
    assert idx == [("h200-by-hand", True)]
    assert catalog.export(out, archives=[archived]) == []  # already in: left as it is


@pytest.mark.slow
@pytest.mark.snakemake
def test_archive_never_overwrites_and_can_leave_logs_out(ingested, tmp_path):
    sweep_dir = ingested / "results" / "h200-by-hand"
    spec = ingested / "configs" / "by-hand.yaml"
    when = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    first = make_archive(sweep_dir, spec, include_logs=False, now=when)
    assert first.name == "h200-by-hand-20300102T030405Z.tar.gz"
    before = first.read_bytes()
    with pytest.raises(ArchiveError, match="never overwritten"):
        make_archive(sweep_dir, spec, now=when)
    assert first.read_bytes() == before
    v = verify_archive(first)
    assert v.ok, v.problems
    names = [f["path"] for f in v.manifest["files"]]
    assert v.manifest["logs_included"] is False
    assert not [n for n in names if n.endswith("log.txt") or n.startswith("logs/")]
    assert any(n.endswith("run.json") for n in names)
    first.unlink()


@pytest.mark.slow
@pytest.mark.snakemake
def test_tampered_archive_fails_verification(archived, tmp_path, capsys):
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(archived, "r:gz") as src, tarfile.open(bad, "w:gz") as dst:
        for m in src:
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name.endswith("/report.md"):
                data = data.replace(b"speedup", b"slowdown")
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    assert cli_main(["verify-archive", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "report.md: sha256/size differ from the manifest" in out


# --------------------------------------------------------------------------------------------------
# Mapping files to runs (no workflow)


def _spec(tmp_path: Path, **changes) -> Path:
    raw = {**BY_HAND, **changes}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_repeats_and_axes_come_from_named_groups(tmp_path):
    spec = load_spec(_spec(tmp_path, source={"logs": str(LOGS / "h200-probe"),
                                             "pattern": r"(?P<size>medium)-(?P<variant>eager|graph)-(?P<repeat>\d+)\.log"},
                           axes={"size": ["medium"]}, variants=[{"name": "graph", "impl": "full_iteration"}], repeats=2))  # fmt: skip
    m = match_files(spec)
    assert {rid: [p.name for p in ps] for rid, ps in m.files.items()} == {
        r.run_id: [f"medium-{r.arm}-{r.repeat}.log"] for r in spec.runs()
    }
    assert "oom-eager-capped.log" in m.ignored


@pytest.mark.snakemake
def test_per_rank_files_of_one_run_are_one_run(tmp_path):
    """torchrun's per-rank stdout/stderr files of the 2-GPU TE attn run, next to the all-ranks eager log."""
    folder = tmp_path / "logs"
    shutil.copytree(LOGS / "megatron-h200x2" / "b_rank_files", folder / "te_attn")
    (folder / "eager" / "all").mkdir(parents=True)
    shutil.copyfile(LOGS / "megatron-h200x2" / "a_eager_dp2.log", folder / "eager" / "all" / "stdout.log")
    spec_path = _spec(tmp_path, source={"logs": str(folder),
                                        "pattern": r"(?P<variant>eager|te_attn)/(?P<part>[^/]+/std(out|err))\.log"},
                      variants=[BY_HAND["variants"][0]])  # fmt: skip
    files = match_files(load_spec(spec_path)).files
    te = next(v for k, v in files.items() if ".te_attn." in k)
    assert [p.relative_to(folder).as_posix() for p in te] == [
        "te_attn/rank0/stderr.log", "te_attn/rank0/stdout.log", "te_attn/rank1/stderr.log", "te_attn/rank1/stdout.log"]
    assert cli_main(["ingest", str(spec_path), "--results", str(tmp_path / "results")]) == 0
    runs = pd.read_parquet(tmp_path / "results" / "h200-by-hand" / "runs.parquet").set_index("variant")
    assert runs.loc["te_attn", "outcome"] == "completed" and runs.loc["te_attn", "capture_seen"]
    assert runs.loc["eager", "outcome"] == "completed"
    assert (tmp_path / "results" / "h200-by-hand" / "report.html").stat().st_size > 0
    # ranks/ is a declared output of the ingest rule and an input of the parse rule: what parse reads is declared
    run_dirs = tmp_path / "results" / "h200-by-hand" / "runs"
    te_run = next(d for d in run_dirs.iterdir() if ".te_attn." in d.name)
    assert sorted(f.name for f in (te_run / "ranks").glob("*.log")) == ["001.log", "002.log", "003.log"]
    assert all(not any((d / "ranks").glob("*.log")) for d in run_dirs.iterdir() if d != te_run)  # one file each
    dry = snakemake(ROOT, "-n", "--cores", "1", "--forcerun", "parse", "--config", f"spec={spec_path}",
                    f"results={tmp_path / 'results'}")
    assert dry.returncode == 0, dry.stderr[-3000:]
    inputs = re.findall(r"^rule parse:\n    input: (.*)$", dry.stdout, re.M)
    assert sorted(inputs) == sorted(f"{d / 'run.json'}, {d / 'log.txt'}, {d / 'ranks'}, {d / 'config.yaml'}"
                                    for d in run_dirs.iterdir()), dry.stdout[-3000:]


@pytest.mark.snakemake
def test_arms_named_by_container_in_the_file_names_are_not_compared(tmp_path):
    """Logs filed under the container that made them: the prov_container group records it."""
    folder = tmp_path / "logs"
    for image, arm in (("nemo-25.09", "eager"), ("nemo-25.11", "graph")):
        for k in (1, 2):
            (folder / image).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(LOGS / "h200-probe" / f"medium-{arm}-{k}.log", folder / image / f"{arm}-{k}.log")
    spec_path = _spec(tmp_path, source={"logs": str(folder),
                                        "pattern": r"(?P<prov_container>[^/]+)/(?P<variant>eager|graph)-(?P<repeat>\d)\.log"},
                      variants=[{"name": "graph", "impl": "full_iteration"}], repeats=2)  # fmt: skip
    assert cli_main(["ingest", str(spec_path), "--results", str(tmp_path / "results")]) == 0
    cmp = pd.read_parquet(tmp_path / "results" / "h200-by-hand" / "comparison.parquet")
    assert cmp.verdict.tolist() == ["not-comparable"]
    assert "container: eager nemo-25.09 vs graph nemo-25.11" in cmp.reason.iloc[0] and pd.isna(cmp.speedup.iloc[0])


def test_mapping_problems_are_listed_with_what_to_do(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copyfile(LOGS / "megatron-h200" / "eager.log", folder / "eager.log")
    shutil.copyfile(LOGS / "megatron-h200" / "te_attn.log", folder / "te_attn.log")
    shutil.copyfile(LOGS / "megatron-h200" / "te_attn.log", folder / "te-attn.log")
    spec = load_spec(_spec(tmp_path, source={"logs": str(folder), "pattern": r"(?P<variant>[a-z_-]+)\.log"},
                           variants=[BY_HAND["variants"][0]]))  # fmt: skip
    with pytest.raises(IngestError) as exc:
        match_files(spec)
    text = str(exc.value)
    assert "te-attn.log: variant 'te-attn' is neither the eager text 'eager' nor a variant of the sweep (te_attn)" in text
    spec = load_spec(_spec(tmp_path, source={"logs": str(folder), "pattern": r"(?P<variant>eager|te_attn)\.log"},
                           variants=BY_HAND["variants"][:2]))  # fmt: skip
    with pytest.raises(IngestError, match=r"no log for 1 run\(s\) of the sweep: s1024-\w+\.local_full\.r1; lower repeats"):
        match_files(spec)


def test_spec_pattern_errors_name_the_key(tmp_path):
    with pytest.raises(SpecError, match=r"source.pattern.*needs a named group \(\?P<variant>"):
        load_spec(_spec(tmp_path, source={"logs": "x", "pattern": r".*\.log"}))
    with pytest.raises(SpecError, match=r"source.pattern.*unknown named group\(s\) node"):
        load_spec(_spec(tmp_path, source={"logs": "x", "pattern": r"(?P<node>\w+)-(?P<variant>\w+)\.log"}))


def test_dotted_axis_names_are_groups_with_underscores(tmp_path):
    folder = tmp_path / "logs"
    for s in (1024, 2048):
        for arm in ("eager", "graph"):
            (folder / f"s{s}").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(LOGS / "h200-probe" / f"medium-{arm}-1.log", folder / f"s{s}" / f"{arm}.log")
    changes = dict(axes={"model.seq_length": [1024, 2048]}, variants=[{"name": "graph", "impl": "full_iteration"}])
    spec = load_spec(_spec(tmp_path, source={"logs": str(folder),
                                             "pattern": r"s(?P<model_seq_length>\d+)/(?P<variant>eager|graph)\.log"},
                           **changes))  # fmt: skip
    files = match_files(spec).files
    assert {rid: files[rid][0].relative_to(folder).as_posix() for rid in files} == {
        r.run_id: f"s{r.shape['model.seq_length']}/{r.arm}.log" for r in spec.runs()
    }
    with pytest.raises(SpecError, match="axes with several values need a named group each: model_seq_length"):
        load_spec(_spec(tmp_path, source={"logs": str(folder), "pattern": r"(?P<variant>eager|graph)\.log"}, **changes))
