from pathlib import Path

from graphsweep.store.aggregate import aggregate
from graphsweep.smk import logging_to, one_line_errors, run_dirs

with logging_to(snakemake.log[0]), one_line_errors():
    aggregate(
        Path(snakemake.input.plan),
        # one RunDir per run from the declared per-run records (run.json, summary.json, iterations.parquet)
        run_dirs(run=snakemake.input.runs, summary=snakemake.input.summaries, iterations=snakemake.input.iterations),
        Path(snakemake.output.runs),
        Path(snakemake.output.iterations),
    )
