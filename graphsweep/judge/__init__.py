"""Stage: judge. Every cell's graph runs against its shape's eager baseline, into comparison.parquet.

    verdict   judge_cell: the numbers of one cell (interval, verdict, memory) from its runs
    centre    an arm's step time (the geometric mean of its jobs' medians)
    compare   the sweep's cells from plan.parquet, runs.parquet and iterations.parquet
"""
