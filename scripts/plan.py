from graphsweep.plan.sweep_plan import write_plan_file
from graphsweep.smk import logging_to, one_line_errors

with logging_to(snakemake.log[0]), one_line_errors():
    # this invocation's plan, made again from the spec as the controller made it (rules/plan.smk says why), checked
    # against the controller's digest so that the job writes exactly what the DAG was built from
    write_plan_file(snakemake.input.spec, snakemake.params.results, snakemake.params.cluster, snakemake.params.digest,
                    snakemake.output.plan)
