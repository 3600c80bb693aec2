"""Stage: report. report.md (pasted into a pull request) and report.html (one self-contained file) from the tables:
one typed model, two templates.

    data       the four tables, cost accounting, verdict counts
    shapes     the plan's shapes: the axes that tell them apart, full grid or not, the overrides a variant adds
    recommend  per shape, what the sweep knows: use a variant, undecided (and what decides it), stay eager, ...
    gpu_time   where the sweep's GPU-hours went, and the share that measured something
    grids      the speedup grids (heatmaps, shapes x variants) as data
    plots      matplotlib drawn as inline SVG
    words      every sentence of both reports, from the numbers (a verdict's own: judge/prose.py)
    model      the report: typed records of everything both reports show
    markup     the one filter per format: control characters spelled out, Markdown escaped and its links inert
    render     the Jinja2 templates (templates/report.md.j2, report.html.j2 with autoescape, report.css)
    write      both reports of a sweep
"""
