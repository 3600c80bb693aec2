rule run:
    input:
        "{results}/{sweep}/runs/{run_id}/config.yaml",
    output:
        run="{results}/{sweep}/runs/{run_id}/run.json",
        log="{results}/{sweep}/runs/{run_id}/log.txt",
    log:
        "{results}/{sweep}/logs/run/{run_id}.log",
    params:
        jobs_dir="{results}/{sweep}/.jobs/{run_id}",
    resources:
        attempt=get_attempt,
        timeout_min=get_timeout_min,
    localrule: True
    script:
        "../scripts/run.py"
