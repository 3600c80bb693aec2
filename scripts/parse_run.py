from graphsweep.parse.run_dir import parse_rule
from graphsweep.smk import logging_to, one_line_errors

with logging_to(snakemake.log[0]), one_line_errors():
    parse_rule(snakemake.input, snakemake.output)  # the run folder of exactly the files the rule declares
