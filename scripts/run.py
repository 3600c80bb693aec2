import sys
from pathlib import Path

from graphsweep.smk import logging_to, one_line_errors, run_dir
from graphsweep.run.runrule import execute_run
from graphsweep.layout import JobsDir
from graphsweep.store.runfiles import write_run_config


def say(message):
    # The rule's log keeps everything; the controller's terminal shows progress lines.
    print(message, flush=True)
    print(f"[graphsweep] {message}", file=sys.__stderr__, flush=True)


try:
    with logging_to(snakemake.log[0]), one_line_errors():
        run = run_dir(snakemake.output.config, snakemake.output.run, snakemake.output.log, snakemake.output.ranks)
        # the run's launch record is this rule's params (Snakemake reruns the run when it changes): written first
        write_run_config(run, snakemake.params.config)
        execute_run(
            run,
            JobsDir(snakemake.params.jobs_dir),
            attempt=int(snakemake.resources.attempt),
            timeout_min=int(snakemake.resources.timeout_min),
            # Operational settings come from the config (the Slurm profile), not params: changing a partition
            # must not re-queue finished runs.
            cluster=snakemake.config.get("cluster"),
            slurm=snakemake.config.get("slurm"),
            say=say,
            gate=[Path(p) for p in snakemake.input.gate],  # spec launch_gate: its shape's eager summaries
        )
except KeyboardInterrupt:
    # Ctrl-C reaches every waiting run: no traceback each; the controller's last line says how to resume
    sys.exit(130)
