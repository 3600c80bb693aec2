#!/usr/bin/env bash
# On the H200 (tools/device_megatron.sh start with PRE='bash benchmarks/data/h200-moe-host-time/run.sh'): the
# eager arm of configs/examples/megatron-moe-128e.yaml once more, outside the workflow, by its exact command
# (tests/golden/megatron-moe-128e.txt, repeat 1), with the host-time line that also gives each region's time
# waiting on the GPU and its profiler events (graphsweep/entry/host_time.py, after ad664cb). Writes
# eager-dropless.log into the folder given (default /tmp/mbres/probe).
set -u
out=${1:-/tmp/mbres/probe}
mkdir -p "$out" && cd "$out" || exit 1
cmd=$(sed -n 3p /tmp/proj/tests/golden/megatron-moe-128e.txt | sed "s#{REPO}#/tmp/proj#g")
t0=$(date +%s)
eval "$cmd" > eager-dropless.log 2>&1
echo "[run.sh] rc=$? wall_s=$(( $(date +%s) - t0 ))" >> eager-dropless.log
