from pathlib import Path

from graphsweep.layout import SweepPaths
from graphsweep.plan.decide import take_look
from graphsweep.plan.looks import read_look, write_look
from graphsweep.smk import logging_to, one_line_errors

with logging_to(snakemake.log[0]), one_line_errors():
    k = int(snakemake.wildcards.look)
    previous = read_look(snakemake.input.previous) if "previous" in snakemake.input.keys() else None
    record = take_look(k, Path(snakemake.input.plan), SweepPaths.of(snakemake.params.sweep_dir), previous,
                       rounds=bool(snakemake.params.rounds))
    write_look(record, snakemake.output[0])
    print(f"look {k}: {record.repeats} jobs per arm, {len(record.runs)} runs judged, "
          f"{len(record.next_runs)} to run next, end: {record.end or 'goes on'}")
