from pathlib import Path

from graphsweep.run.ingest import write_run
from graphsweep.smk import logging_to, one_line_errors, run_dir
from graphsweep.store.runfiles import write_run_config

with logging_to(snakemake.log[0]), one_line_errors():
    run = run_dir(snakemake.output.config, snakemake.output.run, snakemake.output.log, snakemake.output.ranks)
    write_run_config(snakemake.params.config, run.config)  # the run's record from the plan (this rule's params)
    logs = [Path(p) for p in snakemake.input.logs]
    record = write_run(run, logs, dict(snakemake.params.facts), snakemake.params.seed, Path(snakemake.params.root))
    print(f"ingested {run.run_id} from {', '.join(f['path'] for f in record['source_files'])} (nothing submitted)")
