# The plan job writes plan.parquet: every run of the sweep (to the decision loop's budget) with the look that first
# needs it, its command, preflight verdict and estimate. It plans the sweep again from the spec as the controller did
# and writes it only when the two agree (the digest param: a changed command, a run newly blocked or a new estimate
# writes the plan again). No run reads plan.parquet (a job whose input is written again runs again: every run would):
# each run's launch record is its own rule's params (rules/run.smk); the looks read it.
rule plan:
    input:
        spec=config["spec"],
        extra_repeats=get_extra_repeats_file,
    output:
        plan=update(str(PATHS.plan)),
    log:
        str(PATHS.rule_log("plan")),
    localrule: True
    params:
        digest=get_plan_digest,
        results=get_results,
        cluster=get_cluster,
    script:
        "../scripts/plan.py"
