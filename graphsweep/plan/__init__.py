"""Stage: plan. Every run planned once (its workload's preflight, command and cost), before anything is submitted.

    planner   PlannedRun records, plan.parquet, each run's config.yaml, the dry-run summary
    repeats   more repeats for inconclusive cells (results/{sweep}/extra_repeats.yaml)
    owner     which spec results/{sweep} belongs to (owner.json): a second spec reusing the name is refused
"""
