from pathlib import Path

from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.smk import logging_to

with logging_to(snakemake.log[0]):
    parse_run_dir(
        Path(snakemake.input.run).parent,
        iterations_out=Path(snakemake.output.iterations),
        summary_out=Path(snakemake.output.summary),
    )
