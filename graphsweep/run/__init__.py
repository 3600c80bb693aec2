"""Stage: run. Each planned run becomes one job (submitit: local or Slurm), waited for and recorded in run.json.

    submit      the run rule: submit or reattach, wait, retry a known-transient failure once, write run.json
    job         inside the job: the training command (srun / container / ABBA driver) and its facts
    slurmstate  one shared, rate-limited sacct for every waiting run
    abba        the pair job's driver (python -m graphsweep.run.abba)
    ingest      runs from logs that already exist: nothing submitted
    controller  the Snakemake process that holds a sweep, and what it says when the sweep ends or stops
"""
