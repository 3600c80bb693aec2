#!/usr/bin/env bash
# One device call for issue 8: measure the memory-capped shape's eager and full-iteration peaks (uncapped), place the
# cap between them, then run configs/examples/h200-builtin.yaml through Snakemake + submitit on the H200.
set -u
export PYTHONUNBUFFERED=1
peak() {  # max mem-max-reserved-gigabytes of one uncapped run of the capped shape
  python3 -m graphsweep.workload --hidden 2048 --layers 4 --heads 16 --seq-length 4096 --micro-batch 8 --vocab 8192 \
    --iters 6 --variant "$@" 2>&1 | tee -a "$OUT/memcap-runs.log" \
    | grep -o 'mem-max-reserved-gigabytes: [0-9.]*' | awk '{print $2}' | sort -g | tail -1
}
e=$(peak eager); g=$(peak full_iteration)
total=$(python3 -c "import torch; print(torch.cuda.get_device_properties(0).total_memory/1e9)")
cap=$(python3 -c "e,g,t=$e,$g,$total; print(round((e+g)/2/t, 5) if g > 1.05*e else round(1.02*e/t, 5))")
echo "eager peak reserved ${e} GB, full-iteration peak reserved ${g} GB, GPU ${total} GB -> mem_fraction ${cap}" | tee "$OUT/memcap.txt"
sed -i "s/MEMCAP/${cap}/" configs/examples/h200-builtin.yaml
cp configs/examples/h200-builtin.yaml "$OUT/"
SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-420} bash tools/device_sweep.sh configs/examples/h200-builtin.yaml results/examples
