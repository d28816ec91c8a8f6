#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time:
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 60 s each for config, npy, csv
# Builds the targets first, with clang (libFuzzer) + ASan + UBSan, in $NORMLAB_FUZZ_DIR,
# default build-fuzz/ (CMake option NORMLAB_FUZZ; only the libraries the targets need are
# compiled). Installs clang, libclang-rt-14-dev and libomp-14-dev (OpenMP for clang) when missing. Seeds come from
# tests/fuzz/corpus/<target>/ (read only); what the fuzzer finds goes to
# $build/fuzz/corpus-<target>/ and crash inputs to $build/fuzz/artifacts/. Prints the
# executions per target; exits 1 if any target failed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${NORMLAB_FUZZ_DIR:-$root/build-fuzz}"
seconds="${1:-60}"
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(config npy csv)

# Warnings are not errors here: clang warns about things g++ (the main build) does not.
NORMLAB_ASAN_DIR="$build" NORMLAB_TARGETS="${targets[*]/#/fuzz_}" NORMLAB_EXTRA_PACKAGES="clang libclang-rt-14-dev libomp-14-dev" \
  NORMLAB_SANITIZE_CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++ -DNORMLAB_FUZZ=ON -DNORMLAB_WERROR=OFF" \
  "$root/scripts/sanitize.sh" --build-only

export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
summary=""
for t in "${targets[@]}"; do
  work="$build/fuzz/corpus-$t"
  artifacts="$build/fuzz/artifacts/$t/"
  log="$build/fuzz/$t.log"
  mkdir -p "$work" "$artifacts"
  dict=()
  [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
  echo "normlab fuzz: $t for ${seconds}s" >&2
  rc=0
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$artifacts" "${dict[@]}" "$work" "$root/tests/fuzz/corpus/$t" \
    > "$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  result="ok"
  if [ "$rc" -ne 0 ]; then
    result="FAILED (exit $rc; see $log and $artifacts)"
    status=1
    tail -40 "$log" >&2
  fi
  summary+="$(printf '%-8s %6ss %12s execs  %s' "$t" "$seconds" "${execs:-?}" "$result")"$'\n'
done
printf 'normlab fuzz summary:\n%s' "$summary" >&2
exit "$status"
