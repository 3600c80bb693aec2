from graphsweep.plan.sweep_plan import write_plan_files
from graphsweep.smk import logging_to, one_line_errors, run_dir

with logging_to(snakemake.log[0]), one_line_errors():
    # the controller's plan of this invocation, passed as a param (not recomputed: rules/plan.smk says why), and the
    # config.yaml of the runs whose config is missing or changed
    write_plan_files(
        snakemake.params.plan,
        snakemake.output.plan,
        [run_dir(path) for path in snakemake.output.configs],
        keep=snakemake.params.keep,
    )
