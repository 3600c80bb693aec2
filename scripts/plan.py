from graphsweep.plan import write_plan
from graphsweep.smk import logging_to
from graphsweep.spec import load_spec

with logging_to(snakemake.log[0]):
    write_plan(load_spec(snakemake.input.spec), snakemake.output[0])
