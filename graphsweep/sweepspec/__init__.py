"""Stage: the sweep spec. A user's YAML becomes a validated sweep of shapes, cells and runs.

    load     YAML + JSON schema (with defaults) + the rules a schema cannot say + the workload's own checks
    sweep    the Spec: shapes, variants, cells, runs, their stable ids
    source   the `source:` block (logs that already exist)
"""
