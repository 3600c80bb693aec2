#!/usr/bin/env bash
# CPU side: pack the Megatron Bridge stack built by tools/megatron-venv.sh into parts that fit one device call each
# (the device tool carries 64 MiB a call, the working tree included), for tools/device_megatron.sh.
#
#   tools/megatron_payload.sh [VENV_DIR] [OUT]     (defaults: $MEGATRON_VENV_DIR or ~/mbvenv, .mbwhl)
#
# Takes VENV_DIR/wheels (Megatron Bridge, Core, TE, TE cu13), VENV_DIR/out (the transformer_engine_torch wheel
# compiled against torch 2.11.0) and the import-time dependency wheels the device lacks (VENV_DIR/deps-wheels, kept
# by megatron-venv.sh; the list that imported on the H200 is shared/recipes/megatron-h200/deps.txt). Never torch or
# the nvidia-* CUDA wheels: the device has them. OUT/p1 .. OUT/pN each hold at most PART_MB (55) MB; the 276 MB
# transformer_engine_cu13 wheel is split into pieces with its sha256 beside them. OUT/SHA256SUMS covers every wheel.
set -euo pipefail
DIR=${1:-${MEGATRON_VENV_DIR:-$HOME/mbvenv}}
OUT=${2:-.mbwhl}
PART_MB=${PART_MB:-55}
DEVICE_HAS=${DEVICE_HAS:-'^(torch|triton|nvidia_|numpy|pandas|pyarrow|scipy|matplotlib|transformers|tokenizers|huggingface_hub|safetensors|pyyaml|packaging|einops|regex|tqdm|rich|six|sentencepiece|filelock|fsspec|jinja2|markupsafe|requests|urllib3|idna|certifi|charset_normalizer|psutil|setuptools|pip|wheel)-'}

rm -rf "$OUT" && mkdir -p "$OUT/all"
cp "$DIR"/wheels/*.whl "$DIR"/out/transformer_engine_torch-*.whl "$OUT/all/"
if [[ -d $DIR/deps-wheels ]]; then
  for w in "$DIR"/deps-wheels/*.whl; do
    name=$(basename "$w" | tr 'A-Z-' 'a-z_')
    [[ $name =~ $DEVICE_HAS ]] || cp "$w" "$OUT/all/"
  done
fi
(cd "$OUT/all" && sha256sum *.whl > ../SHA256SUMS)

big=$(cd "$OUT/all" && ls transformer_engine_cu13-*.whl)
(cd "$OUT/all" && split -b "${PART_MB}m" -d -a 1 "$big" "$big.piece." && rm "$big")
part=1 size=0
mkdir -p "$OUT/p1"
for f in $(cd "$OUT/all" && ls -S); do
  s=$(stat -c %s "$OUT/all/$f")
  if (( size > 0 && size + s > PART_MB * 1000 * 1000 )); then part=$((part + 1)) size=0; mkdir -p "$OUT/p$part"; fi
  mv "$OUT/all/$f" "$OUT/p$part/"
  size=$((size + s))
done
rmdir "$OUT/all"
cp "$OUT/SHA256SUMS" "$OUT/p$part/"
for p in "$OUT"/p*; do echo "$(basename "$p"): $(ls "$p" | wc -l) files, $(du -sm "$p" | cut -f1) MB"; done
