#!/usr/bin/env bash
# scripts/normlab builds quietly: nothing on stderr when the build has nothing to do, one
# line for what it compiles ("building normlab (first run)...", "rebuilding normlab..." for
# normlab and its libraries, "building the tests..." for test programs alone), and the
# build's own output when it fails. A stand-in `cmake` first on PATH plays the build,
# so the test never rebuilds the real normlab while other tests use it, and setup.sh runs
# from a copy of scripts/ whose package installers are stand-ins too (no apt, no npm).
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
root="$tmp/root"
mkdir -p "$tmp/bin" "$root/scripts"
cp "$src/scripts/normlab" "$src/scripts/setup.sh" "$root/scripts/"
[ -f "$src/scripts/debian-packages.txt" ] && cp "$src/scripts/debian-packages.txt" "$root/scripts/"
for installer in install_packages.sh install_npm_packages.sh; do
  printf '#!/usr/bin/env bash\nexit 0\n' > "$root/scripts/$installer"
  chmod +x "$root/scripts/$installer"
done
cat > "$tmp/bin/cmake" <<'FAKE'
#!/usr/bin/env bash
# configure: cmake -S SRC -B BUILD ...; build: cmake --build BUILD ...
if [ "$1" = "--build" ]; then
  cat "$FAKE_BUILD_OUTPUT"
  printf '#!/bin/sh\necho "normlab ran: $*"\n' > "$2/normlab"
  chmod +x "$2/normlab"
  exit "${FAKE_BUILD_RC:-0}"
fi
echo "-- Configuring done"
mkdir -p "$4" && touch "$4/CMakeCache.txt"
FAKE
chmod +x "$tmp/bin/cmake"
export PATH="$tmp/bin:$PATH" NORMLAB_BUILD_DIR="$tmp/build" FAKE_BUILD_OUTPUT="$tmp/build_output"
fails=0
check() {  # check NAME WANT_RC WANT_STDOUT WANT_STDERR_PATTERN [NOT_PATTERN] (grep -E on the whole stderr; "" = empty)
  local rc=0
  "$root/scripts/normlab" --version > "$tmp/out" 2> "$tmp/err" || rc=$?
  local err
  err="$(cat "$tmp/err")"
  if [ "$rc" != "$2" ] || [ "$(cat "$tmp/out")" != "$3" ] ||
     { [ -z "$4" ] && [ -n "$err" ]; } || { [ -n "$4" ] && ! grep -Eq "$4" "$tmp/err"; } ||
     { [ -n "${5:-}" ] && grep -Eq "$5" "$tmp/err"; }; then
    echo "FAIL $1: rc $rc, stdout [$(cat "$tmp/out")], stderr [$err]" >&2
    fails=$((fails + 1))
  else
    echo "ok $1"
  fi
}

printf '[  0%%] Building CXX object src/CMakeFiles/a.dir/a.cpp.o\n[100%%] Linking CXX executable normlab\n[100%%] Built target normlab\n' > "$tmp/build_output"
check first_run 0 "normlab ran: --version" '^building normlab \(first run\)\.\.\.$'

printf '[ 50%%] Built target normlab_tensor\n[100%%] Built target normlab\n' > "$tmp/build_output"
check up_to_date 0 "normlab ran: --version" ""

printf '[ 50%%] Building CXX object src/CMakeFiles/a.dir/a.cpp.o\n[100%%] Linking CXX executable normlab\n[100%%] Built target normlab\n' > "$tmp/build_output"
check changed 0 "normlab ran: --version" '^rebuilding normlab\.\.\.$'

# only test programs compiled (scripts/test.sh after a change to a test): normlab is not rebuilt
printf '[ 50%%] Building CXX object tests/CMakeFiles/test_cli.dir/test_cli.cpp.o\n[100%%] Linking CXX executable test_cli\n[100%%] Built target test_cli\n' > "$tmp/build_output"
check tests_only 0 "normlab ran: --version" '^building the tests\.\.\.$' 'rebuilding normlab'

# both: one line for each, once
printf '[ 10%%] Building CXX object src/CMakeFiles/a.dir/a.cpp.o\n[ 20%%] Linking CXX static library liba.a\n[ 50%%] Building CXX object tests/CMakeFiles/t.dir/t.cpp.o\n[ 60%%] Building CXX object tests/CMakeFiles/u.dir/u.cpp.o\n[100%%] Linking CXX executable ../normlab\n' > "$tmp/build_output"
check both 0 "normlab ran: --version" '^rebuilding normlab\.\.\.$'
if [ "$(cat "$tmp/err")" != "$(printf 'rebuilding normlab...\nbuilding the tests...')" ]; then
  echo "FAIL both: stderr [$(cat "$tmp/err")]" >&2
  fails=$((fails + 1))
fi

printf '[ 50%%] Building CXX object src/CMakeFiles/a.dir/a.cpp.o\nsrc/a.cpp:1:1: error: boom\n' > "$tmp/build_output"
FAKE_BUILD_RC=2 check failed 2 "" 'error: boom'

[ "$fails" -eq 0 ] || { echo "setup_quiet: $fails failed" >&2; exit 1; }
