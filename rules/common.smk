# Helpers for the rules: the sweep spec, its planned runs, the results layout, the decision loop's looks and the input
# functions. No rule logic lives in lambdas; every path comes from graphsweep.layout.SweepPaths. The controller's own
# lifecycle (its checks before any job, its first and last lines) is rules/controller.smk.
import re
import sys

from snakemake.common.configfile import load_configfile
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from graphsweep.plan.looks import first_look_runs_of, read_look
from graphsweep.plan.planner import gate_inputs, submitted
from graphsweep.plan.repeats import RepeatsError
from graphsweep.plan.sweep_plan import plan_for
from graphsweep.resources import CONFIG_SCHEMA, data_file
from graphsweep.run.ingest import IngestError, match_files, unseeded_note
from graphsweep.smk import (
    config_problem,
    refuse,
    setting_file,
    setting_on,
    unsafe_setting,
)
from graphsweep.layout import SweepPaths
from graphsweep.records import SpecError
from graphsweep.vocab import PAIR


def setting_problem(key, problem):
    """One line naming the file (or --config) the setting comes from, its key and value, and what is wrong."""
    # the profile's config files are applied after the Snakefile's own configfile
    files = [
        *[
            f
            for f in workflow.configfiles
            if f not in workflow.config_settings.configfiles
        ],
        *workflow.config_settings.configfiles,
    ]
    where = setting_file(key, workflow.config_settings.config, files, load_configfile)
    return f"graphsweep: invalid workflow setting ({where}): {problem}"


# a line break in a partition or a comment would become a shell line of every batch script; a NaN passes every bound
if found := unsafe_setting(config):
    refuse(setting_problem(*found))
try:
    validate(config, str(data_file(CONFIG_SCHEMA)))
except WorkflowError as error:
    # a mistyped --config (archive_logs=maybe, cluster=slrum, specs=...), an interval out of its range: one line
    refuse(setting_problem(*config_problem(error)))

try:
    # a broken spec stops the workflow before anything is planned or submitted. Every run is planned once for this
    # invocation (graphsweep/plan/sweep_plan.py, as `graphsweep plan` and `check-spec` plan it): every cell to the
    # decision loop's budget (results/{sweep}/extra_repeats.yaml raises it), each run with the look that first needs
    # it; the executor the rules use decides whether a graph arm needs a CUDA device on this machine; a run beyond the
    # time limit, a first look over the GPU-hour budget is refused before any job
    SWEEP_PLAN = plan_for(config["spec"], config["results"], config.get("cluster"))
except (SpecError, RepeatsError) as error:
    refuse(f"graphsweep: invalid sweep spec: {error}")

SPEC = SWEEP_PLAN.spec
PLAN = SWEEP_PLAN.planned
SWEEP = SPEC.name
RESULTS = config["results"]
PATHS = SWEEP_PLAN.paths  # this sweep's files
# absolute: at exit Snakemake is back in the folder it was started from (--directory)
RESULTS_DIR = PATHS.root.resolve()
PATTERN = SweepPaths("{results}", "{sweep}")  # the same files as rule patterns
PLANNED = {p.run.run_id: p for p in PLAN}
SUBMITTED = [p.run.run_id for p in submitted(PLAN)]  # every run a look may ask for
FIRST_LOOK = first_look_runs_of(PLAN)  # the runs look 1 judges
PAIRS = [
    p.run.run_id for p in PLAN if p.run.arm == PAIR
]  # their summary.json holds both arms


wildcard_constraints:
    results=re.escape(RESULTS),
    sweep=re.escape(SWEEP),
    run_id=r"[A-Za-z0-9][A-Za-z0-9.+_~-]*",
    look=r"[1-9][0-9]*",


def is_ingest():
    """A spec with a `source` block takes its runs from existing logs: rules/ingest.smk, no job is submitted."""
    return SPEC.is_ingest


def get_planned(wildcards):
    try:
        return PLANNED[wildcards.run_id]
    except KeyError:
        raise ValueError(
            f"run '{wildcards.run_id}' is not part of sweep '{SWEEP}' ({config['spec']})"
        ) from None


def get_run_record(wildcards):
    """A run's launch record (what its config.yaml holds): the run rule's params, so that Snakemake reruns exactly
    the runs whose command or settings changed (its params trigger), and keeps them as they ran with
    `--rerun-triggers mtime`."""
    return get_planned(wildcards).config()


def get_rounds(wildcards):
    """Whether the decision loop may submit new rounds (`--config rounds=false`: it judges the runs there are)."""
    return setting_on(config["rounds"])


def get_results(wildcards):
    """The workflow's results folder (the plan job plans for it, as the controller did)."""
    return config["results"]


def get_cluster(wildcards):
    """The executor the workflow uses (`--config cluster=`, the Slurm profile's), else the spec's."""
    return config.get("cluster")


def get_plan_digest(wildcards):
    """What the plan job writes, in one string (a changed command, a newly blocked run, a new estimate)."""
    return SWEEP_PLAN.digest()


# --------------------------------------------------------------------------------------------------
# The decision loop's looks (rules/decide.smk, graphsweep/plan/decide.py)


def get_look_inputs(wildcards):
    """Look k's inputs: the plan, look k - 1's record and the files of every run look k judges."""
    k = int(wildcards.look)
    previous = look_output(k - 1) if k > 1 else None
    runs = FIRST_LOOK if previous is None else looked_runs(read_look(previous))
    files = {
        "plan": str(PATHS.plan),
        "runs": [str(PATHS.run_json(r)) for r in runs],
        "summaries": [str(PATHS.run_summary(r)) for r in runs],
        "iterations": [str(PATHS.run_iterations(r)) for r in runs],
    }
    if previous:
        files["previous"] = previous
    return files


def look_output(k):
    """Look k's record, once its checkpoint ran (else Snakemake's IncompleteCheckpointException schedules it)."""
    return str(checkpoints.look.get(results=RESULTS, sweep=SWEEP, look=k).output[0])


def looked_runs(record):
    """The runs a look judged and those it asked for: what the next look judges."""
    return [*record.runs, *record.next_runs]


def final_look():
    """The look the decision loop ended at: looks are taken one after another (Snakemake checkpoints) until one says
    the loop is over; before then, asking raises Snakemake's IncompleteCheckpointException, which schedules it.
    """
    k = 1
    while True:
        record = read_look(look_output(k))
        if record.done:
            return k, record
        k += 1


def loop_runs():
    """Every run the loop judged, in the order the looks took them."""
    return list(final_look()[1].runs)


def get_final_outputs(wildcards=None):
    k, record = final_look()
    tables = [
        PATHS.plan,
        PATHS.runs,
        PATHS.iterations,
        PATHS.comparison,
        PATHS.report_md,
        PATHS.report_html,
        PATHS.look(k),
    ]
    # Every run's own files are targets too: Snakemake does not remake a deleted intermediate whose consumers are up
    # to date, so without them deleting results/{sweep}/runs/{run_id}/ would never rerun that run.
    per_run = [
        path
        for run_id in record.runs
        for path in (
            PATHS.run_json(run_id),
            PATHS.run_summary(run_id),
            PATHS.run_iterations(run_id),
        )
    ]
    return [str(p) for p in tables + per_run]


def get_final_look(wildcards):
    return str(PATHS.look(final_look()[0]))


def get_summaries(wildcards):
    return [str(PATHS.run_summary(run_id)) for run_id in loop_runs()]


def get_run_jsons(wildcards):
    return [str(PATHS.run_json(run_id)) for run_id in loop_runs()]


def get_run_iterations(wildcards):
    return [str(PATHS.run_iterations(run_id)) for run_id in loop_runs()]


# --------------------------------------------------------------------------------------------------
# One run


def get_gate_summaries(wildcards):
    """spec launch_gate: a graph run waits for its shape's first-look eager runs' summaries (their GPU-busy
    diagnostic)."""
    planned = get_planned(wildcards)
    return [str(PATHS.run_summary(r)) for r in gate_inputs(planned, PLAN)]


def get_run_ranks(wildcards):
    """A run's folder of further log files (the run rule's output): a run folder written before the run rule made
    one has none, and its parse then declares none (so that it is not run again for it).
    """
    run = PATHS.run(wildcards.run_id)
    return [str(run.ranks)] if run.ranks.exists() or not run.run_json.exists() else []


def get_sweep_dir(wildcards):
    """The sweep's results folder (archive packs all of it; the controller's filesystem, the rule is local)."""
    return str(PATHS.root)


def get_jobs_dir(wildcards):
    return str(PATHS.jobs_dir(wildcards.run_id))


def get_attempt(wildcards, attempt):
    return attempt


def get_timeout_min(wildcards, attempt):
    """Each retry gets more time: a run that hit its limit before the measurement window is retried, not recorded."""
    return SPEC.executor.timeout_min * attempt


def get_run_gpus(wildcards):
    return get_planned(wildcards).run.gpus


def get_extra_repeats_file(wildcards):
    """The plan is remade when `graphsweep more-repeats` raises the loop's budget in this file."""
    return [str(PATHS.extra_repeats)] if PATHS.extra_repeats.exists() else []
