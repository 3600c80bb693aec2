from pathlib import Path

from graphsweep.judge.compare import compare
from graphsweep.smk import logging_to, one_line_errors

with logging_to(snakemake.log[0]), one_line_errors():
    compare(Path(snakemake.input.plan), Path(snakemake.input.runs), Path(snakemake.input.iterations), Path(snakemake.output[0]))
