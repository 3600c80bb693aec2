rule plan:
    input:
        spec=config["spec"],
        extra_repeats=get_extra_repeats_file,
    output:
        str(PATTERN.plan),
    log:
        str(PATTERN.rule_log("plan")),
    localrule: True
    run:
        write_plan_of_this_invocation(output[0], log[0])


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
