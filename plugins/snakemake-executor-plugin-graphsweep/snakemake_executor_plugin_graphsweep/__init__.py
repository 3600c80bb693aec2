"""Snakemake's name for the graphsweep executor (graphsweep/run/executor.py): `snakemake --executor graphsweep`.

Snakemake finds executor plugins as top-level packages named `snakemake_executor_plugin_*` on sys.path, which an
editable install of graphsweep does not put there; this package is installed beside it (`make install`)."""

from graphsweep.run.executor import Executor, common_settings

__all__ = ["Executor", "common_settings"]
