# Submit each run through submitit (local or Slurm) and wait for it (graphsweep/run/submit.py).
if not is_ingest():

    rule run:
        input:
            config=str(PATTERN.run_config("{run_id}")),
            gate=get_gate_summaries,
        output:
            run=str(PATTERN.run_json("{run_id}")),
            log=str(PATTERN.run_log("{run_id}")),
            ranks=directory(str(PATTERN.run_ranks("{run_id}"))),  # torchrun's per-rank files (often none)
        log:
            str(PATTERN.rule_log("run", "{run_id}")),
        localrule: True
        resources:
            attempt=get_attempt,
            timeout_min=get_timeout_min,
            gpus=get_run_gpus,  # `--resources gpus=N` keeps runs from sharing a GPU on the local executor
        params:
            jobs_dir=get_jobs_dir,
        script:
            "../scripts/run.py"
