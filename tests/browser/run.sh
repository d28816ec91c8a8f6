#!/usr/bin/env bash
# The browser check of report.html (ctest: browser_reports). Runs every shipped config, a
# sweep, and the same sweep in two shards merged, then opens each report.html in headless
# Chromium (check_reports.js). Three broken copies of a report are checked first and must fail,
# so a check that passes everything cannot go unnoticed.
#   tests/browser/run.sh NORMLAB SOURCE_DIR WORK_DIR
# Without chromium or node it prints why and exits 77 (ctest: skipped), except under CI=true,
# where it fails: scripts/test.sh installs both.
set -euo pipefail
normlab="$1" src="$2" work="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
chromium="${NORMLAB_CHROMIUM:-$(command -v chromium || true)}"
node="$(command -v node || true)"
if [ -z "$chromium" ] || [ -z "$node" ]; then
  # An if, not `[ … ] && echo`: under set -e a false test in an assignment ends the script.
  missing=""
  if [ -z "$chromium" ]; then missing="chromium"; fi
  if [ -z "$node" ]; then missing="${missing:+$missing }node"; fi
  if [ "${CI:-}" = "true" ]; then
    echo "browser_reports: FAILED: $missing not found, and CI must run the browser check (scripts/test.sh installs them)" >&2
    exit 1
  fi
  echo "browser_reports: SKIPPED: $missing not found; install with: apt-get install chromium nodejs" >&2
  exit 77
fi

rm -rf "$work"
mkdir -p "$work"
reports=()
for config in "$src"/configs/*.json; do
  name="$(basename "$config" .json)"
  "$normlab" run "$config" --out "$work/$name" -q
  reports+=("$work/$name/report.html")
done
"$normlab" init sweep -o "$work/sweep.json" 2>/dev/null
"$normlab" run "$work/sweep.json" --out "$work/sweep" -q
"$normlab" run "$work/sweep.json" --shard 0/2 --out "$work/shard0" -q
"$normlab" run "$work/sweep.json" --shard 1/2 --out "$work/shard1" -q
"$normlab" merge "$work/sweep_merged" "$work/shard0" "$work/shard1"
reports+=("$work/sweep/report.html" "$work/sweep_merged/report.html")
for dir in sweep sweep_merged; do
  for swept in norms_ln_eps data_tokens_std; do
    test -f "$work/$dir/figures/apply_vs_$swept.vl.json" || { echo "$dir: no apply_vs_$swept figure" >&2; exit 1; }
  done
done

# Negative controls: a figure that cannot be compiled, a console error, and a warning (as
# Vega gives for a panel layer without rows).
mkdir -p "$work/broken_figure" "$work/console_error" "$work/console_warning"
sed '0,/"mark":{"type":"/s//"mark":{"type":"no_such_mark_/' "$work/quickstart/report.html" > "$work/broken_figure/report.html"
sed "0,/'use strict';/s//'use strict'; console.error('injected');/" "$work/quickstart/report.html" > "$work/console_error/report.html"
sed "0,/'use strict';/s//'use strict'; console.warn('injected warning');/" "$work/quickstart/report.html" > "$work/console_warning/report.html"
if out="$("$node" "$here/check_reports.js" "$chromium" "$work/screenshots_controls" \
            "$work/broken_figure/report.html" "$work/console_error/report.html" \
            "$work/console_warning/report.html")"; then
  echo "$out"
  echo "browser_reports: the broken reports passed the check: it cannot fail" >&2
  exit 1
fi
echo "$out" | grep -q "figure error: fig-" || { echo "$out"; echo "control: broken figure not reported" >&2; exit 1; }
echo "$out" | grep -q "console.error: injected" || { echo "$out"; echo "control: console error not reported" >&2; exit 1; }
echo "$out" | grep -q "console.warning: injected warning" || { echo "$out"; echo "control: console warning not reported" >&2; exit 1; }
echo "$out" | grep -q "0 passed, 3 failed" || { echo "$out"; echo "controls: not all three broken reports failed" >&2; exit 1; }
echo "negative controls: the three broken reports fail the check, as they must"

"$node" "$here/check_reports.js" "$chromium" "$work/screenshots" "${reports[@]}"
