"""The report of the real H200 builtin sweep (results/examples/h200-builtin/runs: 45 jobs on one NVIDIA H200),
re-derived on this CPU by the workflow as tools/rederive_examples.sh does it, then opened in headless Chromium with
the command that makes docs/report-screenshot.png (tools/report_screenshot.sh).

What it checks is what a performance engineer reads: a recommendation per shape (with the flags to paste), one grid
of shapes x variants (the sweep's shapes are `include:` shapes, not a grid of two axes), no `nan` for the axis the
first two shapes leave unset, reasons cut at a word.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from graphsweep.report.data import load_tables
from graphsweep.report.words import display_reason
from graphsweep.report.colours import VERDICT_COLORS
from tests.support import ROOT, chromium, copy_workflow, run_chromium, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.snakemake]  # each test reads the re-derived sweep

SWEEP = "h200-builtin"
RUNS = ROOT / "results" / "examples" / SWEEP / "runs"
LAUNCH, COMPUTE, CAPPED = "h256-nh4-l4-s128-mb1-b444f4", "h4096-nh32-l4-s2048-mb4-cfca67", \
    "h1024-nh16-l8-s512-mb2-memfrac0.0113-6c9bec"  # fmt: skip


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folders only, in a user's working directory; Snakemake plans, parses, compares and reports."""
    if not RUNS.is_dir():
        pytest.fail(f"{RUNS} is missing: the real H200 run folders are part of the repository")
    workdir = copy_workflow(tmp_path_factory.mktemp("h200"))
    out = workdir / "results" / SWEEP
    shutil.copytree(RUNS, out / "runs", ignore=shutil.ignore_patterns("iterations.parquet", "summary.json"))
    for f in out.glob("runs/*/*"):
        f.touch()  # newer than anything derived: nothing is submitted
    proc = snakemake(workdir, "--cores", "4", "--config", f"spec=configs/examples/{SWEEP}.yaml", "--rerun-triggers",
                     "mtime", "--allowed-rules", "plan", "parse", "aggregate", "compare", "report", "all")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out


def _recommendations(md: str) -> list[str]:
    return md.split("### Recommendations", 1)[1].split("### Cells", 1)[0].strip().splitlines()


def test_markdown_recommends_per_shape_with_the_flags_to_paste(sweep_dir: Path) -> None:
    lines = _recommendations((sweep_dir / "report.md").read_text())
    shapes = [line for line in lines if line.startswith("- ")]
    assert len(shapes) == 3
    launch, compute, capped = shapes
    # launch-bound: the full-iteration graph; attn+mlp is undecided at the decision loop's first look (its repeated
    # interval straddles 1 + margin)
    assert launch.startswith("- **hidden=256 heads=4 layers=4 seq_length=128 micro_batch=1**: **use full_iteration**: "
                             "6.89× [")  # fmt: skip
    assert "9.42 → 1.37 ms per step, for +0.09 GB steady-state reserved memory" in launch  # 9.42 / 1.37 = 6.88: the ratio
    body = "\n".join(lines)
    assert body.count("  - trainer flags to paste: `--variant full_iteration`") == 2
    assert "attn+mlp 1.83× [0.82, 4.10], about 4 repeats per arm would decide it" in body
    assert "the GPU is busy 9% of an eager step (0.8 of 9.4 ms): a graph can win up to 11.48x" in body
    # compute-bound: undecided at look 1 (no further rounds run here), with the leader, what would decide it and the
    # command that continues; full_iteration's slowdown is beyond the margin on its own but not through the family check
    assert compute.startswith("- **hidden=4096 heads=32 layers=4 seq_length=2048 micro_batch=4**: **undecided**: mlp "
                              "leads at 0.99× [0.97, 1.02] (")  # fmt: skip
    assert "about 6 repeats per arm" in compute and "continue the sweep with `graphsweep more-repeats --run" in compute
    assert ("full_iteration 0.95× [0.92, 0.98], decided on its own but not by the sweep's family check (q 0.123)"
            in body)
    assert re.search(r"undecided \(`graphsweep more-repeats` plans the repeats\): full_iteration 0\.95× \[[^]]+\], [^;]+; "
                     r"attn 0\.99× \[[^]]+\], about \d+ repeats per arm would decide it; attn\+mlp", body)  # fmt: skip
    # memory-capped: full_iteration fits and is faster; every scoped graph ran out of memory
    assert capped.startswith("- **hidden=1024 heads=16 layers=8 seq_length=512 micro_batch=2 mem_fraction=0.0113**: "
                             "**use full_iteration**: 3.04× [")  # fmt: skip
    assert "  - attn, mlp and attn+mlp ran out of memory where eager fit" in body


def test_html_draws_one_grid_of_shapes_by_variants(sweep_dir: Path) -> None:
    page = (sweep_dir / "report.html").read_text()
    assert "Speedup by" not in page  # 3 include: shapes are no grid of hidden x heads
    grid = re.search(r'<table class="heatmap shape-grid" id="shapes-by-variants">(.*?)</table>', page, re.S).group(1)
    head = re.findall(r"<th[^>]*>([^<]*)</th>", grid.split("</thead>")[0])
    assert head == ["hidden", "heads", "layers", "seq_length", "micro_batch", "mem_fraction", "full_iteration", "attn",
                    "mlp", "attn+mlp"]  # fmt: skip
    rows = re.findall(r"<tr>(.*?)</tr>", grid.split("<tbody>")[1], re.S)
    assert len(rows) == 3 and all(len(re.findall(r'<td class="hm v-', r)) == 4 for r in rows)
    verdicts = [re.findall(r'<td class="hm v-([a-z-]+)"', r) for r in rows]
    assert verdicts == [["speedup", "inconclusive", "inconclusive", "inconclusive"],
                        ["inconclusive", "inconclusive", "inconclusive", "inconclusive"],
                        ["speedup", "oom", "oom", "oom"]]  # fmt: skip
    recs = page.split('<h2 id="recommendations">', 1)[1].split("</table>", 1)[0]
    assert len(re.findall(r"<tr data-shape=", recs)) == 3
    assert recs.count('<code class="paste">--variant full_iteration</code>') == 2


def test_no_nan_and_no_reason_cut_inside_a_word(sweep_dir: Path) -> None:
    md, page = (sweep_dir / "report.md").read_text(), (sweep_dir / "report.html").read_text()
    assert not re.search(r"\bnan\b", md, re.I) and not re.search(r"\bnan\b", page, re.I)
    t = load_tables(*(sweep_dir / f"{n}.parquet" for n in ("plan", "runs", "iterations", "comparison")))
    full = [display_reason(r) for _, r in t.comparison.iterrows()]  # what the table cell would hold uncut
    rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in md.split("### Cells", 1)[1].splitlines() if line.startswith("| ")]
    cut = 0
    for row in rows[2:]:  # after the header and the alignment row
        reason = row[-1].strip().replace("\\|", "|")
        if reason.endswith(" …"):
            cut += 1
            kept = reason[:-2]
            assert any(f.startswith(kept) and f[len(kept)] in " ;,:(" for f in full), reason
    assert cut >= 3  # the three OOM reasons (and reasons carrying the shape's GPU-busy line) are long; each ends at a word


@pytest.mark.chromium
def test_chromium_renders_recommendations_and_grid(sweep_dir: Path, tmp_path: Path) -> None:
    exe = chromium()
    dom = run_chromium(exe, tmp_path / "profile", "--dump-dom", (sweep_dir / "report.html").as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert re.search(r'<h2 id="recommendations">Recommendations</h2>', dom.stdout)
    assert len(re.findall(r"<tr data-shape=", dom.stdout)) == 3
    assert 'id="shapes-by-variants"' in dom.stdout and dom.stdout.count('<svg class="plot') >= 2
    # the documented screenshot command (docs/report-screenshot.png), on this re-derived report
    shot = tmp_path / "report.png"
    res = subprocess.run(["bash", str(ROOT / "tools" / "report_screenshot.sh"), str(sweep_dir / "report.html"), str(shot)],
                         capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert res.returncode == 0 and shot.exists(), res.stdout + res.stderr
    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, 2400)
    colours = img.getcolors(maxcolors=img.size[0] * img.size[1])
    assert len(colours) > 500  # text, badges and squares: not a blank page
    white = max(n for n, c in colours if c == (255, 255, 255)) / (img.size[0] * img.size[1])
    assert white < 0.9
    painted = {c for _, c in colours}
    for verdict in ("speedup", "inconclusive", "oom"):  # badges and squares in the colours of the verdicts it holds
        rgb = tuple(int(VERDICT_COLORS[verdict][i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in painted, verdict
