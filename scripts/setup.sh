#!/usr/bin/env bash
# Installs the Debian 12 packages normlab needs (only the missing ones) and the npm packages
# report.html embeds (npm ci, pinned by src/report/vega/package-lock.json), then builds it in
# Release into build/. Idempotent: a second run only re-runs the incremental build, and
# prints nothing when there is nothing to rebuild.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mapfile -t packages < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$root/scripts/debian-packages.txt")

"$root/scripts/install_packages.sh" "${packages[@]}"
"$root/scripts/install_npm_packages.sh"

# The build is quiet: its own output goes to a log, shown only when it fails; a line on
# stderr says what is compiled ("rebuilding normlab..." for normlab and its libraries,
# "building the tests..." for the test programs), each once; nothing at all when everything
# is up to date.
build="${NORMLAB_BUILD_DIR:-$root/build}"
mkdir -p "$build"
log="$build/normlab-build.log"
announced=0
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "building normlab (first run)..." >&2
  announced=1
  if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release > "$log" 2>&1; then
    cat "$log" >&2
    exit 1
  fi
fi
set +e
cmake --build "$build" -j "$(nproc)" ${NORMLAB_TARGET:+--target "$NORMLAB_TARGET"} 2>&1 | tee "$log" |
  awk -v announced="$announced" '/(Building|Linking) / && !announced {
    part = "building the tests..."
    if ($0 ~ /object src\// || $0 ~ /executable (.*\/)?normlab$/ || ($0 ~ /static library/ && $0 !~ /test/))
      part = "rebuilding normlab..."
    if (!(part in said)) { print part > "/dev/stderr"; fflush("/dev/stderr"); said[part] = 1 } }'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  cat "$log" >&2
  exit "$status"
fi
