from pathlib import Path

from graphsweep.run.ingest import write_run
from graphsweep.smk import logging_to

with logging_to(snakemake.log[0]):
    run_dir = Path(snakemake.output.run).parent
    record = write_run(run_dir.name, [Path(p) for p in snakemake.input.logs], run_dir, dict(snakemake.params.facts),
                       snakemake.params.seed)
    print(f"ingested {run_dir.name} from {', '.join(f['path'] for f in record['source_files'])} (nothing submitted)")
