#!/usr/bin/env bash
# Regenerates the README's figures from the shipped configs (needs gnuplot-nox).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
command -v gnuplot >/dev/null || { echo "make_figures.sh: install gnuplot first: apt-get install -y gnuplot-nox" >&2; exit 1; }
scripts/normlab run configs/quickstart.json --out results/quickstart -q
scripts/normlab run configs/epsilon.json --out results/epsilon -q
scripts/normlab run configs/padding.json --out results/padding -q
scripts/plot.py stats results/quickstart scripts/figures/stats.png
scripts/plot.py epsilon results/epsilon scripts/figures/epsilon.png tokens/ln tokens/bn
scripts/plot.py padding results/padding scripts/figures/padding.png
