from graphsweep.plan.sweep_plan import write_plan_files
from graphsweep.smk import logging_to, one_line_errors

with logging_to(snakemake.log[0]), one_line_errors():
    # the controller's plan of this invocation, passed as a param (not recomputed: rules/plan.smk says why)
    write_plan_files(snakemake.params.plan, snakemake.output[0])
