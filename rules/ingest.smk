# Ingest (spec with a `source` block): each run's files are taken from source.logs instead of submitting a job.
# Included by the Snakefile in place of rules/run.smk; parse, aggregate, compare and report run unchanged.
from graphsweep.ingest import IngestError, match_files

try:
    INGEST = match_files(SPEC)
except IngestError as error:
    # Logs that do not map onto the sweep stop the workflow before anything is written, like a broken spec.
    sys.exit(f"graphsweep: cannot ingest: {error}")


rule ingest_run:
    input:
        config="{results}/{sweep}/runs/{run_id}/config.yaml",
        logs=INGEST.input_files,
    output:
        run="{results}/{sweep}/runs/{run_id}/run.json",
        log="{results}/{sweep}/runs/{run_id}/log.txt",
    log:
        "{results}/{sweep}/logs/ingest/{run_id}.log",
    params:
        facts=INGEST.facts_of,
    localrule: True
    script:
        "../scripts/ingest_run.py"
