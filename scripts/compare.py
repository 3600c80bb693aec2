from pathlib import Path

from graphsweep.judge.compare import compare
from graphsweep.plan.looks import read_look
from graphsweep.smk import logging_to, one_line_errors

with logging_to(snakemake.log[0]), one_line_errors():
    # the decision loop is over at its final look: the cells it left live are out of budget, later runs not seen
    final = read_look(snakemake.input.look)
    compare(Path(snakemake.input.plan), Path(snakemake.input.runs), Path(snakemake.input.iterations),
            Path(snakemake.output[0]), loop_over=True, upto=final.look, loop_end=final.end)
