import yaml

from graphsweep.smk import logging_to

with logging_to(snakemake.log[0]), open(snakemake.output[0], "w") as f:
    yaml.safe_dump(snakemake.params.config, f, sort_keys=False)
