"""Stage: run. Each planned run becomes one job (submitit: local or Slurm), waited for and recorded in run.json.

    runrule     the run rule's steps: config and launch gate, submit or reattach, the one transient retry, run.json
    submit      a job's Slurm parameters, sbatch and side file, its result; the local executor's job
    watch       waiting: one loop for every Slurm job of a controller (Fleet), or one process per run (SlurmWaiter)
    executor    the graphsweep Snakemake executor: every run rule job of a sweep, waited for in the controller
    slurmstate  one shared, rate-limited sacct for every waiting run
    process     processes named by host, pid and start time
    ingest      runs from logs that already exist: nothing submitted
    controller  the Snakemake process that holds a sweep, and what it says when the sweep ends or stops
"""
