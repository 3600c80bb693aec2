"""Stage: parse. A run's logs become per-iteration rows and a classified summary (outcome, phase, proving line).

    files       a log file as bytes: text or not, blocks of whole lines, one line by number
    scan        one file, line by line (the log grammar is graphsweep/logformat.py)
    signatures  the texts that prove an outcome (Megatron's constraints under their own ids); the retry policy
    cuda_errors a CUDA error line paired with torch's `Search for `cudaError...'` line: the cause's name
    crash       how a process that died says so (Bridge's failure line, fatal lines, torchrun, signals)
    records     Evidence, Hit, RunSummary
    window      the steady window of one run
    measure     what a run measured, onto its summary (steady statistics, memory, capture evidence)
    busy        the eager arm's GPU-busy and host-time lines (where an eager step's time goes)
    captured    how many CUDA graphs a graph run holds; a graph arm that holds none (outcome uncaptured)
    classify    evidence -> outcome: RULES, an ordered list of named rules
    run         parse_run: a run's files, merged and classified
    pairs       a pair job's log -> its segments and its two measured arms
    run_dir     a run folder -> iterations.parquet + summary.json
    progress    how far a running job got (its log's last iteration line)

Only this stage reads a training log: every later stage reads its records (summary.json, iterations.parquet).
"""
