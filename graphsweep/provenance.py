"""What produced a run, and whether two runs may be compared.

`collect(env)` runs inside the job (graphsweep.entry.job.job_main) and returns a JSON-able dict stored in run.json
under "provenance": graphsweep version and git SHA (+ dirty flag), the Megatron tree SHA when given, the
container image, the library versions, the GPUs (nvidia-smi), the node list, the environment variables that
change CUDA-graph behaviour and the Slurm job fields. It is fast (one nvidia-smi and one git call, torch is
probed in a subprocess with a time limit) and never raises: a probe that fails leaves its field empty and
a line in "errors".

On a Slurm cluster with containers the submitit task runs outside the container (design.md, Submission), so
the library versions it sees are the controller's. The training process inside the container prints `log_line()`
once per node; the parser keeps those lines in the run's summary.json (`provenance_lines`, graphsweep/parse) and
`merge()` lets them win for the versions, GPUs, container and environment.

`flatten()` turns a provenance dict into the `prov_*` columns of runs.parquet; `differences()` names the fields
in which the runs of a cell disagree (anchors idea 12: refuse to compare across comparability keys).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.metadata as md
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from graphsweep import __version__, harness, resources
from graphsweep import logformat as lf

PROVENANCE_VERSION = 1

# Environment variables that change what a CUDA graph run does (allocator, NCCL buffer registration and
# algorithms, stream/connection count, TE kernels, launch blocking). Exact names and prefixes.
GRAPH_ENV_NAMES = (
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG",
    "CUBLASLT_WORKSPACE_SIZE", "NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS", "TORCH_CUDNN_V8_API_DISABLED",
    "GRAPHSWEEP_PIN_CPUS", "GRAPHSWEEP_CPUS",  # spec quiet.pin_cpus (entry/affinity.py): where the rank's threads run
)  # fmt: skip
GRAPH_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "NVTE_", "TORCH_CUDNN_", "NVSHMEM_", "UB_")
# Recorded but never a reason to refuse a pair: they name places, not behaviour (per job by construction).
ENV_NOT_COMPARED = {"CUDA_VISIBLE_DEVICES", "NCCL_DEBUG_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "NCCL_TOPO_DUMP_FILE"}

SLURM_FIELDS = {
    "job_id": "SLURM_JOB_ID", "job_name": "SLURM_JOB_NAME", "partition": "SLURM_JOB_PARTITION",
    "account": "SLURM_JOB_ACCOUNT", "qos": "SLURM_JOB_QOS", "cluster": "SLURM_CLUSTER_NAME",
    "nodelist": "SLURM_JOB_NODELIST", "num_nodes": "SLURM_JOB_NUM_NODES", "ntasks": "SLURM_NTASKS",
    "gpus_on_node": "SLURM_GPUS_ON_NODE", "job_gpus": "SLURM_JOB_GPUS", "cpus_on_node": "SLURM_CPUS_ON_NODE",
    "constraints": "SLURM_JOB_CONSTRAINTS", "reservation": "SLURM_JOB_RESERVATION", "submit_host": "SLURM_SUBMIT_HOST",
    "array_job_id": "SLURM_ARRAY_JOB_ID", "array_task_id": "SLURM_ARRAY_TASK_ID", "restart_count": "SLURM_RESTART_COUNT",
}  # fmt: skip

# Container image, first found wins. Pyxis exports its srun/sbatch option as SLURM_SPANK_* variables.
CONTAINER_ENV = (
    "GRAPHSWEEP_CONTAINER_IMAGE",
    "SLURM_CONTAINER_IMAGE",
    "SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image",
    "SLURM_SPANK_PYXIS_CONTAINER_IMAGE",
    "PYXIS_CONTAINER_IMAGE",
    "ENROOT_IMAGE",
)
# Set by NVIDIA's NGC images: a tag-level fingerprint of the container even without the image name.
NGC_ENV = ("NVIDIA_PYTORCH_VERSION", "NVIDIA_BUILD_ID", "NEMO_VERSION", "CUDA_VERSION", "CUDNN_VERSION", "NCCL_VERSION")

# Distribution names per library (the first that is installed wins).
DISTRIBUTIONS = {
    "torch": ("torch",),
    "transformer_engine": ("transformer_engine", "transformer-engine", "transformer_engine_torch"),
    "megatron_core": ("megatron-core", "megatron_core"),
    "megatron_bridge": ("megatron-bridge", "megatron_bridge"),
    "nccl_wheel": ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"),
    "cudnn_wheel": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"),
}

_SMI_FIELDS = ("index", "name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm",
               "clocks.applications.graphics", "memory.total", "uuid")  # fmt: skip
_TORCH_PROBE = (
    "import json, torch\n"
    "d = {'torch': torch.__version__, 'cuda': torch.version.cuda}\n"
    "try:\n d['cudnn'] = torch.backends.cudnn.version()\nexcept Exception: pass\n"
    "try:\n v = torch.cuda.nccl.version(); d['nccl'] = '.'.join(map(str, v)) if isinstance(v, tuple) else v\n"
    "except Exception: pass\n"
    "print(json.dumps(d))\n"
)


# --------------------------------------------------------------------------------------------------
# Collect


def _run(argv: Sequence[str], timeout: float, cwd: str | None = None) -> str | None:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


def git_state(path: str | Path) -> dict[str, Any]:
    """SHA of HEAD and whether tracked files differ from it (untracked files are ignored), or {} outside git."""
    path = str(path)
    if not os.path.isdir(path):
        return {}
    sha = _run(["git", "-C", path, "rev-parse", "HEAD"], timeout=10)
    if not sha:
        return {}
    status = _run(["git", "-C", path, "status", "--porcelain", "--untracked-files=no"], timeout=20)
    return {"git_sha": sha.strip(), "git_dirty": None if status is None else bool(status.strip())}


def _dist_version(names: Iterable[str]) -> str | None:
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - a broken installation must not fail the probe
            continue
    return None


@functools.lru_cache(maxsize=8)
def _torch_probe(python: str, timeout: float) -> dict[str, Any] | None:
    """torch / CUDA / cuDNN / NCCL versions as that interpreter's torch reports them (once per process)."""
    out = _run([python, "-c", _TORCH_PROBE], timeout=timeout)
    try:
        return json.loads(out.strip().splitlines()[-1]) if out else None
    except ValueError:
        return None


def _cudnn_in_process(torch: Any, errors: list[str]) -> str | None:
    """cuDNN as this process loaded it. torch.backends.cudnn.version() raises when another library (TE on the H200
    image, 2026-12-01) loaded a cuDNN other than the one torch was built against: then the runtime version is what
    the process runs with, and the mismatch is recorded, never raised."""
    try:
        return str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None
    except Exception as exc:  # noqa: BLE001 - evidence, never a reason to fail the training
        errors.append(f"cudnn: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    try:
        major, minor, patch = torch._C._cudnn.getRuntimeVersion()
        return str(major * 10000 + minor * 100 + patch)
    except Exception:  # noqa: BLE001
        return None


def _torch_in_process(errors: list[str]) -> dict[str, Any]:
    """The CUDA stack as the already-imported torch of this process reports it (the training process)."""
    import torch

    out: dict[str, Any] = {"torch": getattr(torch, "__version__", None), "cuda": None, "cudnn": None, "nccl": None}
    try:
        out["cuda"] = torch.version.cuda
        out["cudnn"] = _cudnn_in_process(torch, errors)
        if torch.cuda.is_available():
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as exc:  # noqa: BLE001 - builds without NCCL, a broken CUDA stack: recorded, not raised
        errors.append(f"torch: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
    return out


def library_versions(
    python: str | None = None, torch_timeout: float = 60.0, probe_torch: bool = True
) -> tuple[dict[str, Any], list[str]]:
    """Python and the CUDA stack. torch's CUDA/cuDNN/NCCL versions need an import: in-process when torch is already
    imported (the training process), else in a child process, or not at all (probe_torch=False: the job wrapper, whose
    Python is not the training's when the training runs in a container; the training log carries them instead)."""
    errors: list[str] = []
    v: dict[str, Any] = {"python": ".".join(map(str, sys.version_info[:3]))}
    for key, names in DISTRIBUTIONS.items():
        v[key] = _dist_version(names)
    if v["torch"] and "torch" in sys.modules and python is None:
        v.update(_torch_in_process(errors))
    elif v["torch"] and probe_torch:
        probed = _torch_probe(python or sys.executable, torch_timeout)
        if probed:
            v.update({k: (str(val) if val is not None else None) for k, val in dict(probed).items()})
        else:
            errors.append("torch probe failed (python -c 'import torch')")
    v.setdefault("cuda", None)
    v["cudnn"] = v.get("cudnn") or v.pop("cudnn_wheel", None)
    v["nccl"] = v.get("nccl") or v.pop("nccl_wheel", None)
    v.pop("cudnn_wheel", None)
    v.pop("nccl_wheel", None)
    return v, errors


def _visible(rows: list[dict[str, Any]], visible: str | None) -> list[dict[str, Any]]:
    if not visible:
        return rows
    want = [x.strip() for x in visible.split(",") if x.strip()]
    return [r for r in rows if r.get("index") in want or r.get("uuid") in want]


def gpu_info(env: Mapping[str, str], timeout: float = 15.0) -> dict[str, Any]:
    """GPUs visible to the job (CUDA_VISIBLE_DEVICES applied) from nvidia-smi; {} without nvidia-smi."""
    out = _run(["nvidia-smi", f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader,nounits"], timeout)
    if not out:
        return {}
    rows = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == len(_SMI_FIELDS):
            rows.append({k: (None if p in ("[N/A]", "N/A", "[Not Supported]") else p) for k, p in zip(_SMI_FIELDS, parts)})
    rows = _visible(rows, env.get("CUDA_VISIBLE_DEVICES"))
    if not rows:
        return {"count": 0}

    def same(key: str) -> Any:
        values = {r.get(key) for r in rows}
        return rows[0].get(key) if len(values) == 1 else ";".join(sorted(str(x) for x in values))

    return {
        "name": same("name"),
        "count": len(rows),
        "driver": same("driver_version"),
        "memory_total_mib": same("memory.total"),
        "sm_clock_mhz": same("clocks.sm"),
        "mem_clock_mhz": same("clocks.mem"),
        "max_sm_clock_mhz": same("clocks.max.sm"),
        "app_sm_clock_mhz": same("clocks.applications.graphics"),
        "uuids": [r.get("uuid") for r in rows],
    }


def graph_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment variables that change CUDA-graph behaviour, sorted by name."""
    return {
        k: str(env[k]) for k in sorted(env) if k in GRAPH_ENV_NAMES or k.startswith(GRAPH_ENV_PREFIXES)
    }


def container_image(env: Mapping[str, str]) -> dict[str, Any]:
    for name in CONTAINER_ENV:
        if env.get(name):
            return {"image": env[name], "source": name}
    ngc = {k: env[k] for k in NGC_ENV if env.get(k)}
    return {"image": None, "source": None, **({"ngc": ngc} if ngc else {})}


def slurm_fields(env: Mapping[str, str]) -> dict[str, str]:
    return {k: env[v] for k, v in SLURM_FIELDS.items() if env.get(v)}


def megatron_tree(env: Mapping[str, str], bridge_dir: str | None = None) -> dict[str, Any]:
    """git state of the user's Megatron checkouts (GRAPHSWEEP_MEGATRON_DIR, workload.bridge_dir)."""
    out: dict[str, Any] = {}
    for label, path in (("megatron", env.get("GRAPHSWEEP_MEGATRON_DIR")), ("bridge", bridge_dir)):
        if path:
            out[label] = {"dir": path, **git_state(path)}
    return out


def collect(
    env: Mapping[str, str] | None = None, *, bridge_dir: str | None = None, probe_torch: bool = True
) -> dict[str, Any]:
    """Everything that identifies what produced a run. Never raises (a failing probe adds to "errors")."""
    env = dict(os.environ if env is None else env)
    errors: list[str] = []
    prov: dict[str, Any] = {"provenance_version": PROVENANCE_VERSION}

    def guard(key: str, fn: Any, *args: Any, **kw: Any) -> None:
        try:
            prov[key] = fn(*args, **kw)
        except Exception as exc:  # noqa: BLE001 - evidence, never a reason to lose a run
            prov[key] = None
            errors.append(f"{key}: {type(exc).__name__}: {exc}")

    prov["collected_utc"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    guard("host", socket.gethostname)
    try:
        repo = resources.checkout()  # an installed graphsweep has no commit of its own (its venv may sit in a clone)
        git = git_state(repo) if repo else {}
        prov["graphsweep"] = {"version": __version__, "path": str(resources.SOURCE_ROOT), **git,
                              "harness": harness.harness_sha()}
    except Exception as exc:  # noqa: BLE001
        errors.append(f"graphsweep: {exc}")
    guard("megatron", megatron_tree, env, bridge_dir or env.get("GRAPHSWEEP_BRIDGE_DIR"))
    guard("container", container_image, env)
    try:
        prov["versions"], errs = library_versions(env.get("GRAPHSWEEP_PYTHON"), probe_torch=probe_torch)
        errors += errs
    except Exception as exc:  # noqa: BLE001
        errors.append(f"versions: {exc}")
    guard("gpu", gpu_info, env)
    guard("slurm", slurm_fields, env)
    prov["nodes"] = env.get("SLURM_JOB_NODELIST") or prov.get("host")
    guard("env", graph_env, env)
    prov["errors"] = errors
    return prov


# --------------------------------------------------------------------------------------------------
# The training side (inside the container): one log line (logformat.PROVENANCE), kept by the parser


def log_line(env: Mapping[str, str] | None = None, bridge_dir: str | None = None, rank: int = 0) -> str:
    """`[graphsweep] provenance: {...}`: the versions, CUDA stack, GPUs, container and graph environment as the
    training process sees them (call it after torch is imported: CUDA/cuDNN/NCCL come from that torch). Never
    raises: what cannot be read is left out and named under "errors"."""
    env = dict(os.environ if env is None else env)
    errors: list[str] = []
    facts: dict[str, Any] = {"rank": rank, "errors": errors}

    def guard(key: str, fn: Any, *args: Any) -> None:
        try:
            facts[key] = fn(*args)
        except Exception as exc:  # noqa: BLE001 - evidence, never a reason to fail the training
            errors.append(f"{key}: {type(exc).__name__}: {exc}")

    def versions() -> dict[str, Any]:
        found, problems = library_versions()
        errors.extend(problems)
        return found

    guard("versions", versions)
    guard("megatron", megatron_tree, env, bridge_dir or env.get("GRAPHSWEEP_BRIDGE_DIR"))
    guard("container", container_image, env)
    guard("env", graph_env, env)
    guard("host", socket.gethostname)
    guard("gpu", gpu_info, env)  # nvidia-smi: no CUDA context is created in the training process
    return lf.provenance_line(facts)


# Fields of the training process's line that must agree across its nodes (one run, one software stack).
_RANK_FIELDS = (("versions",), ("container", "image"), ("gpu", "name"), ("gpu", "driver"), ("env",))


def merge(job: Mapping[str, Any] | None, training: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None) -> dict[str, Any]:
    """The job's provenance with what the training process reported on top: its versions, Megatron tree,
    container, GPUs and environment win (the job wrapper may run outside the container). With several nodes the
    lowest rank's line is the run's; fields on which the nodes disagree are listed under "rank_mismatch"."""
    out = json.loads(json.dumps(dict(job or {}), default=str))
    lines = [training] if isinstance(training, Mapping) else list(training or [])
    if not lines:
        return out
    first = dict(lines[0])
    out["training"] = first
    if len(lines) > 1:
        out["training_ranks"] = [{"rank": t.get("rank"), "host": t.get("host")} for t in lines]
        mismatch = sorted({".".join(p) for t in lines[1:] for p in _RANK_FIELDS if _get(t, p) != _get(first, p)})
        if mismatch:
            out["rank_mismatch"] = mismatch
    for key in ("versions", "megatron"):
        if first.get(key):
            out[key] = {**(out.get(key) or {}), **{k: v for k, v in first[key].items() if v is not None}}
    if (first.get("container") or {}).get("image"):
        out["container"] = first["container"]
    if first.get("gpu"):
        out["gpu"] = {**(out.get("gpu") or {}), **{k: v for k, v in first["gpu"].items() if v is not None}}
    if first.get("env") is not None:
        out["env"] = first["env"]
    return out


# --------------------------------------------------------------------------------------------------
# Columns and comparability

# prov_* column -> path in the provenance dict. Order is the column order in runs.parquet.
COLUMNS: dict[str, tuple[str, ...]] = {
    "prov_graphsweep_version": ("graphsweep", "version"),
    "prov_graphsweep_sha": ("graphsweep", "git_sha"),
    "prov_graphsweep_dirty": ("graphsweep", "git_dirty"),
    "prov_graphsweep_harness": ("graphsweep", "harness"),
    "prov_megatron_sha": ("megatron", "megatron", "git_sha"),
    "prov_megatron_dirty": ("megatron", "megatron", "git_dirty"),
    "prov_bridge_sha": ("megatron", "bridge", "git_sha"),
    "prov_bridge_dirty": ("megatron", "bridge", "git_dirty"),
    "prov_container": ("container", "image"),
    "prov_python": ("versions", "python"),
    "prov_torch": ("versions", "torch"),
    "prov_cuda": ("versions", "cuda"),
    "prov_cudnn": ("versions", "cudnn"),
    "prov_nccl": ("versions", "nccl"),
    "prov_te": ("versions", "transformer_engine"),
    "prov_mcore": ("versions", "megatron_core"),
    "prov_bridge": ("versions", "megatron_bridge"),
    "prov_gpu_name": ("gpu", "name"),
    "prov_gpu_count": ("gpu", "count"),
    "prov_gpu_driver": ("gpu", "driver"),
    "prov_gpu_app_clock_mhz": ("gpu", "app_sm_clock_mhz"),
    "prov_gpu_max_clock_mhz": ("gpu", "max_sm_clock_mhz"),
    "prov_host": ("host",),
    "prov_nodes": ("nodes",),
    "prov_slurm_partition": ("slurm", "partition"),
    "prov_env": ("env",),
    "prov_rank_mismatch": ("rank_mismatch",),
}
# The fields both arms of a cell must share; everything else (host, nodes, partition) is recorded only.
COMPARED = (
    "prov_graphsweep_version", "prov_graphsweep_sha", "prov_graphsweep_dirty", "prov_graphsweep_harness",
    "prov_megatron_sha",
    "prov_megatron_dirty", "prov_bridge_sha", "prov_bridge_dirty", "prov_container", "prov_python", "prov_torch",
    "prov_cuda", "prov_cudnn", "prov_nccl", "prov_te", "prov_mcore", "prov_bridge", "prov_gpu_name",
    "prov_gpu_count", "prov_gpu_driver", "prov_gpu_app_clock_mhz", "prov_gpu_max_clock_mhz", "prov_env",
)  # fmt: skip
# Short names for reasons (what a performance engineer reads in the report).
LABELS = {
    "prov_container": "container", "prov_gpu_name": "GPU", "prov_gpu_driver": "driver", "prov_gpu_count": "GPU count",
    "prov_gpu_app_clock_mhz": "GPU application clock", "prov_gpu_max_clock_mhz": "GPU max clock",
    "prov_graphsweep_sha": "graphsweep commit", "prov_graphsweep_dirty": "graphsweep uncommitted changes",
    "prov_graphsweep_version": "graphsweep version", "prov_graphsweep_harness": "graphsweep's measuring harness",
    "prov_megatron_sha": "Megatron commit",
    "prov_megatron_dirty": "Megatron uncommitted changes", "prov_bridge_sha": "Megatron Bridge commit",
    "prov_bridge_dirty": "Megatron Bridge uncommitted changes", "prov_te": "Transformer Engine",
    "prov_mcore": "Megatron Core", "prov_bridge": "Megatron Bridge", "prov_env": "environment",
    "prov_rank_mismatch": "nodes of one run",
}  # fmt: skip


def _get(d: Any, path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(d, Mapping):
            return None
        d = d.get(key)
    return d


def flatten(prov: Mapping[str, Any] | None) -> dict[str, Any]:
    """The prov_* columns of one run (None where unknown); prov_env is the compared environment as JSON."""
    prov = prov or {}
    row: dict[str, Any] = {}
    for col, path in COLUMNS.items():
        value = _get(prov, path)
        if col == "prov_env":
            value = None if value is None else json.dumps(
                {k: v for k, v in sorted(value.items()) if k not in ENV_NOT_COMPARED}, sort_keys=True
            )
        elif col == "prov_rank_mismatch":
            value = None if not value else ",".join(value)
        elif col == "prov_gpu_count":
            value = None if value is None else int(value)
        elif col.endswith("_dirty"):
            value = None if value is None else bool(value)
        elif value is not None:
            value = str(value)
        row[col] = value
    row["prov_key"] = comparability_key(row) if prov else None
    return row


# Where every run records its harness digest, the commit, its dirty flag and the version say nothing more of it
CHECKOUT = ("prov_graphsweep_version", "prov_graphsweep_sha", "prov_graphsweep_dirty")


def compared_fields(rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The fields `rows` must share: COMPARED, less the checkout's commit where every row has its harness digest
    (runs recorded before the digest existed are compared by commit, as they were)."""
    if rows and all(_known(r.get("prov_graphsweep_harness")) for r in rows):
        return tuple(c for c in COMPARED if c not in CHECKOUT)
    return tuple(c for c in COMPARED if c != "prov_graphsweep_harness")


def comparability_key(row: Mapping[str, Any]) -> str:
    """A short hash of the compared fields: runs with equal keys may be compared."""
    blob = json.dumps({c: row.get(c) for c in compared_fields([row])}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


_WITHIN_RUN = ("prov_rank_mismatch",)  # a run whose own nodes disagree is not one measurement


def _row_fields(run: Mapping[str, Any]) -> dict[str, Any]:
    if any(str(k).startswith("prov_") for k in run):
        return {c: run.get(c) for c in (*COMPARED, *_WITHIN_RUN)}
    raw = run.get("provenance")
    prov = json.loads(raw) if isinstance(raw, str) and raw else (raw if isinstance(raw, Mapping) else None)
    return {c: v for c, v in flatten(prov).items() if c in COMPARED or c in _WITHIN_RUN}


def _known(value: Any) -> bool:
    if value is None:
        return False
    try:
        return not (isinstance(value, float) and value != value)  # NaN from pandas
    except Exception:  # noqa: BLE001
        return True


@dataclass(frozen=True)
class Difference:
    """One field on which the runs of a cell disagree."""

    field: str
    eager: tuple[str, ...]  # distinct known values among the eager runs
    graph: tuple[str, ...]  # ... and among the graph runs

    @property
    def label(self) -> str:
        return LABELS.get(self.field, self.field.removeprefix("prov_"))

    def describe(self) -> str:
        return self._describe() + (_te_note(self.eager + self.graph) if self.field == "prov_te" else "")

    def _describe(self) -> str:
        if self.field == "prov_rank_mismatch":
            return f"the nodes of one run reported different {', '.join(sorted(set(self.eager + self.graph)))}"
        if self.field == "prov_env":
            return f"environment differs ({_env_delta(self.eager, self.graph)})"
        e, g = ", ".join(self.eager) or "unknown", ", ".join(self.graph) or "unknown"
        if len(self.eager) > 1 and len(self.graph) <= 1 and set(self.graph) <= set(self.eager):
            return f"{self.label} differs between eager runs ({e})"
        if len(self.graph) > 1 and len(self.eager) <= 1 and set(self.eager) <= set(self.graph):
            return f"{self.label} differs between graph runs ({g})"
        return f"{self.label}: eager {e} vs graph {g}"


# Transformer Engine >= 2.19 clones the parameter gradients a graphed callable returns (make_graphed_callables
# clone_param_grads_on_return=True by default, TE PR #2937; TE 2.20.2 pytorch/graph.py L165, L1447, L1489). MCore
# 0.19.2 never passes it (MLM PR #5893 passes False on TE >= 2.19; not in MCore main of 2026-08-22 either), so
# graph arms on the two sides of 2.19 do different work. prov_te and prov_mcore are compared exactly anyway (any
# two versions make a cell not comparable); this names why the 2.19 boundary matters.
TE_CLONES_PARAM_GRADS = (2, 19)


def _te_note(versions: Sequence[str]) -> str:
    parsed = [tuple(int(x) for x in v.split("+")[0].split(".")[:2] if x.isdigit()) for v in versions]
    if any(p and p < TE_CLONES_PARAM_GRADS for p in parsed) and any(p >= TE_CLONES_PARAM_GRADS for p in parsed):
        return (" - TE >= 2.19 clones parameter gradients on return from CUDA-graphed callables "
                "(clone_param_grads_on_return, TE PR #2937): the graph arms do different work")
    return ""


def _env_delta(eager: Sequence[str], graph: Sequence[str]) -> str:
    envs = [json.loads(x) for x in (*eager, *graph)]
    keys = sorted({k for e in envs for k in e if len({json.dumps(x.get(k)) for x in envs}) > 1})
    parts = []
    for k in keys[:4]:
        ev = sorted({str(json.loads(x).get(k)) for x in eager})
        gv = sorted({str(json.loads(x).get(k)) for x in graph})
        parts.append(f"{k}: eager {'/'.join(ev)} vs graph {'/'.join(gv)}")
    return "; ".join(parts) + (f"; and {len(keys) - 4} more" if len(keys) > 4 else "")


def differences(eager_runs: Iterable[Mapping[str, Any]], graph_runs: Iterable[Mapping[str, Any]]) -> list[Difference]:
    """Compared fields with more than one known value across all runs of a cell (unknown values never differ).

    Each run is a runs.parquet row (prov_* columns) or any mapping with a "provenance" dict/JSON.
    """
    e = [_row_fields(r) for r in eager_runs]
    g = [_row_fields(r) for r in graph_runs]
    out = []
    for col in compared_fields(e + g):
        ev = tuple(sorted({str(r[col]) for r in e if _known(r.get(col))}))
        gv = tuple(sorted({str(r[col]) for r in g if _known(r.get(col))}))
        if len(set(ev) | set(gv)) > 1:
            out.append(Difference(col, ev, gv))
    for col in _WITHIN_RUN:
        ev = tuple(sorted({str(r[col]) for r in e if _known(r.get(col))}))
        gv = tuple(sorted({str(r[col]) for r in g if _known(r.get(col))}))
        if ev or gv:
            out.append(Difference(col, ev, gv))
    return out


def not_comparable_reason(diffs: Sequence[Difference]) -> str:
    return "not comparable: the runs of this cell differ in " + "; ".join(d.describe() for d in diffs) + \
        " - rerun both arms in one environment"


if __name__ == "__main__":  # `python -m graphsweep.provenance`: what a job on this machine would record
    try:
        print(json.dumps(collect(), indent=1, default=str), flush=True)
    except BrokenPipeError:  # piped into `head`: end quietly (stdout to /dev/null so the exit flush cannot raise)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
