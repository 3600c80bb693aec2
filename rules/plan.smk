# The plan job writes this invocation's one plan (rules/common.smk SWEEP_PLAN), handed over as a param: an object
# Snakemake cannot record, so it is no rerun trigger, and the job writes exactly what the DAG was built from (planned
# again in the job, a `preflight: megatron` sweep would run Megatron Bridge's check twice, and a run that finished
# in between could change what the job writes behind the DAG's back).
rule plan:
    input:
        spec=config["spec"],
        extra_repeats=get_extra_repeats_file,
    output:
        update(str(PATTERN.plan)),
    log:
        str(PATTERN.rule_log("plan")),
    localrule: True
    params:
        plan=get_sweep_plan,
    script:
        "../scripts/plan.py"


# No file input on purpose: the run's config comes from this invocation's plan (params, so a changed command re-queues
# exactly that run). A plan.parquet input would re-queue every finished run once: Snakemake's `input` trigger sees
# a new input set on every config.yaml it recorded, rewrites them, and the run rule's `mtime` trigger follows.
rule configure_run:
    output:
        str(PATTERN.run_config("{run_id}")),
    log:
        str(PATTERN.rule_log("configure", "{run_id}")),
    localrule: True
    params:
        config=get_run_config,
    script:
        "../scripts/configure_run.py"
