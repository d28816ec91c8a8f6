#!/usr/bin/env bash
# Installs what is missing, builds everything (Release) and runs the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${NORMLAB_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
