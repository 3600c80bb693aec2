rule parse:
    input:
        run=str(PATTERN.run_json("{run_id}")),
        log=str(PATTERN.run_log("{run_id}")),
        config=str(PATTERN.run_config("{run_id}")),
    output:
        iterations=str(PATTERN.run_iterations("{run_id}")),
        summary=str(PATTERN.run_summary("{run_id}")),
    log:
        str(PATTERN.rule_log("parse", "{run_id}")),
    localrule: True
    script:
        "../scripts/parse_run.py"


rule aggregate:
    input:
        plan=str(PATTERN.plan),
        summaries=get_summaries,
    output:
        runs=str(PATTERN.runs),
        iterations=str(PATTERN.iterations),
    log:
        str(PATTERN.rule_log("aggregate")),
    localrule: True
    params:
        run_dirs=get_run_dirs,
    script:
        "../scripts/aggregate.py"
