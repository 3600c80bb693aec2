"""What a run asks sbatch for: the profile's and the spec's Slurm settings merged (the spec wins where it says
something), turned into submitit's parameters per launch plan, and which sbatch failures are worth another try.

submitit renders every parameter as one `#SBATCH --key='value'` line of the batch script (submitit/slurm/slurm.py
_as_sbatch_flag: shlex-quoted values, keys as given) and `setup` as lines of the script itself; the values are
checked here once more to be one line each (graphsweep/textsafe.py), after the schemas refused them before any job.
"""

from __future__ import annotations

from typing import Any, Mapping

import yaml

from graphsweep import resources, textsafe
from graphsweep.records import LaunchPlan, SpecError


def _slurm_defaults() -> dict[str, Any]:
    """The defaults of the profile's `slurm:` block, from the workflow's config schema (one place for them)."""
    schema = yaml.safe_load(resources.read_text(resources.CONFIG_SCHEMA))
    props = schema["properties"]["slurm"]["properties"]
    return {k: v["default"] for k, v in props.items() if "default" in v}


SLURM_DEFAULTS = _slurm_defaults()


# Names of profiles/slurm/cluster.yaml `slurm:` -> submitit parameters. Keys already spelled the submitit way
# (slurm_*, or a generic name) pass through unchanged.
_SUBMITIT_NAMES = {
    "partition": "slurm_partition",
    "account": "slurm_account",
    "qos": "slurm_qos",
    "constraint": "slurm_constraint",
    "exclude": "slurm_exclude",
    "nodelist": "slurm_nodelist",
    "gres": "slurm_gres",
    "comment": "slurm_comment",
    "cpus_per_task": "cpus_per_task",
    "cpus_per_gpu": "slurm_cpus_per_gpu",
    "mem_gb": "mem_gb",
    "mem_per_gpu": "slurm_mem_per_gpu",
    "mem_per_cpu": "slurm_mem_per_cpu",
    "signal_delay_s": "slurm_signal_delay_s",
    "setup": "slurm_setup",
    "mail_type": "slurm_mail_type",
    "mail_user": "slurm_mail_user",
    "wckey": "slurm_wckey",
}

_GENERIC = {"cpus_per_task", "mem_gb", "stderr_to_stdout"}

# Keys graphsweep reads itself (not sbatch parameters).
_GRAPHSWEEP_KEYS = {
    "request_gpus", "exclusive", "sbatch", "container_image", "container_mounts", "container_workdir", "srun_args",
    "graphsweep_dir", "python", "status_interval_s", "progress_interval_s", "stuck_guard_min", "lost_after_min",
    "result_grace_s", "submit_retry_s",
}  # fmt: skip

# Derived per run from its LaunchPlan; a profile setting them would give every shape the same layout.
_DERIVED = {"nodes", "gpus_per_node", "tasks_per_node", "timeout_min", "slurm_time", "time"}


def _truthy(value: Any, default: bool) -> bool:
    if _empty(value):
        return default
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off")
    return bool(value)


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def slurm_parameters(plan: LaunchPlan, slurm: Mapping[str, Any], timeout_min: int, name: str) -> dict[str, Any]:
    """submitit parameters for one run: the allocation shape from its LaunchPlan, the rest from the profile.

    * nodes, GPUs per node: the plan's (runs/{run_id}/config.yaml); `request_gpus: false` asks for no GPUs (a
      GPU-less test cluster running the builtin workload on CPU).
    * A plan whose training is its own srun step (Megatron on Slurm, containers) gets one task per GPU in the
      allocation and runs the submitit task directly in the batch script (no srun around it: NeMo containers have
      no submitit); other plans run as one srun task.
    * `exclusive: true` -> --exclusive; `sbatch: {key: value}` -> extra `#SBATCH --key=value` lines.
    """
    unknown = sorted(k for k in slurm if k in _DERIVED)
    if unknown:
        raise SpecError(SETTINGS, unknown[0], slurm[unknown[0]],
            f"slurm: {', '.join(unknown)} cannot be set in the profile: nodes and GPUs come from each run's launch "
            "plan (runs/{run_id}/config.yaml) and the time limit from the spec's executor.timeout_min x attempt"
        )  # fmt: skip
    params: dict[str, Any] = {"timeout_min": int(timeout_min), "name": name, "nodes": int(plan.nodes)}
    if _truthy(slurm.get("request_gpus"), SLURM_DEFAULTS["request_gpus"]) and plan.gpus_per_node > 0:
        params["gpus_per_node"] = int(plan.gpus_per_node)
    if plan.srun:
        params["tasks_per_node"] = max(1, int(plan.tasks_per_node))
        params["slurm_use_srun"] = False
    else:
        params["tasks_per_node"] = 1
    for key, value in slurm.items():
        if key in _GRAPHSWEEP_KEYS or _empty(value):
            continue
        target = _SUBMITIT_NAMES.get(key, key)
        if not (target.startswith("slurm_") or target in _GENERIC):
            raise SpecError(SETTINGS, key, value,
                f"slurm: unknown setting {key!r}. Use one of {sorted(_SUBMITIT_NAMES)}, a submitit slurm_* parameter, "
                f"or graphsweep's {sorted(_GRAPHSWEEP_KEYS)}"
            )  # fmt: skip
        params[target] = value
    extra = dict(params.pop("slurm_additional_parameters", {}) or {})
    extra.update({str(k).replace("-", "_"): v for k, v in (slurm.get("sbatch") or {}).items()})
    if _truthy(slurm.get("exclusive"), SLURM_DEFAULTS["exclusive"]):
        params["slurm_exclusive"] = True
    if extra:
        params["slurm_additional_parameters"] = extra
    if "slurm_signal_delay_s" not in params:
        # submitit signals the job (USR2) 90 s before the limit; on a short limit that would be at once.
        params["slurm_signal_delay_s"] = int(min(90, max(10, timeout_min * 60 // 6)))
    # submitit writes each parameter as `#SBATCH --key='value'` (shlex-quoted) and `setup` as lines of the script: a
    # line break inside would end the #SBATCH comment and start a shell line. The schemas refuse one before any job
    # (sweepspec/load.py, rules/common.smk); this is the last look, at what is handed to submitit.
    if found := textsafe.control_character(params):
        key, text, what = found
        raise SpecError(SETTINGS, key, text, textsafe.one_line_problem(what))
    for key in extra:  # submitit writes the key unquoted: `#SBATCH --{key}=...`
        if not textsafe.SBATCH_OPTION.fullmatch(key):
            raise SpecError(SETTINGS, f"sbatch.{key}", extra[key], "not an sbatch option name (letters, digits, '-' "
                            "and '_', starting with a letter)")
        # the job's size, time and files are this function's (a spec's own lines were held to the spec's list when
        # it was loaded: sweepspec/load.py); a later #SBATCH line would win over submitit's
        if problem := textsafe.sbatch_option_problem(key, spec=False):
            raise SpecError(SETTINGS, f"sbatch.{key}", extra[key], problem)
    return params


# The sbatch failures that pass: what Slurm itself treats as transient. sbatch retries EAGAIN ("Slurm temporarily
# unable to accept job, sleeping and retrying", then "Batch job submission failed: Resource temporarily unavailable"),
# a full job queue and busy nodes, and prints every other error at once (SchedMD/slurm src/sbatch/sbatch.c main(),
# the slurm_submit_batch_job loop); slurmctld unreachable, restarting or overloaded reads as the communication errors
# of src/common/slurm_errno.c ("communication failures to/from slurmctld", SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT, the
# rate limiter's SLURMCTLD_COMMUNICATIONS_BACKOFF). Anything else (an invalid partition, account, QOS or gres, a
# policy limit) is the same on every retry: refused at once, with sbatch's own line.
SBATCH_TRANSIENT = (
    "Resource temporarily unavailable",  # EAGAIN, after sbatch's own retries
    "Slurm temporarily unable to accept job",
    "Slurm job queue full",
    "Unable to create job record, try again",  # ESLURM_ERROR_ON_DESC_TO_RECORD_COPY
    "Socket timed out on send/recv operation",
    "Zero Bytes were transmitted or received",
    "Unable to contact slurm controller",  # (connect / send / receive / shutdown failure)
    "Communication connection failure",
    "Rate limit exceeded, please retry momentarily",
    "Slurm backup controller in standby mode",
)


def sbatch_transient(text: str) -> bool:
    """Whether an sbatch failure (its stderr) is one Slurm says may pass (SBATCH_TRANSIENT)."""
    return any(t in text for t in SBATCH_TRANSIENT)


SETTINGS = "the Slurm settings (executor.slurm / profiles/slurm/cluster.yaml)"  # where a refused value comes from


class SubmitRefused(SpecError):
    """sbatch refused the job for a reason that does not pass (SBATCH_TRANSIENT has the ones that do): one line with
    sbatch's own words; the run fails at once instead of retrying for submit_retry_s."""

    state = "REFUSED"  # failed.json `state`, as graphsweep status shows it

    def __init__(self, line: str):
        super().__init__(SETTINGS, "sbatch", line, "refused")
        # sbatch's whole line, never cut (SpecError shortens long values)
        ValueError.__init__(self, f"sbatch refused the job: {line} (not one of the failures Slurm calls transient, "
                            f"so not retried: fix {SETTINGS} and run again)")


def merged_slurm(profile: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """The Slurm settings of a run: the profile's (profiles/slurm/cluster.yaml, its nulls and the schema's defaults
    filled in by Snakemake), then every setting the spec's executor.slurm gives. The spec wins where it says
    something: its partition, account, request_gpus or submit_retry_s are not replaced by the profile's null or
    default. `sbatch` lines merge key by key."""
    given = {k: v for k, v in spec.items() if not _empty(v)}
    out = {**profile, **given}
    if isinstance(profile.get("sbatch"), Mapping) and isinstance(given.get("sbatch"), Mapping):
        out["sbatch"] = {**profile["sbatch"], **given["sbatch"]}
    return out
