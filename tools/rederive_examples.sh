#!/usr/bin/env bash
# Re-derive the committed example sweeps (results/examples/{sweep}/: the four tables, report.md, report.html and
# each run's parse output) from their real run folders, on a CPU, with today's pipeline. Nothing is submitted: the
# run folders (config.yaml, log.txt, run.json as the GPU jobs wrote them) are newer than everything derived from
# them, so Snakemake only plans, parses, aggregates, compares and reports. Run it whenever the parser or the
# statistics change.
#
#   bash tools/rederive_examples.sh                      # all seven
#   bash tools/rederive_examples.sh h200-builtin         # one
set -euo pipefail
cd "$(dirname "$0")/.."
for sweep in "${@:-h200-builtin megatron-tiny-vanilla-gpt megatron-tiny-moe megatron-1b-dense megatron-moe-128e megatron-moe-128e-padded megatron-moe-128e-paired}"; do
  for s in $sweep; do
    out=results/examples/$s
    rm -f "$out"/{plan,runs,iterations,comparison}.parquet "$out"/report.{md,html} "$out"/runs/*/{iterations.parquet,summary.json}
    rm -rf "$out"/looks
    touch "$out"/runs/*/{log.txt,run.json}
    # rounds=false: the decision loop judges the runs the GPU made and asks for none (they cannot run here)
    args=(--cores 2 --config "spec=configs/examples/$s.yaml" results=results/examples rounds=false
          --rerun-triggers mtime --allowed-rules plan parse aggregate look compare report all)
    # a GPU run is never run again here (its log is the evidence): stop if the dry run would start one
    if .venv/bin/snakemake "${args[@]}" -n 2>&1 | grep -qE '^(localrule|rule) (run|ingest_run):'; then
      echo "rederive: $s would run a job again (see snakemake ${args[*]} -n); nothing changed" >&2; exit 1
    fi
    .venv/bin/snakemake "${args[@]}" --quiet rules
    rm -rf "$out/logs" "$out/owner.json"  # this machine's rule logs and spec path, not the sweep's
  done
done
