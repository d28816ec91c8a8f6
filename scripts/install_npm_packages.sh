#!/usr/bin/env bash
# Installs the npm packages report.html embeds (vega, vega-lite, vega-embed, pinned in
# src/report/vega/package-lock.json) with `npm ci`, before CMake reads their browser builds.
# Installs Debian's npm (and with it nodejs) only when npm is missing. Skips npm ci when the
# installed tree already matches the lockfile. Used by setup.sh and sanitize.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/src/report/vega"
command -v npm >/dev/null || "$root/scripts/install_packages.sh" npm
stamp="$dir/node_modules/.normlab-package-lock.json"
if [ -f "$stamp" ] && cmp -s "$stamp" "$dir/package-lock.json"; then
  exit 0
fi
echo "normlab: npm ci in src/report/vega (vega, vega-lite, vega-embed and their dependencies, as package-lock.json pins them, for report.html)" >&2
# npm's own lines ("added 87 packages in 3s") only when it fails: the line above says what happens.
if ! log="$(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error 2>&1)"; then
  printf '%s\n' "$log" >&2
  echo "normlab: npm ci failed in src/report/vega" >&2
  exit 1
fi
cp "$dir/package-lock.json" "$stamp"
