# `snakemake archive`: the finished sweep as results/{sweep}/archive/{sweep}-{UTC timestamp}.tar.gz with a
# manifest.json (sha256 of every file, pipeline version, spec hash); `graphsweep verify-archive FILE` checks it.
# The rule has no output file, so it runs every time it is asked for and never replaces an earlier archive.
# Logs are in by default; `--config archive_logs=false` leaves run and rule logs out.


rule archive:
    input:
        get_final_outputs,
        get_summaries,
    log:
        str(PATHS.rule_log("archive")),  # never archived itself (graphsweep/store/archive.py SKIP_FILES)
    localrule: True
    params:
        sweep_dir=get_sweep_dir,
        spec=config["spec"],
        logs=config["archive_logs"],
    script:
        "../scripts/archive.py"
