from graphsweep.archive import make_archive

logs = snakemake.params.logs
include_logs = logs if isinstance(logs, bool) else str(logs).lower() not in ("0", "false", "no", "off")
path = make_archive(snakemake.params.sweep_dir, snakemake.params.spec, include_logs=include_logs)
print(f"graphsweep: archived {snakemake.params.sweep_dir} -> {path} (logs {'in' if include_logs else 'left out'}); "
      f"check it with: graphsweep verify-archive {path}", flush=True)
