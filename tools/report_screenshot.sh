#!/usr/bin/env bash
# docs/report-screenshot.png: the real H200 builtin sweep's report.html (results/examples/h200-builtin/, re-derived
# from its run folders by tools/rederive_examples.sh) as headless Chromium draws it, 1400 x 2400 CSS pixels: the
# verdict counts, the Recommendations, the shapes x variants grid and the first rows of the cells table.
#
#   bash tools/report_screenshot.sh                             # results/examples/h200-builtin -> docs/
#   bash tools/report_screenshot.sh REPORT.html OUT.png         # any report (tests/report/test_h200.py does this)
#
# Needs Debian's `chromium` (apt-get install chromium). Nothing is fetched: the report is one self-contained file.
set -euo pipefail
cd "$(dirname "$0")/.."
report=$(realpath "${1:-results/examples/h200-builtin/report.html}")
out=$(realpath -m "${2:-docs/report-screenshot.png}")
chromium=$(command -v chromium || command -v chromium-browser || echo /usr/bin/chromium)
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$profile" \
  --window-size=1400,2400 --screenshot="$out" "file://$report" 2>/dev/null
test -s "$out"
echo "$out"
