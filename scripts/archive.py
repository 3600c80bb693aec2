import sys

from graphsweep.store.archive import make_archive
from graphsweep.smk import logging_to, setting_on

include_logs = setting_on(snakemake.params.logs)
with logging_to(snakemake.log[0]):
    path = make_archive(snakemake.params.sweep_dir, snakemake.params.spec, include_logs=include_logs)
    message = (f"graphsweep: archived {snakemake.params.sweep_dir} -> {path} (logs {'in' if include_logs else 'left out'}); "
               f"check it with: graphsweep verify-archive {path}")
    print(message)
print(message, file=sys.__stderr__, flush=True)  # the path belongs on the terminal too
