"""Stage: parse. A run's logs become per-iteration rows and a classified summary (outcome, phase, proving line).

    scan        one file, line by line (the log grammar is graphsweep/logformat.py)
    signatures  the texts that prove an outcome (Megatron's constraints among them, under their own ids)
    crash       how a process that died says so (Bridge's failure line, fatal lines, torchrun, signals)
    records     Evidence, Hit, RunSummary
    window      the steady window of one run
    classify    evidence -> outcome, in a fixed order
    run         parse_run: a run's files, merged and classified
    pairs       a pair job's log -> its segments and its two measured arms
    run_dir     a run folder -> iterations.parquet + summary.json
"""
