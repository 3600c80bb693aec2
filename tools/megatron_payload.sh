#!/usr/bin/env bash
# CPU side: pack the Megatron Bridge stack built by tools/megatron-venv.sh into parts that fit one device call each
# (the device tool carries 64 MiB a call, the working tree included), for tools/device_megatron.sh.
#
#   tools/megatron_payload.sh [VENV_DIR] [OUT]     (defaults: $MEGATRON_VENV_DIR or ~/mbvenv, .mbwhl)
#
# Takes VENV_DIR/wheels (Megatron Bridge, Core, TE, TE cu13), VENV_DIR/out (the transformer_engine_torch wheel
# compiled against torch 2.11.0) and, from VENV_DIR/deps-wheels (kept by megatron-venv.sh), the import-time
# dependencies the H200 image lacks (tools/megatron-device-deps.txt). Never torch or the nvidia-* CUDA wheels: the
# device has them. OUT/p1 .. OUT/pN each hold at most PART_MB (60) MB; the 276 MB transformer_engine_cu13 wheel is
# split into pieces. OUT/SHA256SUMS (in the last part) covers every wheel.
set -euo pipefail
DIR=${1:-${MEGATRON_VENV_DIR:-$HOME/mbvenv}}
OUT=${2:-.mbwhl}
PART_MB=${PART_MB:-60}
DEPS=${DEPS:-$(dirname "$0")/megatron-device-deps.txt}

rm -rf "$OUT" && mkdir -p "$OUT/all"
cp "$DIR"/wheels/*.whl "$DIR"/out/transformer_engine_torch-*.whl "$OUT/all/"
for name in $(grep -v '^#' "$DEPS"); do
  w=$(ls "$DIR"/deps-wheels/*.whl | awk -F/ -v n="$name" '{f=$NF; split(f, a, "-"); if (tolower(a[1]) == n) print}')
  [[ -n $w ]] || { echo "no wheel for $name in $DIR/deps-wheels (run tools/megatron-venv.sh)" >&2; exit 1; }
  cp $w "$OUT/all/"
done
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
