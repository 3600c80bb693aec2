rule plan:
    input:
        spec=config["spec"],
        extra_repeats=get_extra_repeats_file,
    output:
        update(str(PATTERN.plan)),
    log:
        str(PATTERN.rule_log("plan")),
    localrule: True
    run:
        write_plan_of_this_invocation(output[0], log[0])


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
