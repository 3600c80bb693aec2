#!/usr/bin/env bash
# Device side (one GPU machine lent call by call): Megatron Bridge sweeps through graphsweep's own Snakemake +
# submitit workflow. Calls must follow each other within the machine's idle limit (30 s): /tmp is the only state.
#
#   bash tools/device_megatron.sh setup             carry .whl (controller wheels, see tools/device_sweep.sh) and
#                                                   .mbwhl/p1 (TE's torch sdist): install the wheels, copy this
#                                                   checkout to /tmp/proj, start building the sdist (about 110 s on
#                                                   16 cores) in the background while the next calls carry the rest
#   bash tools/device_megatron.sh stash pN          carry .mbwhl (tools/megatron_payload.sh): keep part N in /tmp/mbx
#   bash tools/device_megatron.sh start SPEC...     wait for the TE build, reassemble + install the Megatron wheels
#                                                   (once), then run the specs one after another, detached
#                                                   (PRE='cmd' runs cmd first in that session: a lone run)
#   bash tools/device_megatron.sh wait SECONDS      wait (at most SECONDS), report, pack results into $OUT
#
# The controller (Snakemake and its local rules) runs on cores CONTROLLER_CPUS (default 12-15) and the training jobs
# on JOB_CPUS (default 0-11, GRAPHSWEEP_CPUS for graphsweep/entry/affinity.py): the sweep's quiet jobs pin their
# threads there, away from the controller's parse and look jobs.
#
# Then on the CPU: unpack $OUT/results-*.tgz into results/examples/ and finish with --allowed-rules plan parse
# aggregate compare report all (docs/results-h200.md has the exact commands).
set -u
MBX=/tmp/mbx SITE=/tmp/site MBSITE=/tmp/mbsite PROJ=/tmp/proj RES=/tmp/mbres
export PYTHONPATH=$SITE:$MBSITE:$PROJ PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# NVLink multicast stays off in every process (device KINDS.md: it can take a shared host's GPUs down)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTHONDONTWRITEBYTECODE  # the image sets it: every import would compile again in every run
T0=$(date +%s)
took() { echo "[device_megatron] $1 took $(( $(date +%s) - T0 )) s"; }

case ${1:-} in
stash)
  mkdir -p $MBX && cp .mbwhl/"$2"/* $MBX/ && ls $MBX | wc -l && took "stash $2" ;;
setup)
  mkdir -p $MBX/src && cp .mbwhl/p1/* $MBX/
  # TE's torch extension against this machine's torch and CUDA (tools/megatron-venv.sh step 5, the same flags)
  cat > $MBX/te_build.sh <<'EOF2'
set -eu
cd /tmp/mbx/src && tar xzf /tmp/mbx/transformer_engine_torch-*.tar.gz && cd transformer_engine_torch-*
NV=$(python3 -c "import nvidia; print(list(nvidia.__path__)[0])")
export CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")") NVTE_FRAMEWORK=pytorch NVTE_PYTORCH_FORCE_BUILD=TRUE MAX_JOBS=16
export CPATH=$NV/cu13/include:$NV/cudnn/include:$NV/nccl/include
python3 -m pip wheel --no-build-isolation --no-deps -w /tmp/mbx/built .
EOF2
  (setsid nohup bash -c "bash $MBX/te_build.sh > $MBX/te_build.log 2>&1; echo \$? > $MBX/te_build.rc" < /dev/null > /dev/null 2>&1 &)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE .whl/*.whl \
    > $MBX/pip_site.log 2>&1 || { tail -20 $MBX/pip_site.log; exit 1; }
  rm -rf $PROJ && mkdir -p $PROJ && tar cf - --exclude=./.whl --exclude=./.mbwhl --exclude=./.snakemake --exclude=./results . | tar xf - -C $PROJ
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -m snakemake --version && took setup ;;
start)
  shift
  for p in .mbwhl/p*/; do [[ -d $p ]] && cp "$p"* $MBX/; done  # a last small part may travel with this call
  if [[ ! -f $MBSITE/.installed ]]; then
    (cd $MBX && big=$(ls transformer_engine_cu13-*.whl.piece.0 | sed 's/\.piece\.0$//') && cat "$big".piece.* > "$big" \
      && rm "$big".piece.* && sha256sum --quiet -c SHA256SUMS) || { echo "payload incomplete or corrupt"; exit 3; }
    while [[ ! -f $MBX/te_build.rc ]]; do sleep 2; done
    [[ $(cat $MBX/te_build.rc) == 0 ]] || { tail -30 $MBX/te_build.log; echo "TE torch build failed"; exit 5; }
    took "TE torch built"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $MBSITE $MBX/*.whl \
      $MBX/built/transformer_engine_torch-*.whl > $MBX/pip_mb.log 2>&1 || { tail -20 $MBX/pip_mb.log; exit 4; }
    # the Core wheel ships its dataset helper compiled but no Makefile, and Bridge runs make (megatron-venv.sh #4)
    printf 'all:\n\t@true\n' > $MBSITE/megatron/core/datasets/Makefile && touch $MBSITE/.installed && took install
  fi
  # every cell's exact command through Bridge's own validation before any GPU second (tools/check_bridge_argv.py)
  for spec in "$@"; do
    [[ -n ${SKIP_CHECK:-} ]] && break
    (cd $PROJ && python3 tools/check_bridge_argv.py "$spec" > $MBX/check.log 2>&1); rc=$?
    grep -v -i warn $MBX/check.log | tail -40
    (( rc == 0 )) || { echo "a cell of $spec fails Bridge's validation: not started"; exit 6; }
  done
  took "argv check"
  cat > $MBX/sweeps.sh <<EOF
cd $PROJ
export GRAPHSWEEP_CPUS=${JOB_CPUS:-0-11}
${PRE:-}
for spec in $*; do
  echo "=== \$spec \$(date +%T)"
  taskset -c ${CONTROLLER_CPUS:-12-15} python3 -m snakemake --cores 4 --resources gpus=1 --keep-going \\
    --config spec=\$spec results=$RES
  echo "=== \$spec rc=\$? \$(date +%T)"
done
touch $MBX/sweeps.done
EOF
  rm -f $MBX/sweeps.done
  setsid nohup bash $MBX/sweeps.sh > $MBX/smk.log 2>&1 < /dev/null &
  echo $! > $MBX/smk.pid && took "start $*" ;;
wait)
  while [[ ! -f $MBX/sweeps.done ]] && (( $(date +%s) - T0 < ${2:-500} )); do sleep 5; done
  [[ -f $MBX/sweeps.done ]] && echo "sweeps finished" || echo "sweeps still running"
  grep -E "^===|steps \(|Error|error:" $MBX/smk.log | tail -12
  for d in $RES/*/; do
    s=$(basename "$d")
    echo "$s: $(ls "$d/runs" 2>/dev/null | wc -l) run folders, $(ls "$d"/runs/*/run.json 2>/dev/null | wc -l) finished"
    tar czf "$OUT/results-$s.tgz" -C $RES --exclude='*.pkl' "$s"
  done
  cp $MBX/smk.log "$OUT/" ; took wait ;;
*)
  sed -n 2,14p "$0"; exit 2 ;;
esac
