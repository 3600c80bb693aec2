"""Stage: store. The sweep's Parquet tables (one schema per file, versioned), their aggregation from run folders,
self-describing archives, and a catalog across sweeps and archives.

    tables     the columns of plan / runs / iterations / comparison, writing and reading with schema versions
    aggregate  run folders -> runs.parquet + iterations.parquet
    timeparts  one run's wall time in parts (start-up, warmup, steady window, teardown): runs.parquet time_*
    archive    results/{sweep} -> a verified tar.gz with a manifest
    catalog    many sweeps and archives -> one hive-partitioned folder (one DuckDB query spans all)
"""
