#!/usr/bin/env bash
# Device-side (GPU machine): run a sweep through Snakemake + submitit (local executor) on the GPU itself, with the
# controller's wheels carried in .whl/, then bring the results back under $OUT.
#   usage (through the device tool, carry .whl): bash tools/device_sweep.sh configs/examples/h200-builtin.yaml results/examples
# Make .whl/ here first (Python 3.12 wheels of the controller's packages, ~30 MB; the GPU machine has torch and numpy):
#   .venv/bin/pip freeze --exclude-editable | grep -viE '^(torch|numpy|pip|setuptools|pytest.*|iniconfig|pluggy|duckdb|
#     polars.*|sympy|mpmath|networkx|filelock|fsspec|pyarrow|scipy|pandas|matplotlib|pillow|fonttools|kiwisolver|
#     contourpy|cycler|pyparsing|python.dateutil|tzdata)==' > /tmp/reqs.txt
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl -r /tmp/reqs.txt
#   (connection_pool has no wheel: `pip wheel --no-deps -w .whl connection_pool==0.0.3`); echo /.whl/ >> .git/info/exclude
# Without pandas/pyarrow/scipy/matplotlib on the GPU machine the sweep stops after the run rule there; bring
# results.tgz back, unpack it here and finish without rerunning anything on this CPU:
#   snakemake --cores 2 --config spec=SPEC results=results/examples --rerun-triggers mtime \
#     --allowed-rules plan parse aggregate compare report all
set -u
SPEC=$1
RESULTS=${2:-results/examples}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.log" 2>&1 || { tail -20 "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
TARGET=()
# parse/compare/report need pandas, pyarrow, scipy and matplotlib; without them the device runs up to the run rule
python3 -c "import pandas, pyarrow, scipy, matplotlib" 2>/dev/null || TARGET=(--until run)
SWEEP=$(python3 -c "import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))['sweep'])" "$SPEC")
start=$(date +%s)
# one GPU: runs must not share it (--resources gpus=1); the other rules use the remaining cores
# -k: Snakemake waits for running jobs on SIGTERM; kill it for sure so the results still come back
timeout -k 15 "${SWEEP_TIMEOUT:-480}" python3 -m snakemake --cores 12 --resources gpus=1 --keep-going \
  --config spec="$SPEC" results="$RESULTS" "${TARGET[@]}" > "$OUT/snakemake.log" 2>&1
rc=$?; pkill -f graphsweep.entry.builtin_gpt; pkill -f submitit
echo "snakemake rc=$rc after $(( $(date +%s) - start )) s (target: ${TARGET[*]:-all})"
tar czf "$OUT/results.tgz" --exclude=.jobs --exclude='*.pkl' "$RESULTS/$SWEEP"
cp .snakemake/log/*.snakemake.log "$OUT/" 2>/dev/null
grep -E "steps \(|Error|error" "$OUT/snakemake.log" | tail -5
