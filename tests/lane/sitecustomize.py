"""The lanes' guard (`pytest --lane fast` or `--lane cpu`, tests/conftest.py), also in every Python process the tests start.

A test of the fast lane may start light processes (a graphsweep CLI, a test's own script, a stand-in for sacct), not
one of HEAVY: starting one fails with the marker the test lacks. A test of the cpu lane (make test) may start anything
but a Slurm command: the slurm lane runs beside it and takes the cluster's node down in its fault tests. conftest.py
installs the guard in pytest's process and puts this folder on the children's PYTHONPATH with GRAPHSWEEP_TEST_LANE
set to the lane, so Python imports this file at start in every child too (a submitit job, the `graphsweep ingest`
CLI) and their own children are guarded as well. Standard library only: it runs before anything else there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

LANE_ENV = "GRAPHSWEEP_TEST_LANE"
# Markers of the tests that leave the process for something heavy, and how such a command line shows it: a program
# or module named as a word of it, or (with a space) a phrase in it.
HEAVY: dict[str, tuple[str, ...]] = {
    "slow": (),  # more than a few seconds, whatever it runs
    "snakemake": ("snakemake", "graphsweep.cli ingest"),
    "torch": ("torch.distributed.run", "graphsweep.entry.builtin_gpt", "import torch"),
    "chromium": ("chromium",),
    "slurm": ("sbatch", "srun", "squeue", "sacct", "scontrol", "scancel", "sinfo"),
    "megatron": (),  # the Bridge venv (GRAPHSWEEP_MEGATRON_PYTHON): its tests skip without it
}
# Lane -> the markers whose commands a test of that lane must carry the marker for.
GUARDED: dict[str, tuple[str, ...]] = {"fast": tuple(HEAVY), "cpu": ("slurm",)}


def heavy_marker(argv: Any, env: Any = None, markers: tuple[str, ...] = tuple(HEAVY)) -> str | None:
    """The marker (of `markers`) a test needs to start this command, or None for a light one."""
    words = [str(a) for a in argv] if isinstance(argv, (list, tuple)) else str(argv).split()
    line = " ".join(os.path.basename(w) if i == 0 else w for i, w in enumerate(words))
    if words and _stand_in(words[0], env):
        return None
    for marker in markers:
        for needle in HEAVY[marker]:
            if (" " in needle and needle in line) or any(os.path.basename(w) == needle for w in words):
                return marker
    return None


def _stand_in(program: str, env: Any) -> bool:
    """A script the test wrote in a temporary folder in place of a real program (a counting sacct)."""
    path = shutil.which(program, path=(env or os.environ).get("PATH"))
    return bool(path) and os.path.realpath(path).startswith(os.path.realpath(tempfile.gettempdir()) + os.sep)


def install(lane: str) -> None:
    start = subprocess.Popen.__init__
    markers = GUARDED[lane]

    def guarded(self: subprocess.Popen, args: Any, *a: Any, **kw: Any) -> None:
        if marker := heavy_marker(args, kw.get("env"), markers):
            shown = (args if isinstance(args, str) else " ".join(map(str, args)))[:200]
            test = os.environ.get("PYTEST_CURRENT_TEST", "a test").rsplit(" (", 1)[0]
            raise RuntimeError(f"{lane} lane: {test} starts `{shown}`: mark the test @pytest.mark.{marker} "
                               "(tests/lane/sitecustomize.py HEAVY)")
        start(self, args, *a, **kw)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]


if os.environ.get(LANE_ENV) in GUARDED:
    install(os.environ[LANE_ENV])
