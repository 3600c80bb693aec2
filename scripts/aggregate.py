from pathlib import Path

from graphsweep.store.aggregate import aggregate
from graphsweep.smk import logging_to

with logging_to(snakemake.log[0]):
    aggregate(
        Path(snakemake.input.plan),
        [Path(d) for d in snakemake.params.run_dirs],
        Path(snakemake.output.runs),
        Path(snakemake.output.iterations),
    )
