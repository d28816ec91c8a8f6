#!/usr/bin/env bash
# Installs the Debian 12 packages normlab needs (only the missing ones) and the npm packages
# report.html embeds (npm ci, pinned by src/report/vega/package-lock.json), then builds it in
# Release into build/. Idempotent: a second run only re-runs the incremental build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mapfile -t packages < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$root/scripts/debian-packages.txt")

"$root/scripts/install_packages.sh" "${packages[@]}"
"$root/scripts/install_npm_packages.sh"

build="${NORMLAB_BUILD_DIR:-$root/build}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$build" -j "$(nproc)" ${NORMLAB_TARGET:+--target "$NORMLAB_TARGET"} >&2
