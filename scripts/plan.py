from graphsweep.plan import write_plan
from graphsweep.repeats import apply_extra
from graphsweep.smk import logging_to
from graphsweep.spec import load_spec

with logging_to(snakemake.log[0]):
    # with the extra repeats `graphsweep more-repeats` asked for (results/{sweep}/extra_repeats.yaml), as the rules see it
    write_plan(apply_extra(load_spec(snakemake.input.spec), snakemake.wildcards.results), snakemake.output[0])
