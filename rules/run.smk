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
        gpus=get_run_gpus,  # `--resources gpus=N` keeps runs from sharing a GPU on the local executor
    localrule: True
    script:
        "../scripts/run.py"
