# The decision loop (graphsweep/plan/decide.py): look k judges the runs of looks 1..k and writes looks/look-{k}.json,
# what it decided and the runs look k + 1 needs (a round of repeats for the shapes with an undecided cell). It is a
# checkpoint: Snakemake re-evaluates the DAG after it, so the next look's runs are submitted and judged in the same
# invocation, until a look says the loop is over (every cell decided or dropped, or the budget spent). After Ctrl-C
# or a killed controller the looks are taken again from the files: finished runs stay, nothing runs twice. update(): a
# look that fails (a damaged run file) leaves the last good record in place (rules/parse.smk).
checkpoint look:
    input:
        unpack(get_look_inputs),
    output:
        update(str(PATTERN.look("{look}"))),
    log:
        str(PATTERN.rule_log("look", "{look}")),
    localrule: True
    params:
        sweep_dir=get_sweep_dir,
        rounds=get_rounds,  # --config rounds=false: judge the runs there are, submit no new round
    script:
        "../scripts/look.py"
