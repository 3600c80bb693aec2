# Ingest (spec with a `source` block): each run's files are taken from source.logs instead of submitting a job
# (graphsweep/run/ingest.py); parse, aggregate, compare and report run unchanged.
if is_ingest():

    try:
        INGEST = match_files(SPEC)
    except IngestError as error:
        # Logs that do not map onto the sweep stop the workflow before anything is written, like a broken spec.
        refuse(f"graphsweep: cannot ingest: {error}")
    UNSEEDED = unseeded_note(INGEST, SPEC.path)
    if UNSEEDED:
        print(f"graphsweep: warning: {UNSEEDED}", file=sys.stderr)

    rule ingest_run:
        input:
            logs=INGEST.input_files,
        output:
            config=str(PATTERN.run_config("{run_id}")),
            run=str(PATTERN.run_json("{run_id}")),
            log=str(PATTERN.run_log("{run_id}")),
            ranks=directory(str(PATTERN.run_ranks("{run_id}"))),  # the run's further files (often none)
        log:
            str(PATTERN.rule_log("ingest", "{run_id}")),
        localrule: True
        params:
            config=get_run_record,
            facts=INGEST.facts_of,
            seed=INGEST.seed,
            root=str(INGEST.root),  # source.logs: no log is read from outside it
        script:
            "../scripts/ingest_run.py"
