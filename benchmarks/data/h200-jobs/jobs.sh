#!/bin/bash
# Repeated independent jobs (fresh processes) of the probe, interleaved, to measure between-job spread.
set -u
D=/tmp/gs-runs/runs; mkdir -p $D
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $D/gpu.txt
M="--hidden 1024 --layers 8 --seq 512 --mbs 2 --iters 40"
L="--hidden 2048 --layers 8 --seq 2048 --mbs 4 --iters 40"
for r in $(seq 1 ${REPS:-10}); do
  timeout 90 python3 probe.py --mode eager $M > $D/medium-eager-$r.log 2>&1
  timeout 90 python3 probe.py --mode full_iteration $M > $D/medium-graph-$r.log 2>&1
  timeout 90 python3 probe.py --mode eager $L > $D/large-eager-$r.log 2>&1
  echo "rep $r done $(date +%T)"; tar czf $OUT/probe-runs.tar.gz -C /tmp/gs-runs runs
done

