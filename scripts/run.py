import sys
from pathlib import Path

from graphsweep.smk import logging_to, one_line_errors, run_config, run_dir
from graphsweep.run.runrule import execute_run
from graphsweep.layout import JobsDir


def say(message):
    # The rule's log keeps everything; the controller's terminal shows progress lines.
    print(message, flush=True)
    print(f"[graphsweep] {message}", file=sys.__stderr__, flush=True)


try:
    with logging_to(snakemake.log[0]), one_line_errors():
        # Snakemake's local executor: the run's sequence with a local job, waited for in this process (a run on Slurm
        # is the graphsweep executor's: --profile slurm)
        config_file, config = run_config(snakemake.input, snakemake.output, snakemake.params)
        execute_run(
            run_dir(config_file, snakemake.output.run, snakemake.output.log, snakemake.output.ranks),
            JobsDir(snakemake.params.jobs_dir),
            attempt=int(snakemake.resources.attempt),
            timeout_min=int(snakemake.resources.timeout_min),
            # Operational settings come from the config, not params: changing them must not re-queue finished runs.
            cluster=snakemake.config.get("cluster"),
            slurm=snakemake.config.get("slurm"),
            say=say,
            gate=[Path(p) for p in snakemake.input.gate],  # spec launch_gate: its shape's eager summaries
            config=config,  # the launch record, where the rule hands it over (else config.yaml is read)
            config_to=config_file if config is not None else None,
        )
except KeyboardInterrupt:
    # Ctrl-C (or SIGTERM) reaches every waiting run: no traceback each; the controller's last line says how to resume
    sys.exit(130)
