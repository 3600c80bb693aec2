rule compare:
    input:
        plan="{results}/{sweep}/plan.parquet",
        runs="{results}/{sweep}/runs.parquet",
        iterations="{results}/{sweep}/iterations.parquet",
    output:
        report(
            "{results}/{sweep}/comparison.parquet",
            caption="../report/comparison.rst",
            category="Comparison",
        ),
    log:
        "{results}/{sweep}/logs/compare.log",
    localrule: True
    script:
        "../scripts/compare.py"


rule report:
    input:
        plan="{results}/{sweep}/plan.parquet",
        runs="{results}/{sweep}/runs.parquet",
        iterations="{results}/{sweep}/iterations.parquet",
        comparison="{results}/{sweep}/comparison.parquet",
    output:
        md="{results}/{sweep}/report.md",
        html=report(
            "{results}/{sweep}/report.html",
            caption="../report/comparison.rst",
            category="Report",
        ),
    log:
        "{results}/{sweep}/logs/report.log",
    localrule: True
    script:
        "../scripts/report.py"
