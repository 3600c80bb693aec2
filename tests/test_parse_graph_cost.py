"""What a CUDA graph costs, as the parser reads it from real H200 logs: steady-state memory and capture time.

The logs are results/examples/*/runs/*/log.txt (../shared/fixtures/h200-pipeline/README.md says how they ran). They
come from the entry programs of 2026-12-01, which printed no peaks-reset marker and called the capture iteration's
excess `capture seconds`; the current entry's lines are checked on a copy with those lines inserted (named as such).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graphsweep import logformat as lf
from graphsweep.parse.run import parse_run
from graphsweep.parse.scan import scan_text

EXAMPLES = Path(__file__).resolve().parent.parent / "results" / "examples"
TINY = EXAMPLES / "megatron-tiny-vanilla-gpt" / "runs"
ATTN_MLP_R1 = TINY / "s1024-mb1-6d688f.attn+mlp.r1" / "log.txt"
EAGER_R1 = TINY / "s1024-mb1-6d688f.eager.r1" / "log.txt"
FULL_R1 = TINY / "s1024-mb1-6d688f.full_iteration.r1" / "log.txt"
BUILTIN_FULL = EXAMPLES / "h200-builtin" / "runs" / "h256-nh4-l4-s128-mb1-b444f4.full_iteration.r1" / "log.txt"


def summary(path: Path, arm: str):
    return parse_run([path], arm=arm, warmup=3).summary


def test_te_graph_memory_cost_shows_in_the_steady_window_not_in_the_whole_run_peak() -> None:
    graph, eager = summary(ATTN_MLP_R1, "graph"), summary(EAGER_R1, "eager")
    # mem-max-allocated peaks at iteration 2 (3.5805 GB, before capture) and is never reset in these logs: the
    # whole-run peak cannot tell the arms apart
    assert graph.peak_mem_gb == eager.peak_mem_gb == pytest.approx(3.5805)
    # after capture the graph arm holds more: mem-allocated 2.9041 -> 2.9337, mem-reserved 3.6239 -> 3.6994 GB
    assert (graph.steady_mem_allocated_gb, graph.steady_mem_reserved_gb) == (pytest.approx(2.9337),
                                                                            pytest.approx(3.6994))
    assert (eager.steady_mem_allocated_gb, eager.steady_mem_reserved_gb) == (pytest.approx(2.9041),
                                                                            pytest.approx(3.6239))
    assert graph.steady_mem_reserved_gb - eager.steady_mem_reserved_gb == pytest.approx(0.0755, abs=1e-4)
    # no `memory peaks reset` marker in a log of 2026-12-01: a steady peak is not known
    assert graph.steady_mem_peak_gb is None and eager.steady_mem_peak_gb is None


def test_iterations_table_has_reserved_memory_per_iteration() -> None:
    df = parse_run([ATTN_MLP_R1], arm="graph", warmup=3).iterations.set_index("iteration")
    assert df.loc[2, "mem_reserved_gb"] == pytest.approx(3.6239)  # Bridge's own line, before capture
    assert df.loc[4, "mem_reserved_gb"] == pytest.approx(3.6994)  # the entry's line, the graph pool included
    assert df.loc[2, "mem_max_reserved_gb"] == pytest.approx(3.6239)
    assert df["mem_reserved_gb"].isna().tolist() == [i == 3 for i in df.index]  # nobody prints after iteration 3


def test_current_entry_lines_give_the_steady_peak_and_the_capture_excess(tmp_path: Path) -> None:
    # Constructed: the real attn+mlp r1 log with the lines the current entry prints put where it prints them: the
    # peaks-reset marker right after its memory line for iteration 4 (warmup + 1), and the capture iteration's
    # excess under its new text. The H200 did not reset the peaks, so the value read is the log's own 3.5805 GB.
    text = ATTN_MLP_R1.read_text()
    after_4 = next(line for line in text.splitlines() if "(after 4 iterations) memory (GB)" in line)
    assert text.count("[graphsweep] capture seconds: 1.505\n") == 1
    text = text.replace(after_4 + "\n", after_4 + "\n" + lf.peaks_reset(4) + "\n")
    text = text.replace("[graphsweep] capture seconds: 1.505\n", lf.capture_iteration_excess(1.505) + "\n")
    log = tmp_path / "log.txt"
    log.write_text(text)
    s = summary(log, "graph")
    assert s.steady_mem_peak_gb == pytest.approx(3.5805)
    assert s.steady_mem_reserved_gb == pytest.approx(3.6994)
    assert (s.capture_s, s.capture_iteration_excess_s) == (pytest.approx(0.41580796241760254), 1.505)
    assert s.outcome == "completed" and s.capture_seen and s.replay_seen


def test_capture_time_columns_keep_one_meaning_each() -> None:
    te = summary(ATTN_MLP_R1, "graph")
    # MCore's `Time spent in CUDA Graphs capture on rank 0` (make_graphed_callables alone) and the old entry's
    # `capture seconds` (the capture iteration's wall time minus its eager median): two figures, two columns
    assert te.capture_s == pytest.approx(0.41580796241760254)
    assert te.capture_iteration_excess_s == 1.505
    full = summary(FULL_R1, "graph")
    assert full.capture_s is None  # MCore's full-iteration capture prints no time
    assert full.capture_iteration_excess_s == 0.043
    # the builtin's `capture seconds` times the capture call itself: it is capture_s there
    builtin = parse_run([BUILTIN_FULL], arm="graph", warmup=3).summary
    assert (builtin.capture_s, builtin.capture_iteration_excess_s) == (0.018, None)
    # that builtin (2026-12-01) printed three memory fields, no mem-reserved: no steady reserved figure there
    assert builtin.steady_mem_allocated_gb == pytest.approx(0.19551) and builtin.steady_mem_reserved_gb is None


def test_memory_line_round_trip_keeps_reserved_apart_from_its_peak() -> None:
    # the entry and the builtin print torch.cuda.memory_stats() with logformat.memory_line; after capture MCore
    # empties the cache (cuda_graphs.py _finish_capturing), so current reserved can sit below its peak
    stats = {"allocated_bytes.all.current": 2_933_700_000, "reserved_bytes.all.current": 3_699_400_000,
             "allocated_bytes.all.peak": 3_580_500_000, "reserved_bytes.all.peak": 3_750_000_000}
    fs = scan_text(lf.memory_line(0, 5, stats) + "\n")
    assert fs.memory[5] == [pytest.approx(2.9337), pytest.approx(3.5805), pytest.approx(3.75), pytest.approx(3.6994)]


def test_mcore_mb_memory_line_reserved_field() -> None:
    # MLM report_memory's format (ref §5.3); the numbers constructed with reserved below max reserved
    line = ("[Rank 4] (after 6 iterations) memory (MB) | allocated: 21540.77294921875 | max allocated: 25000.5 | "
            "reserved: 29000.0 | max reserved: 31336.0")
    fs = scan_text(line + "\n")
    assert fs.memory[6] == [pytest.approx(21540.77294921875 * lf.MIB_TO_GB), pytest.approx(25000.5 * lf.MIB_TO_GB),
                            pytest.approx(31336.0 * lf.MIB_TO_GB), pytest.approx(29000.0 * lf.MIB_TO_GB)]
