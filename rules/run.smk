# Submit each run through submitit and wait for it: on the local executor this rule's script waits (one process per
# run, graphsweep/run/runrule.py); with the Slurm profile the graphsweep executor runs every job of this rule and
# waits for all of them in the controller (graphsweep/run/executor.py). It is the only rule that is not local.
# The run's launch record (its config.yaml) is its params: Snakemake's params trigger reruns exactly the runs whose
# command or settings changed, and the rule writes config.yaml itself, as its first output.
if not is_ingest():

    rule run:
        input:
            gate=get_gate_summaries,
        output:
            config=str(PATTERN.run_config("{run_id}")),
            run=str(PATTERN.run_json("{run_id}")),
            log=str(PATTERN.run_log("{run_id}")),
            ranks=directory(str(PATTERN.run_ranks("{run_id}"))),  # torchrun's per-rank files (often none)
        log:
            str(PATTERN.rule_log("run", "{run_id}")),
        resources:
            attempt=get_attempt,
            timeout_min=get_timeout_min,
            gpus=get_run_gpus,  # `--resources gpus=N` keeps runs from sharing a GPU on the local executor
        params:
            config=get_run_record,
            jobs_dir=get_jobs_dir,
        script:
            "../scripts/run.py"
