#!/usr/bin/env bash
# Regenerates the pictures of report.html that the docs show (scripts/figures/*.png): runs
# configs/padding.json, the sweep template and configs/depth_sweep.json at 48 layers,
# renders their reports in headless Chromium (tests/browser/check_reports.js, which also
# checks them) and keeps three figures.
# Needs chromium and node: apt-get install -y chromium nodejs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
chromium="${NORMLAB_CHROMIUM:-$(command -v chromium || true)}"
[ -n "$chromium" ] && command -v node >/dev/null ||
  { echo "make_figures.sh: needs chromium and node: apt-get install -y chromium nodejs" >&2; exit 1; }
work="results/figures_work"
rm -rf "$work"
mkdir -p "$work"
scripts/normlab run configs/padding.json --out "$work/padding" -q
scripts/normlab init sweep -o "$work/sweep.json" 2>/dev/null
scripts/normlab run "$work/sweep.json" --out "$work/sweep" -q
# the depth sweep's last point only: pre, post and DeepNorm at L = 48
scripts/normlab run configs/depth_sweep.json --out "$work/depth48" -q --set 'sweep={"zip": {"stacks.pre.layers": [48],
  "stacks.post.layers": [48], "stacks.deepnorm.layers": [48]}, "seed_per_point": false}'
node tests/browser/check_reports.js "$chromium" "$work/shots" "$work/padding/report.html" "$work/sweep/report.html" \
  "$work/depth48/report.html"
cp "$work/shots/padding-fig-padding.png" scripts/figures/report_padding.png
cp "$work/shots/sweep-fig-apply_vs_norms_ln_eps.png" scripts/figures/report_sweep.png
cp "$work/shots/depth48-fig-depth.png" scripts/figures/report_depth.png
ls -l scripts/figures/report_padding.png scripts/figures/report_sweep.png scripts/figures/report_depth.png
