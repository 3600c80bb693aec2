"""Stage: parse. A run's logs become per-iteration rows and a classified summary (outcome, phase, proving line).

Reading (one reader: the parse step and the run rule's retry decision read a log the same way)
    files       a log file as bytes: text or not, blocks of whole lines, one line by number
    scan        one file into one FileScan per attempt (a requeued job appends its next attempt to the same file)
    filescan    FileScan: what one attempt in one file says
    lines       every line the readers look for, onto its FileScan (the log grammar is graphsweep/logformat.py)
    errorlines  an error line: the signatures it proves, a CUDA error's enum, Slurm's end lines, how a process died
    templates   a long log a block at a time: its plain iteration and Step Time lines read as columns by template
    numbers     numbers as a log prints them (junk is NaN, never an exception)
    memory      memory lines; busy: the eager arm's GPU-busy and host-time lines
    segments    a pair job's log into its segments
The catalogue
    signatures  the texts that prove an outcome (Megatron's constraints under their own ids), each with its rule
    matching    which signatures a line matches, found cheaply
    cuda_errors a CUDA error line paired with torch's `Search for `cudaError...'` line: the cause's name
    crash       how a process that died says so (Bridge's failure line, fatal lines, torchrun, signals)
Deciding (one phase model: context.phase_of)
    records     Evidence, Hit, Mark, RunSummary
    evidence    a run's files and attempts merged: its rows by iteration and what they say
    window      the steady window of one run (in iterations, for any log_interval)
    measure     what a run measured, onto its summary (steady statistics, memory, capture evidence)
    captured    how many CUDA graphs a graph run holds; a graph arm that holds none (outcome uncaptured)
    context     what every rule sees (Ctx), a failure's phase, the proving line's words
    rules       RULES, the ordered classification
    classify    RULES applied, then the teardown rule and the retry policy
    retry       the retry policy: which failures earn the one automatic retry
Entry points
    read        read_run: a run's logs into its summary (numpy, no pandas); find_transient: the run rule's question
    ask         that question from a process that stays small (a child process answers it)
    run         parse_run: read_run plus the iterations table
    pairs       a pair job's log -> its segments and its two measured arms
    run_dir     a run folder -> iterations.parquet + summary.json
    progress    how far a running job got (its log's last iteration line)

Only this stage reads a training log: every later stage reads its records (summary.json, iterations.parquet).
"""
