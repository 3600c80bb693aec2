"""What a CUDA graph costs, as the parser reads it from real H200 logs: steady-state memory and capture time.

The logs are results/examples/*/runs/*/log.txt (docs/results-h200.md says how they ran). The dense Megatron
runs come from today's entry (peaks-reset marker, `capture iteration excess seconds`); the MoE runs from the entry
of 2026-12-01 morning, which printed neither and called the capture iteration's excess `capture seconds`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graphsweep import logformat as lf
from graphsweep.parse.run import parse_run
from graphsweep.parse.scan import scan_text
from tests.support import ROOT

EXAMPLES = ROOT / "results" / "examples"
TINY = EXAMPLES / "megatron-tiny-vanilla-gpt" / "runs"
ATTN_MLP_R1 = TINY / "s1024-mb1-6d688f.attn+mlp.r1" / "log.txt"
EAGER_R1 = TINY / "s1024-mb1-6d688f.eager.r1" / "log.txt"
FULL_R1 = TINY / "s1024-mb1-6d688f.full_iteration.r1" / "log.txt"
MOE_ATTN_R1 = EXAMPLES / "megatron-tiny-moe" / "runs" / "s1024-mb1-016c0b.attn.r1" / "log.txt"
BUILTIN_FULL = (ROOT / "benchmarks" / "data" / "h200-builtin-sweep-a" / "runs" /
                "h256-nh4-l4-s128-mb1-b444f4.full_iteration.r1" / "log.txt")  # the earlier builtin sweep's


def summary(path: Path, arm: str):
    return parse_run([path], arm=arm, warmup=3).summary


def test_te_graph_memory_cost_shows_in_the_steady_window_not_in_the_whole_run_peak() -> None:
    graph, eager = summary(ATTN_MLP_R1, "graph"), summary(EAGER_R1, "eager")
    # mem-max-allocated peaks at iteration 2 (3.5805 GB, before capture) in both arms: the whole-run peak cannot
    # tell them apart
    assert graph.peak_mem_gb == eager.peak_mem_gb == pytest.approx(3.5805)
    assert graph.peak_mem_before_capture_gb == pytest.approx(3.5805)
    # after capture the graph arm holds more: mem-allocated 2.9041 -> 2.9337, mem-reserved 3.6239 -> 3.6994 GB
    assert (graph.steady_mem_allocated_gb, graph.steady_mem_reserved_gb) == (pytest.approx(2.9337),
                                                                            pytest.approx(3.6994))
    assert (eager.steady_mem_allocated_gb, eager.steady_mem_reserved_gb) == (pytest.approx(2.9041),
                                                                            pytest.approx(3.6239))
    assert graph.steady_mem_reserved_gb - eager.steady_mem_reserved_gb == pytest.approx(0.0755, abs=1e-4)
    # the entry reset the peaks after iteration 4 in both arms: the steady window's own peaks. Eager still reaches
    # its iteration-2 peak every step; the graphed layers' activations stay in the graph pool, counted once
    assert lf.peaks_reset(4) in ATTN_MLP_R1.read_text() and lf.peaks_reset(4) in EAGER_R1.read_text()
    assert (eager.steady_mem_peak_gb, graph.steady_mem_peak_gb) == (pytest.approx(3.5805), pytest.approx(3.2656))


def test_full_iteration_whole_run_peak_is_the_capture() -> None:
    full = summary(FULL_R1, "graph")
    # capture itself (iteration 4) took the run's peak, above the eager iterations before it; the steady window
    # then holds a constant 2.9723 GB: every tensor lives in the graph's pool
    assert (full.peak_mem_before_capture_gb, full.peak_mem_gb) == (pytest.approx(3.5816), pytest.approx(3.6152))
    assert full.steady_mem_peak_gb == full.steady_mem_allocated_gb == pytest.approx(2.9723)


def test_iterations_table_has_reserved_memory_per_iteration() -> None:
    df = parse_run([ATTN_MLP_R1], arm="graph", warmup=3).iterations.set_index("iteration")
    assert df.loc[2, "mem_reserved_gb"] == pytest.approx(3.6239)  # Bridge's own line, before capture
    assert df.loc[4, "mem_reserved_gb"] == pytest.approx(3.6994)  # the entry's line, the graph pool included
    assert df.loc[2, "mem_max_reserved_gb"] == pytest.approx(3.6239)
    # Bridge prints after iterations 1 and 2, the entry from the capture iteration on: nobody after iteration 3
    assert df["mem_reserved_gb"].isna().tolist() == [i == 3 for i in df.index]


def test_capture_time_columns_keep_one_meaning_each() -> None:
    te = summary(ATTN_MLP_R1, "graph")
    # MCore's `Time spent in CUDA Graphs capture on rank 0` (make_graphed_callables alone) and the entry's
    # `capture iteration excess seconds` (the capture iteration's wall time minus its eager median): two columns
    assert lf.capture_iteration_excess(1.651) in ATTN_MLP_R1.read_text()
    assert te.capture_s == pytest.approx(0.435929536819458)
    assert te.capture_iteration_excess_s == 1.651
    assert te.outcome == "completed" and te.capture_seen and te.replay_seen and te.capture_iteration == 4
    full = summary(FULL_R1, "graph")
    assert full.capture_s is None  # MCore's full-iteration capture prints no time
    assert full.capture_iteration_excess_s == 0.048
    # the older entry's `capture seconds` was the same excess under another name (the MoE runs printed it)
    moe = summary(MOE_ATTN_R1, "graph")
    assert "[graphsweep] capture seconds: 1.528\n" in MOE_ATTN_R1.read_text()
    assert moe.capture_iteration_excess_s == 1.528 and 0.2 < moe.capture_s < 1.0
    assert moe.steady_mem_peak_gb is None  # no peaks-reset marker in that log: a steady peak is not known
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
    [fs] = scan_text(lf.memory_line(0, 5, stats) + "\n")
    assert fs.memory[5] == [pytest.approx(2.9337), pytest.approx(3.5805), pytest.approx(3.75), pytest.approx(3.6994)]


def test_mcore_mb_memory_line_reserved_field() -> None:
    # MLM report_memory's format (docs/megatron-facts.md §5.3); the numbers constructed with reserved below max reserved
    line = ("[Rank 4] (after 6 iterations) memory (MB) | allocated: 21540.77294921875 | max allocated: 25000.5 | "
            "reserved: 29000.0 | max reserved: 31336.0")
    [fs] = scan_text(line + "\n")
    assert fs.memory[6] == [pytest.approx(21540.77294921875 * lf.MIB_TO_GB), pytest.approx(25000.5 * lf.MIB_TO_GB),
                            pytest.approx(31336.0 * lf.MIB_TO_GB), pytest.approx(29000.0 * lf.MIB_TO_GB)]
