from graphsweep.parse.run_dir import parse_run_dir
from graphsweep.smk import logging_to, one_line_errors, run_dir

with logging_to(snakemake.log[0]), one_line_errors():
    # the run folder of exactly the files the rule declares (RunDir.of refuses any other)
    parse_run_dir(run_dir(snakemake.input.config, snakemake.input.run, snakemake.input.log, *snakemake.input.ranks,
                          snakemake.output.iterations, snakemake.output.summary))
