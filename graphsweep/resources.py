"""Where graphsweep's own files are: the data the package ships and the folders around it. The one module that
knows the package's place on disk (tests/house/test_architecture.py holds every other module of the package to that).

Package data (shipped in the wheel, pyproject.toml package-data; read through importlib.resources, so an installed
graphsweep needs no checkout):
- ``schemas/sweep.schema.yaml``: the sweep spec's JSON schema, with its defaults;
- ``schemas/config.schema.yaml``: the workflow's own settings (configs/config.yaml, ``--config``);
- ``catalogues/megatron-bridge-0.6.2.json``: Megatron Bridge's recipe names and config keys of one release
  (tools/bridge_catalogue.py), what a megatron_bridge spec's keys are checked against (workloads/bridge_keys.py).
``report/templates/`` ships too: report/render.py loads the report's templates and stylesheet with the package.

Folders: :data:`SOURCE_ROOT` holds the ``graphsweep`` package (a checkout, or site-packages of an installed one);
:func:`workflow_dir` is the checkout whose Snakefile runs sweeps. Standard library only: the ground floor, which the
entry programs import inside the user's container.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

PACKAGE = "graphsweep"
SWEEP_SCHEMA = "schemas/sweep.schema.yaml"
CONFIG_SCHEMA = "schemas/config.schema.yaml"
BRIDGE_CATALOGUE = "catalogues/megatron-bridge-0.6.2.json"  # Bridge 0.6.2 / Core 0.19.2: regenerate per release

# The folder that holds the graphsweep package: the repository in a clone (editable install), site-packages in an
# installed one. The megatron_bridge workload runs graphsweep/entry/megatron_entry.py by path from here and mounts it
# into the container, unless the profile's slurm.graphsweep_dir names where it is on the cluster.
SOURCE_ROOT = Path(__file__).resolve().parent.parent


class WorkflowMissing(RuntimeError):
    """The Snakemake workflow (Snakefile, rules/, scripts/) lives in a graphsweep checkout, not in the package."""


def read_text(name: str) -> str:
    """A data file of the package, e.g. ``read_text(SWEEP_SCHEMA)``."""
    return importlib.resources.files(PACKAGE).joinpath(name).read_text(encoding="utf-8")


def data_file(name: str) -> Path:
    """The path of a data file of the package, for tools that take a path (Snakemake's ``validate``)."""
    path = Path(str(importlib.resources.files(PACKAGE).joinpath(name)))
    if not path.is_file():
        raise FileNotFoundError(f"{name}: not a file of the installed graphsweep package ({path})")
    return path


def checkout() -> Path | None:
    """The graphsweep repository this package runs from, or None for an installed package (no Snakefile beside it)."""
    return SOURCE_ROOT if (SOURCE_ROOT / "Snakefile").is_file() else None


def workflow_dir() -> Path:
    """The checkout whose Snakefile runs a sweep; WorkflowMissing (saying what to do) for an installed package."""
    repo = checkout()
    if repo is None:
        raise WorkflowMissing(
            f"the sweep workflow (Snakefile, rules/, scripts/) comes with a graphsweep checkout, and this graphsweep "
            f"is installed without one ({SOURCE_ROOT / PACKAGE}): clone the repository and run it from there "
            "(pip install -e .), or run snakemake in the checkout"
        )
    return repo
