#!/usr/bin/env bash
# Megatron Core 0.17.1, 0.18.2 and 0.19.2, each unpacked from its PyPI wheel into its own directory, for the truth
# check per release (tests/constraints/test_preflight_releases.py, graphsweep/workloads/core_check.py):
# TransformerConfig's graph rules run on a CPU without TE, so a release needs only its own files plus a Python 3.12 with
# torch, numpy and packaging. That Python is the Bridge venv's (tools/megatron-venv.sh; its step 2 installs torch 2.11.0
# before any TE build), shared by all releases: no second torch, no CUDA wheels downloaded here.
#
#   tools/core-releases.sh [DIR]   (default $CORE_RELEASES_DIR or ~/mcore-releases; DIR/<version>/megatron/core)
#   PYTHON=/path/to/python3.12     (default $MEGATRON_VENV_DIR/venv/bin/python, ~/mbvenv/venv/bin/python)
#
# Idempotent: a release whose DIR/<version>/.complete exists and whose wheel matches its sha256 is skipped.
# Exit 3 when this machine cannot build them (no Python 3.12 with torch): .ci/run reports that as "not buildable
# here" instead of a failure. Any other failure exits 1. The timing of every step is printed.
set -euo pipefail

DIR=${1:-${CORE_RELEASES_DIR:-$HOME/mcore-releases}}
VPY=${PYTHON:-${MEGATRON_VENV_DIR:-$HOME/mbvenv}/venv/bin/python}
RELEASES=(0.17.1 0.18.2 0.19.2)
T0=$(date +%s)
step() { printf '[core-releases %s +%ss] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - T0))" "$*"; }

if [[ ! -x $VPY ]] || ! "$VPY" -c 'import sys, torch, numpy, packaging; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
  step "NOT BUILDABLE: $VPY is not a Python 3.12 with torch, numpy and packaging (run tools/megatron-venv.sh, or set PYTHON)"
  exit 3
fi

mkdir -p "$DIR/wheels"
# sha256 of the PyPI wheels (0.19.2: the file tools/megatron-venv.sh pins too)
cat >"$DIR/wheels/SHA256SUMS" <<'EOF'
6dd0826489ee70a791e38612b25e914c4a18b0b074f2282353f235ee96273cf2  megatron_core-0.17.1-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
c2717b84079bf0bad1151525533a251870d1a86201f8c0702e0b5a6d6b5594f1  megatron_core-0.18.2-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
8e3e486f13f559450415b9b9dc0ff3331a0bb83dd154553f7f350a75ff9c42b5  megatron_core-0.19.2-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
EOF

for v in "${RELEASES[@]}"; do
  whl=megatron_core-$v-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
  sum=$(grep " $whl\$" "$DIR/wheels/SHA256SUMS")
  if [[ -f $DIR/$v/.complete ]] && (cd "$DIR/wheels" && echo "$sum" | sha256sum --quiet -c - >/dev/null 2>&1); then
    step "$v: present ($DIR/$v)"
    continue
  fi
  if ! (cd "$DIR/wheels" && echo "$sum" | sha256sum --quiet -c - >/dev/null 2>&1); then
    # the Bridge venv downloaded 0.19.2 already
    cached=${MEGATRON_VENV_DIR:-$HOME/mbvenv}/wheels/$whl
    if [[ -f $cached ]]; then cp "$cached" "$DIR/wheels/"; else
      step "$v: download megatron-core==$v (no dependencies)"
      "$VPY" -m pip download -q --no-deps -d "$DIR/wheels" "megatron-core==$v" >"$DIR/download-$v.log" 2>&1 \
        || { tail -20 "$DIR/download-$v.log"; step "FAILED: download megatron-core==$v"; exit 1; }
    fi
    (cd "$DIR/wheels" && echo "$sum" | sha256sum -c -) || { step "FAILED: sha256 of $whl"; exit 1; }
  fi
  step "$v: unpack into $DIR/$v"
  rm -rf "$DIR/$v"
  "$VPY" -m zipfile -e "$DIR/wheels/$whl" "$DIR/$v"
  touch "$DIR/$v/.complete"
done

# check: each release's own TransformerConfig refuses TE graphs with CPU offloading (every release since 0.17)
# and says which version it is, through the worker the truth check uses
REPO=$(cd "$(dirname "$0")/.." && pwd)
for v in "${RELEASES[@]}"; do
  out=$(echo '{"id": "check", "model": {"cuda_graph_impl": "transformer_engine", "cpu_offloading": true}}' \
        | CUDA_VISIBLE_DEVICES= timeout 300 "$VPY" "$REPO/graphsweep/workloads/core_check.py" --core "$DIR/$v" --serve 2>"$DIR/check-$v.log") \
    || { tail -20 "$DIR/check-$v.log"; step "FAILED: core_check on $v"; exit 1; }
  echo "$out" | grep -q "\"version\": \"$v\"" || { echo "$out"; step "FAILED: $DIR/$v is not Core $v"; exit 1; }
  echo "$out" | grep -q 'CUDA graphs not supported with CPU offloading.' || { echo "$out"; step "FAILED: Core $v accepted a bad config"; exit 1; }
  step "check $v: ok (TransformerConfig refuses TE graphs with CPU offloading)"
done
step "done: ${RELEASES[*]} in $DIR"
