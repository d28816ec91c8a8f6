#!/usr/bin/env bash
# Installs what is missing (with Chromium for the browser check), builds everything
# (Release) and runs the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${NORMLAB_BUILD_DIR:-$root/build}"
# Chromium only for the tests: the browser check of report.html (ctest browser_reports).
"$root/scripts/install_packages.sh" chromium
"$root/scripts/setup.sh"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
