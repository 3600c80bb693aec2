# comparison and reports are update(): a failed job leaves the last good version in place (rules/parse.smk).
rule compare:
    input:
        plan=str(PATTERN.plan),
        runs=str(PATTERN.runs),
        iterations=str(PATTERN.iterations),
        look=get_final_look,  # the decision loop is over: a cell still undecided is out of budget
    output:
        report(
            update(str(PATTERN.comparison)),
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
        md=update(str(PATTERN.report_md)),
        html=report(
            update(str(PATTERN.report_html)),
            caption="../report/comparison.rst",
            category="Report",
        ),
    log:
        str(PATTERN.rule_log("report")),
    localrule: True
    script:
        "../scripts/report.py"
