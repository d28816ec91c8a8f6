#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer:
#   scripts/sanitize.sh               build (g++, its own folder) and run ctest
#   scripts/sanitize.sh --build-only  build only
# The build folder is $NORMLAB_ASAN_DIR, default build-asan/ (CMake option
# NORMLAB_SANITIZE). g++ as in the main build: clang 14 rejects some C++17 that g++ takes
# (lambdas capturing structured bindings), and the fuzz build (scripts/fuzz.sh, clang) only
# compiles the libraries. Sanitizer reports of every process (the tests and the normlab runs
# they start) go to $build/sanitizer-logs/; any report there fails the run, even when the
# test that started the process did not notice.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${NORMLAB_ASAN_DIR:-$root/build-asan}"
build_only=0
[ "${1:-}" = "--build-only" ] && build_only=1

# setup.sh's packages (g++ brings libasan and libubsan), plus clang's for scripts/fuzz.sh.
mapfile -t packages < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$root/scripts/debian-packages.txt")
packages+=(${NORMLAB_EXTRA_PACKAGES:-})
"$root/scripts/install_packages.sh" "${packages[@]}"
"$root/scripts/install_npm_packages.sh"

if [ ! -f "$build/CMakeCache.txt" ]; then
  # -O1 with line tables (-g1): readable stack traces at a fraction of -O0 -g's cost.
  # Assertions stay on (no NDEBUG).
  # Without the float kernels' FMA versions (NORMLAB_FMA_CLONES): the main build tests the
  # path of CPUs with FMA, this one the path of CPUs without.
  cmake -S "$root" -B "$build" ${NORMLAB_SANITIZE_CMAKE_ARGS:--DCMAKE_CXX_COMPILER=g++ -DNORMLAB_SANITIZE=ON -DNORMLAB_FMA_CLONES=OFF} \
    -DNORMLAB_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" >&2
elif [ -z "${NORMLAB_SANITIZE_CMAKE_ARGS:-}" ] && ! grep -q '^NORMLAB_FMA_CLONES:BOOL=OFF' "$build/CMakeCache.txt"; then
  # A folder configured before that option existed keeps the clones: turn them off there too.
  cmake -S "$root" -B "$build" -DNORMLAB_FMA_CLONES=OFF >&2
fi
targets=()
for t in ${NORMLAB_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}" >&2
[ "$build_only" -eq 1 ] && exit 0

logs="$build/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1"
status=0
(cd "$build" && ctest --output-on-failure -j "$(nproc)") || status=$?
if compgen -G "$logs/*" > /dev/null; then
  echo "normlab sanitize: sanitizer reports:" >&2
  for f in "$logs"/*; do echo "== $f" >&2; cat "$f" >&2; done
  status=1
fi
[ "$status" -eq 0 ] && echo "normlab sanitize: ASan + UBSan: all tests passed, no sanitizer reports" >&2
exit "$status"
