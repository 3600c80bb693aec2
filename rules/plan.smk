# The plan job writes this invocation's one plan (rules/common.smk SWEEP_PLAN), handed over as a param: an object
# Snakemake cannot record, so it is no rerun trigger, and the job writes exactly what the DAG was built from (planned
# again in the job, a `preflight: megatron` sweep would run Megatron Bridge's check twice, and a run that finished
# in between could change what the job writes behind the DAG's back).
#
# It writes each run's config.yaml too, but only those missing or holding another config than the plan's (STALE):
# they are its outputs, so exactly their runs wait for it and run again; every other config.yaml is a plain input of
# its run, left as it is with its mtime, so no finished run is queued again when the plan is written again. The
# digest (a string Snakemake records) writes the plan again when what it writes changed (a command, a new estimate).
# Its outputs are this sweep's paths, not patterns: Snakemake's output index then looks at this rule only for them
# (with patterns it would match every file of every run against each of its outputs). With the params trigger off
# (`--rerun-triggers mtime`) a changed config.yaml is kept as its job ran it (`keep`, get_kept_configs). No run reads
# plan.parquet: such an input would queue every finished run again whenever the plan is written.
rule plan:
    input:
        spec=config["spec"],
        extra_repeats=get_extra_repeats_file,
    output:
        plan=update(str(PATHS.plan)),
        configs=get_stale_configs(),
    log:
        str(PATHS.rule_log("plan")),
    localrule: True
    params:
        plan=get_sweep_plan,
        digest=PLAN_DIGEST,
        keep=get_kept_configs,
    script:
        "../scripts/plan.py"
