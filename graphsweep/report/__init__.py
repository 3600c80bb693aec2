"""Stage: report. report.md (pasted into a pull request) and report.html (one self-contained file) from the tables.

    data      the four tables, cost accounting, verdict counts
    text      how numbers and reasons read
    shapes    the plan's shapes: the axes that tell them apart, full grid or not, the overrides a variant adds
    recommend per shape, which graph setting to use (or stay eager, and why): a section of both reports
    gpu_time  where the sweep's GPU-hours went, and the share that measured something: a section of both
    plots     matplotlib drawn as inline SVG
    markdown  report.md
    html      report.html (styles: report.css)
    write     both reports of a sweep
"""
