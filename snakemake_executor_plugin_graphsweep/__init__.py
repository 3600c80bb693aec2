"""Snakemake's name for the graphsweep executor (graphsweep/run/executor.py): `snakemake --executor graphsweep`, the
Slurm profile's `executor: graphsweep`.

Snakemake finds executor plugins as top-level packages named `snakemake_executor_plugin_*` on sys.path
(snakemake_interface_common's registry: pkgutil.iter_modules). This one ships in the graphsweep distribution itself,
beside the graphsweep package (pyproject.toml), so every install has it: a wheel or `pip install .` puts it in
site-packages; an editable install (`pip install -e .`, make install, environment.yml) puts the repository root on
sys.path (pyproject.toml package-dir), where it is found too."""

from graphsweep.run.executor import Executor, common_settings

__all__ = ["Executor", "common_settings"]
