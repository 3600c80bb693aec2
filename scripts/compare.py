from pathlib import Path

from graphsweep.judge.compare import compare
from graphsweep.smk import logging_to

with logging_to(snakemake.log[0]):
    compare(Path(snakemake.input.plan), Path(snakemake.input.runs), Path(snakemake.input.iterations), Path(snakemake.output[0]))
