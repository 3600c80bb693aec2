rule parse:
    input:
        run="{results}/{sweep}/runs/{run_id}/run.json",
        log="{results}/{sweep}/runs/{run_id}/log.txt",
        config="{results}/{sweep}/runs/{run_id}/config.yaml",
    output:
        iterations="{results}/{sweep}/runs/{run_id}/iterations.parquet",
        summary="{results}/{sweep}/runs/{run_id}/summary.json",
    log:
        "{results}/{sweep}/logs/parse/{run_id}.log",
    localrule: True
    script:
        "../scripts/parse_run.py"


rule aggregate:
    input:
        plan="{results}/{sweep}/plan.parquet",
        summaries=get_summaries,
    output:
        runs="{results}/{sweep}/runs.parquet",
        iterations="{results}/{sweep}/iterations.parquet",
    log:
        "{results}/{sweep}/logs/aggregate.log",
    params:
        run_dirs=get_run_dirs,
    localrule: True
    script:
        "../scripts/aggregate.py"
