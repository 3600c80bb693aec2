#!/usr/bin/env bash
# Device-side probe (GPU machine): which controller packages exist, and peak memory of eager vs graph arms of one
# activation-heavy shape, to place the memory cap of the graph-only-OOM cell between them.
set -u
python3 - <<'PY' > "$OUT/device-packages.txt"
import importlib.metadata as m
for n in ["pandas", "pyarrow", "scipy", "matplotlib", "pillow", "python-dateutil", "tzdata", "jsonschema", "pyyaml",
          "rich", "pydantic", "sqlalchemy", "requests", "jinja2", "psutil", "packaging", "cloudpickle", "numpy", "torch"]:
    try:
        print(n, m.version(n))
    except Exception:
        print(n, "-")
PY
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/gpu.txt"
for v in eager full_iteration "scoped --scope attn,mlp"; do
  echo "=== $v"
  python3 -m graphsweep.workload --hidden 2048 --layers 4 --heads 16 --seq-length 4096 --micro-batch 8 --iters 8 \
    --variant $v 2>&1 | grep -E "memory|Error|error|capture|iteration +8/" | tail -6
done > "$OUT/probe.txt" 2>&1
cat "$OUT/device-packages.txt" "$OUT/gpu.txt" "$OUT/probe.txt"
