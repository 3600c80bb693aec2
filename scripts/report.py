from pathlib import Path

from graphsweep.report.write import write_reports
from graphsweep.smk import logging_to, one_line_errors

with logging_to(snakemake.log[0]), one_line_errors():
    write_reports(
        plan=Path(snakemake.input.plan),
        runs=Path(snakemake.input.runs),
        iterations=Path(snakemake.input.iterations),
        comparison=Path(snakemake.input.comparison),
        md_out=Path(snakemake.output.md),
        html_out=Path(snakemake.output.html),
    )
