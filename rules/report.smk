rule compare:
    input:
        plan=str(PATTERN.plan),
        runs=str(PATTERN.runs),
        iterations=str(PATTERN.iterations),
    output:
        report(
            str(PATTERN.comparison),
            caption="../report/comparison.rst",
            category="Comparison",
        ),
    log:
        str(PATTERN.rule_log("compare")),
    localrule: True
    script:
        "../scripts/compare.py"


rule report:
    input:
        plan=str(PATTERN.plan),
        runs=str(PATTERN.runs),
        iterations=str(PATTERN.iterations),
        comparison=str(PATTERN.comparison),
    output:
        md=str(PATTERN.report_md),
        html=report(
            str(PATTERN.report_html),
            caption="../report/comparison.rst",
            category="Report",
        ),
    log:
        str(PATTERN.rule_log("report")),
    localrule: True
    script:
        "../scripts/report.py"
