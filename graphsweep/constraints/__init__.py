"""Stage: the constraint catalogue. What Megatron refuses, how preflight sees it coming, and the text that proves it.

    hydra      the override grammar of Bridge's command line (KEY=VALUE values)
    graph      the graph view of a config (which impl, which modules, MCore API generation)
    model      the Constraint record
    rules      constraints with a preflight predicate
    offload    fine-grained activation offloading and GTP under graphs, per Megatron Core release
    field      failures users hit in the field (docs/megatron-facts.md §7.1) that a config shows
    runtime    constraints known only by the text a run prints
    catalogue  all of them, and check(settings, env, gpus) -> [Violation]
"""
