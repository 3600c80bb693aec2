rule plan:
    input:
        spec=config["spec"],
        extra_repeats=get_extra_repeats_file,
    output:
        "{results}/{sweep}/plan.parquet",
    log:
        "{results}/{sweep}/logs/plan.log",
    localrule: True
    script:
        "../scripts/plan.py"


rule configure_run:
    output:
        "{results}/{sweep}/runs/{run_id}/config.yaml",
    log:
        "{results}/{sweep}/logs/configure/{run_id}.log",
    params:
        config=get_run_config,
    localrule: True
    script:
        "../scripts/configure_run.py"
