#pragma once
// The fixed style sheet and script of report.html (report/html.cpp fills in the content).
// The script renders each figure with vega-embed (SVG, so the marks are elements a test can
// count), shows a failure in place of the figure, sorts tables on a header click, and leaves
// its state in window.normlabReport = {done, figures, rendered, errors} for scripts that
// check a report in a browser (tests/browser/check_reports.js).

namespace normlab {

inline constexpr const char* kReportCss = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1280px;
       padding: 0 24px 48px; color: #222; }
header h1 { margin: 24px 0 4px; font-size: 22px; }
header p { margin: 0; color: #555; }
nav { position: sticky; top: 0; background: #fff; padding: 8px 0; border-bottom: 1px solid #ddd; z-index: 1; }
nav a { margin-right: 12px; color: #1f5fa8; text-decoration: none; }
h2 { margin: 32px 0 8px; font-size: 18px; border-bottom: 1px solid #eee; }
pre { background: #f6f8fa; padding: 10px; overflow: auto; max-height: 360px; font-size: 12px; }
.figure { margin: 12px 0 0; overflow-x: auto; }
.figpath, .caption { color: #666; font-size: 12px; margin: 2px 0 8px; }
.figerror { color: #c0392b; font-weight: bold; }
.tablewrap { overflow: auto; max-height: 420px; border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 12px; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eee; white-space: nowrap; text-align: left; }
th { position: sticky; top: 0; background: #f0f0f0; cursor: pointer; user-select: none; }
th.asc::after { content: " \25B2"; } th.desc::after { content: " \25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.nonfinite { color: #c0392b; font-weight: bold; }
td.nonfinite { background: #fdecea; }
)css";

inline constexpr const char* kReportJs = R"js(
(function () {
  'use strict';
  var state = { done: false, figures: 0, rendered: 0, errors: [] };
  window.normlabReport = state;
  window.addEventListener('error', function (e) { state.errors.push('page: ' + e.message); });

  function fail(el, message) {
    var p = document.createElement('p');
    p.className = 'figerror';
    p.textContent = 'This figure could not be drawn: ' + message;
    el.replaceChildren(p);
    state.errors.push(el.id + ': ' + message);
  }

  var specs = JSON.parse(document.getElementById('normlab-specs').textContent);
  var ids = Object.keys(specs);
  state.figures = ids.length;
  var options = { renderer: 'svg', actions: { export: true, source: false, compiled: false, editor: false } };
  var jobs = ids.map(function (id) {
    var el = document.getElementById(id);
    return vegaEmbed(el, specs[id], options)
      .then(function () { state.rendered += 1; })
      .catch(function (e) { fail(el, String((e && e.message) || e)); });
  });
  Promise.all(jobs).then(function () {
    state.done = true;
    document.body.setAttribute('data-rendered', state.errors.length ? 'errors' : 'ok');
  });

  // Sorting: numbers by their full value (data-v; nan after every number), text otherwise.
  function key(td) {
    var v = td.getAttribute('data-v');
    if (v === null) return { num: false, text: td.textContent };
    if (v === 'inf') return { num: true, x: Infinity };
    if (v === '-inf') return { num: true, x: -Infinity };
    return { num: true, x: parseFloat(v) };
  }
  function compare(a, b) {
    if (a.num && b.num) {
      if (isNaN(a.x) || isNaN(b.x)) return isNaN(a.x) - isNaN(b.x);
      return a.x < b.x ? -1 : a.x > b.x ? 1 : 0;
    }
    if (a.num !== b.num) return a.num ? -1 : 1;
    return a.text.localeCompare(b.text, undefined, { numeric: true });
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var heads = table.querySelectorAll('thead th');
    heads.forEach(function (th, col) {
      th.addEventListener('click', function () {
        var dir = th.classList.contains('asc') ? -1 : 1;
        heads.forEach(function (h) { h.classList.remove('asc', 'desc'); });
        th.classList.add(dir === 1 ? 'asc' : 'desc');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) { return dir * compare(key(r1.cells[col]), key(r2.cells[col])); });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
)js";

}  // namespace normlab
