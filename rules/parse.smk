# Derived outputs are update(): Snakemake keeps the last good version while the job runs and restores it when the
# job fails (a damaged input), instead of deleting it; the scripts replace them only by a complete new version.
#
# parse is the one rule besides run that is not local: with the Slurm profile the graphsweep executor parses each
# finished run inside the controller, one at a time (graphsweep/run/executor.py), instead of one Python process per
# run on the login node (Snakemake ignores --local-cores when jobs go to a cluster). Its script runs it otherwise.
rule parse:
    input:
        run=str(PATTERN.run_json("{run_id}")),
        log=str(PATTERN.run_log("{run_id}")),
        ranks=get_run_ranks,
        config=str(PATTERN.run_config("{run_id}")),
    output:
        iterations=update(str(PATTERN.run_iterations("{run_id}"))),
        summary=update(str(PATTERN.run_summary("{run_id}"))),
    log:
        str(PATTERN.rule_log("parse", "{run_id}")),
    script:
        "../scripts/parse_run.py"


rule aggregate:
    input:
        plan=str(PATTERN.plan),
        runs=get_run_jsons,
        summaries=get_summaries,
        iterations=get_run_iterations,
    output:
        runs=update(str(PATTERN.runs)),
        iterations=update(str(PATTERN.iterations)),
    log:
        str(PATTERN.rule_log("aggregate")),
    localrule: True
    script:
        "../scripts/aggregate.py"
