from graphsweep.plan.planner import write_run_config
from graphsweep.smk import logging_to, one_line_errors, run_dir

with logging_to(snakemake.log[0]), one_line_errors():
    # the run's part of this invocation's plan (params: a changed command re-queues exactly that run)
    write_run_config(snakemake.params.config, run_dir(snakemake.output[0]))
