#!/usr/bin/env bash
# CPU side: pack the Megatron Bridge stack downloaded by tools/megatron-venv.sh into parts that fit one device call
# each (the device tool carries 64 MiB a call, the working tree included: 29 MB on 2026-12-04), for tools/device_megatron.sh.
#
#   tools/megatron_payload.sh [VENV_DIR] [OUT]     (defaults: $MEGATRON_VENV_DIR or ~/mbvenv, .mbwhl)
#
# Takes VENV_DIR/wheels (Megatron Bridge, Core, TE, TE cu13, and TE's torch extension as its sdist: the GPU machine
# builds it in about 110 s on its 16 cores, where the 2-core CPU machines take 10-25 min) and, from
# VENV_DIR/deps-wheels (kept by megatron-venv.sh), the import-time dependencies the H200 image lacks
# (tools/megatron-device-deps.txt). Never torch or the nvidia-* CUDA wheels: the device has them.
# OUT/p1 is the sdist alone (the device starts its build in the first call, beside the controller's wheels);
# OUT/p2 .. OUT/pN hold at most PART_MB (32) MiB each;
# OUT/SHA256SUMS (in every part) covers every file as the device reassembles it.
set -euo pipefail
DIR=${1:-${MEGATRON_VENV_DIR:-$HOME/mbvenv}}
OUT=${2:-.mbwhl}
PART_MB=${PART_MB:-32}
DEPS=${DEPS:-$(dirname "$0")/megatron-device-deps.txt}

rm -rf "$OUT" && mkdir -p "$OUT/all"
cp "$DIR"/wheels/*.whl "$DIR"/wheels/transformer_engine_torch-*.tar.gz "$OUT/all/"
for name in $(grep -v '^#' "$DEPS"); do
  w=$(ls "$DIR"/deps-wheels/*.whl | awk -F/ -v n="$name" '{f=$NF; split(f, a, "-"); if (tolower(a[1]) == n) print}')
  [[ -n $w ]] || { echo "no wheel for $name in $DIR/deps-wheels (run tools/megatron-venv.sh)" >&2; exit 1; }
  cp $w "$OUT/all/"
done
(cd "$OUT/all" && sha256sum *.whl *.tar.gz > ../SHA256SUMS)
# the 276 MB transformer_engine_cu13 wheel travels in pieces (its fat binaries do not compress: xz -6 of its
# uncompressed contents came to 265 MB, 2026-12-02)
big=$(cd "$OUT/all" && ls transformer_engine_cu13-*.whl)
(cd "$OUT/all" && split -b "${PART_MB}m" -d -a 1 "$big" "$big.piece." && rm "$big")

# p1 is the sdist alone: it travels with the setup call (the controller's 31 MB of wheels) and its build starts there
mkdir -p "$OUT/p1" "$OUT/p2"
mv "$OUT"/all/transformer_engine_torch-*.tar.gz "$OUT/p1/"
part=2 size=0
for f in $(cd "$OUT/all" && ls -S); do
  s=$(stat -c %s "$OUT/all/$f")
  if (( size > 0 && size + s > PART_MB * 1024 * 1024 )); then part=$((part + 1)) size=0; mkdir -p "$OUT/p$part"; fi
  mv "$OUT/all/$f" "$OUT/p$part/"
  size=$((size + s))
done
rmdir "$OUT/all"
for p in "$OUT"/p*; do cp "$OUT/SHA256SUMS" "$p/"; echo "$(basename "$p"): $(ls "$p" | wc -l) files, $(du -sm "$p" | cut -f1) MB"; done
