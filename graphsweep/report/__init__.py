"""Stage: report. report.md (pasted into a pull request) and report.html (one self-contained file) from the tables.

    data      the four tables, cost accounting, verdict counts
    text      how numbers and reasons read
    plots     matplotlib drawn as inline SVG
    markdown  report.md
    html      report.html (styles: report.css)
    write     both reports of a sweep
"""
