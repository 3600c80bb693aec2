#!/usr/bin/env bash
# A Python 3.12 venv with Megatron Bridge 0.6.2, Megatron Core 0.19.2, Transformer Engine 2.20.2 and torch 2.11.0,
# in which Bridge's full config validation (runtime_config_update) runs WITHOUT a GPU. It is the interpreter of
# `preflight: megatron` (graphsweep/workloads/bridge_check.py) and of the live truth check
# (tests/constraints/test_bridge_agreement.py).
#
#   tools/megatron-venv.sh [DIR]        (default $MEGATRON_VENV_DIR or ~/mbvenv; DIR/venv/bin/python is the result)
#   GRAPHSWEEP_MEGATRON_PYTHON=DIR/venv/bin/python .venv/bin/python -m pytest tests/constraints/test_bridge_agreement.py -m megatron
#
# Idempotent: every step checks its result first and is skipped when done; rerun it after a failure.
# Exit 3 when this machine cannot build it (no Python 3.12, no CUDA 13 toolkit, too little disk): .ci/run reports
# that as "not buildable here"; any other failure exits 1 and fails CI. Each step prints its elapsed time.
# Everything comes from PyPI. Heavy steps run under `nice -n 19` with MAX_JOBS (default 2): login nodes are shared.
# Needs: pyenv's Python 3.12 (or PYTHON312=/path/to/python3.12), a CUDA 13 toolkit (CUDA_HOME, default
# /usr/local/cuda-13.0; only its headers and nvcc's presence are used: nothing is compiled for a GPU), unzip-free.
# Timings on a shared 2-core node (2026-11-30, load average 10-24 from other work): torch 62 s, import-time deps
# 282 s, TE torch extension build 1238 s (9.5 min on an idle 2-core node per the H200 notes), Megatron/TE/resiliency
# install 52 s, check 30 s. A fresh DIR with the TE wheel already in DIR/out and a warm pip cache: 2 min 9 s.
# From nothing (fresh DIR, empty PIP_CACHE_DIR) on an idle 2-core node: 511 s, TE build included (2026-11-30).
# Disk: 6.2 GB for DIR after a build from nothing (du -sh, 2026-11-30), most of it torch's CUDA wheels.
#
# Workarounds, each found on the H200 path or here (docs/megatron-facts.md §8.2 has their sources):
#  1. transformer_engine_torch is published only as an sdist of C++: built here with NVTE_FRAMEWORK=pytorch
#     NVTE_PYTORCH_FORCE_BUILD=TRUE (else setup.py tries to download a prebuilt wheel), CUDA_HOME = a CUDA 13
#     toolkit, CPATH = the include folders of the nvidia cu13/cudnn/nccl pip packages, --no-build-isolation so it
#     compiles against the venv's torch 2.11.0. No GPU is needed.
#  2. Bridge's own requirements (flashinfer, mlflow, wandb, comet, open-clip, ... ) are not needed to validate a
#     config: Megatron wheels are installed with --no-deps and only the packages Bridge imports at import time are
#     added (the list that imported on the H200, tools/megatron-device-deps.txt), resolved by pip with torch
#     pinned so nothing replaces torch 2.11.0.
#  3. nvidia-resiliency-ext: Core needs >= 0.6, and 0.6/0.7 have only manylinux_2_39 wheels (glibc 2.39); a login
#     node with an older glibc (Debian 12: 2.36) gets 0.4.1 from pip. 0.7.0 is installed with pip's --platform and
#     --target (no compiled part of it is loaded while validating a config).
#  4. `make: *** No targets specified and no makefile found.` / `Failed to compile the C++ dataset helper
#     functions`: the Core wheel ships the compiled dataset helper but no Makefile and Bridge calls `make` in
#     megatron/core/datasets: a do-nothing Makefile goes there.
#  5. Not a venv step but needed to TRAIN with this stack (not to validate): no APEX, so
#     model.gradient_accumulation_fusion=False (ColumnParallelLinear's fused_weight_gradient_mlp_cuda error).
#  6. Validation without a GPU needs RANK=0 LOCAL_RANK=0 WORLD_SIZE=<gpus> in the environment (bridge_check sets them).
set -euo pipefail

DIR=${1:-${MEGATRON_VENV_DIR:-$HOME/mbvenv}}
PY312=${PYTHON312:-}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
MAX_JOBS=${MAX_JOBS:-2}
NICE="nice -n 19"
TORCH=2.11.0
BRIDGE=0.6.2
CORE=0.19.2
TE=2.20.2
RESILIENCY=0.7.0

mkdir -p "$DIR"/wheels "$DIR"/out "$DIR"/src
VPY="$DIR/venv/bin/python"
SP="$DIR/venv/lib/python3.12/site-packages"
T0=$(date +%s)
step() { printf '[megatron-venv %s +%ss] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - T0))" "$*"; }
cannot() { step "NOT BUILDABLE HERE: $*"; exit 3; }
# a build from nothing takes 6.2 GB (du -sh after one, 2026-11-30)
if [[ ! -x $DIR/venv/bin/python ]] && (( $(df -Pk "$DIR" | awk 'NR==2 {print $4}') < 7 * 1024 * 1024 )); then
  cannot "less than 7 GB free in $DIR (a build from nothing takes 6.2 GB)"
fi
# stdout of pip goes to a log per step; the tail is shown on failure
run_logged() { local log=$1; shift; if ! "$@" >"$log" 2>&1; then tail -25 "$log"; step "FAILED: $* (log: $log)"; exit 1; fi; }
has_version() { "$VPY" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null; }

# sha256 of the PyPI files (the same files that trained on the H200 on 2026-11-30, docs/megatron-facts.md §8.2)
cat >"$DIR/wheels/SHA256SUMS" <<'EOF'
bcb7274ab9327167c345aa24b96b95790ce5090df1945d883bdc41065d5649e2  megatron_bridge-0.6.2-py3-none-any.whl
8e3e486f13f559450415b9b9dc0ff3331a0bb83dd154553f7f350a75ff9c42b5  megatron_core-0.19.2-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
7dcfad943a1a55b2612db9a0e43697fe98c70f4c42ec391ba3a0f872f6ce2094  transformer_engine-2.20.2-py3-none-any.whl
30063d3699e779cce63617c3458804f7a504ce8279f2749c98313db9daae273e  transformer_engine_cu13-2.20.2-py3-none-manylinux_2_28_x86_64.whl
EOF

# 1. Python 3.12 venv ---------------------------------------------------------------------------------------------
if [[ ! -x $VPY ]] || ! "$VPY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
  if [[ -z $PY312 ]]; then
    for c in "$HOME/.pyenv/versions/3.12.1/bin/python" "$(command -v python3.12 || true)"; do
      [[ -n $c && -x $c ]] && PY312=$c && break
    done
    if [[ -z $PY312 ]] && command -v pyenv >/dev/null; then PY312=$(PYENV_VERSION=3.12.1 pyenv which python 2>/dev/null || true); fi
  fi
  [[ -n $PY312 && -x $PY312 ]] || cannot "no Python 3.12 found: set PYTHON312=/path/to/python3.12 (pyenv install 3.12.1)"
  step "1/8 venv with $PY312"
  "$PY312" -m venv "$DIR/venv"
else
  step "1/8 venv: present ($("$VPY" -V))"
fi

# 2. torch 2.11.0 (its CUDA 13 wheels; the nvidia-* packages also carry the headers TE's build needs) ------------
if has_version torch $TORCH; then step "2/8 torch $TORCH: present"; else
  step "2/8 torch $TORCH from PyPI"
  run_logged "$DIR/torch_install.log" $NICE "$VPY" -m pip install "torch==$TORCH"
fi
echo "torch==$TORCH" >"$DIR/constraints.txt"

# 3. Megatron and TE files from PyPI, checked -------------------------------------------------------------------
if ! (cd "$DIR/wheels" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1) || [[ ! -f $DIR/wheels/transformer_engine_torch-$TE.tar.gz ]]; then
  step "3/8 download megatron-bridge $BRIDGE, megatron-core $CORE, transformer-engine $TE (+cu13 wheel, torch sdist)"
  run_logged "$DIR/download.log" $NICE "$VPY" -m pip download --no-deps -d "$DIR/wheels" \
    "megatron-bridge==$BRIDGE" "megatron-core==$CORE" "transformer-engine==$TE" "transformer-engine-cu13==$TE"
  run_logged "$DIR/download_sdist.log" $NICE "$VPY" -m pip download --no-deps --no-binary transformer-engine-torch \
    --no-build-isolation -d "$DIR/wheels" "transformer-engine-torch==$TE"
  (cd "$DIR/wheels" && sha256sum -c SHA256SUMS) || { step "sha256 mismatch in $DIR/wheels (see above)"; exit 1; }
else
  step "3/8 Megatron/TE files: present, sha256 ok"
fi

# 4. what Bridge imports at import time (workaround 2) ----------------------------------------------------------
cat >"$DIR/deps-top.txt" <<'EOF'
omegaconf==2.3.0
antlr4-python3-runtime==4.9.3
hydra-core==1.3.8
nvidia-modelopt==0.47.0
pulp<4
megatron-energon==7.4.1
multi-storage-client==1.3.1
diffusers==0.42.1
datasets==5.2.0
pydantic==2.14.4
nvdlfw-inspect==0.2.2
transformers>=5.8,<=5.12.1
onnxscript
tensorboard>=2.19.0
defusedxml
einops
numpy
pyyaml
tqdm
rich
regex
six
packaging
EOF
# onnxscript: TE's export module; tensorboard: torch.utils.tensorboard; defusedxml: nvidia-resiliency-ext (found by
# the import check on a CPU node: these three were not in the H200 list, they came with that machine's base image)
if "$VPY" -c 'import omegaconf, hydra, modelopt, megatron.energon, diffusers, datasets, transformers, einops, onnxscript, tensorboard, defusedxml' 2>/dev/null; then
  step "4/8 import-time dependencies: present"
else
  step "4/8 import-time dependencies (deps-top.txt, torch pinned)"
  run_logged "$DIR/deps_install.log" $NICE "$VPY" -m pip install -c "$DIR/constraints.txt" -r "$DIR/deps-top.txt"
fi

# 4b. keep the wheels of those dependencies (DIR/deps-wheels): an offline payload for a GPU machine without a
# registry (tools/megatron_payload.sh) needs no second download. torch, the nvidia-* CUDA wheels and the Megatron/TE
# files (step 3) are not kept here.
if [[ -f $DIR/deps-wheels/.complete ]]; then step "4b/8 dependency wheels: kept in $DIR/deps-wheels"; else
  step "4b/8 keep the dependency wheels in $DIR/deps-wheels"
  mkdir -p "$DIR/deps-wheels"
  "$VPY" -m pip freeze --exclude-editable | grep -viE '^(torch|triton|nvidia[-_](cu|nccl|nvjitlink|nvshmem|nvtx)[^=]*|cuda[-_][^=]*|megatron[-_](core|bridge)|transformer[-_]engine[^=]*|pip|setuptools|wheel)==| @ ' \
    > "$DIR/deps-wheels/requirements.txt"
  run_logged "$DIR/deps_download.log" $NICE "$VPY" -m pip wheel --no-deps -w "$DIR/deps-wheels" \
    -r "$DIR/deps-wheels/requirements.txt"
  touch "$DIR/deps-wheels/.complete"
fi

# 5. build TE's torch extension from its sdist (workaround 1) ---------------------------------------------------
TE_TORCH_WHL=$(ls "$DIR"/out/transformer_engine_torch-$TE-cp312-cp312-linux_x86_64.whl 2>/dev/null || true)
if [[ -n $TE_TORCH_WHL ]]; then step "5/8 transformer_engine_torch wheel: present ($TE_TORCH_WHL)"; else
  [[ -x $CUDA_HOME/bin/nvcc ]] || CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc || echo /nonexistent/bin/nvcc)")")
  [[ -x $CUDA_HOME/bin/nvcc ]] || cannot "no CUDA 13 toolkit: set CUDA_HOME (looked for \$CUDA_HOME/bin/nvcc)"
  "$CUDA_HOME/bin/nvcc" --version | grep -q 'release 13' || cannot "$CUDA_HOME is not CUDA 13: $("$CUDA_HOME/bin/nvcc" --version | tail -2)"
  step "5/8 build transformer_engine_torch $TE from its sdist (MAX_JOBS=$MAX_JOBS, nice 19; 10-25 min on 2 cores)"
  rm -rf "$DIR/src/transformer_engine_torch-$TE"
  tar -xzf "$DIR/wheels/transformer_engine_torch-$TE.tar.gz" -C "$DIR/src"
  (
    cd "$DIR/src/transformer_engine_torch-$TE"
    export PATH="$DIR/venv/bin:$CUDA_HOME/bin:$PATH" CUDA_HOME NVTE_FRAMEWORK=pytorch MAX_JOBS NVTE_PYTORCH_FORCE_BUILD=TRUE
    export CPATH="$SP/nvidia/cu13/include:$SP/nvidia/cudnn/include:$SP/nvidia/nccl/include${CPATH:+:$CPATH}"
    run_logged "$DIR/te_build.log" $NICE "$VPY" -m pip wheel -v --no-build-isolation --no-deps -w "$DIR/out" .
  )
  TE_TORCH_WHL=$(ls "$DIR"/out/transformer_engine_torch-$TE-cp312-cp312-linux_x86_64.whl)
fi

# 6. Megatron + TE, no dependencies (workaround 2) --------------------------------------------------------------
if has_version megatron-bridge $BRIDGE && has_version megatron-core $CORE && has_version transformer-engine $TE \
   && has_version transformer-engine-torch $TE; then step "6/8 megatron-bridge/core, transformer-engine: present"; else
  step "6/8 install megatron-bridge $BRIDGE, megatron-core $CORE, transformer-engine $TE (--no-deps)"
  run_logged "$DIR/megatron_install.log" $NICE "$VPY" -m pip install --no-deps \
    "$DIR"/wheels/megatron_bridge-$BRIDGE-py3-none-any.whl "$DIR"/wheels/megatron_core-$CORE-*.whl \
    "$DIR"/wheels/transformer_engine-$TE-py3-none-any.whl "$DIR"/wheels/transformer_engine_cu13-$TE-*.whl "$TE_TORCH_WHL"
fi

# 7. nvidia-resiliency-ext 0.7.0 (workaround 3) -----------------------------------------------------------------
if has_version nvidia-resiliency-ext $RESILIENCY; then step "7/8 nvidia-resiliency-ext $RESILIENCY: present"; else
  step "7/8 nvidia-resiliency-ext $RESILIENCY (manylinux_2_39 wheel via --platform --target)"
  mkdir -p "$DIR/deps-wheels"  # the wheel is kept there for tools/megatron_payload.sh
  run_logged "$DIR/resiliency_install.log" $NICE "$VPY" -m pip download --no-deps --only-binary=:all: \
    --platform manylinux_2_39_x86_64 --python-version 3.12 --implementation cp -d "$DIR/deps-wheels" \
    "nvidia-resiliency-ext==$RESILIENCY"
  # the install names the same --platform: without it pip refuses the file ("is not a supported wheel on this
  # platform") on a glibc older than 2.39; --target is what pip allows --platform with
  run_logged "$DIR/resiliency_install.log" $NICE "$VPY" -m pip install --no-deps --only-binary=:all: \
    --platform manylinux_2_39_x86_64 --python-version 3.12 --implementation cp --target "$SP" --upgrade \
    "$DIR"/deps-wheels/nvidia_resiliency_ext-$RESILIENCY-*.whl
fi

# 8. do-nothing Makefile for Core's dataset helpers (workaround 4), then the check --------------------------------
MK="$SP/megatron/core/datasets/Makefile"
if [[ ! -f $MK ]]; then
  step "8/8 do-nothing Makefile in megatron/core/datasets"
  printf '# graphsweep tools/megatron-venv.sh: the wheel ships helpers_cpp already compiled; Bridge still runs make\nall:\n\t@true\n' >"$MK"
else step "8/8 Makefile: present"; fi

step "check: import Bridge and validate vanilla_gpt_pretrain_config with runtime_config_update (no GPU)"
(cd "$(mktemp -d)" && RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 CUDA_VISIBLE_DEVICES= timeout 600 "$VPY" - <<'EOF'
import importlib.metadata as m
import torch
from megatron.bridge.recipes.gpt.vanilla_gpt import vanilla_gpt_pretrain_config
from megatron.bridge.training.config import runtime_config_update
import megatron.bridge.training.pretrain  # noqa: F401  (the training entry imports too)

def tiny():  # the recipe leaves the model size at 0
    cfg = vanilla_gpt_pretrain_config()
    cfg.model.num_layers, cfg.model.hidden_size, cfg.model.num_attention_heads = 2, 256, 4
    return cfg

runtime_config_update(tiny())
bad = tiny()
bad.model.cuda_graph_impl = "local"
bad.model.cuda_graph_scope = ["full_iteration"]
bad.rerun_state_machine.check_for_nan_in_loss = True
try:
    runtime_config_update(bad)
    raise SystemExit("validator accepted full_iteration with the NaN loss check on: not the expected Bridge")
except AssertionError as exc:
    assert "check_for_nan_in_loss must be disabled" in str(exc), exc
print("VALIDATOR OK", {d: m.version(d) for d in ("torch", "megatron-bridge", "megatron-core", "transformer-engine")})
EOF
) 2>&1 | grep -v -i warn | tail -5
step "done: $VPY"
