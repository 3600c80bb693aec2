"""Stage: run. Each planned run becomes one job (submitit: local or Slurm), waited for and recorded in run.json.

    runrule     the run's sequence, written once: begin, submit or reattach, result, one transient retry, finish;
                and its local driver (the run rule's own process, a local job)
    executor    the graphsweep Snakemake executor: the sequence of every run on Slurm, driven from one loop of the
                controller, and the parse of every finished run in the controller
    watch       that loop: every Slurm job in flight, polled at once (Fleet); what one job's records mean (JobWatch)
    slurm       what Slurm says: sacct (one rate-limited call for all jobs), squeue, scancel, a job's result
    submit      a run's Slurm job: its settings, sbatch, its side file (job.json)
    local       a run's local job: a child process, stopped with its waiter; an earlier one known gone first
    sbatch      what a run asks sbatch for, and which sbatch failures pass
    gate        the launch gate: a graph arm no graph can speed up is not run
    process     processes named by host, pid and start time; a process tree stopped
    ingest      runs from logs that already exist: nothing submitted
    controller  the Snakemake process that holds a sweep, and what it says when the sweep ends or stops
"""
