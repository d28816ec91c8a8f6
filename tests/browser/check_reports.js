#!/usr/bin/env node
// Opens each report.html in headless Chromium and checks it the way a person would see it:
//   - no console error or warning, no uncaught exception, no request that leaves the file (no network);
//   - every figure container holds a rendered SVG with data marks, and no failure message;
//   - a screenshot of the page is not blank, and neither is the area of each figure.
// Screenshots are kept: SCREENSHOT_DIR/<folder>.png for the page, <folder>-<figure id>.png
// for each figure (scripts/make_figures.sh takes the docs' pictures from them).
// Talks the DevTools protocol over a pipe (--remote-debugging-pipe: fd 3 in, fd 4 out), so
// it needs Node and Chromium only, no npm package and no downloaded browser.
//
//   node check_reports.js CHROMIUM SCREENSHOT_DIR REPORT.html...
//
// Prints one line per report and a closing "N passed, N failed" line; exits 1 on a failure.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');

const [chromium, shotDir, ...reports] = process.argv.slice(2);
if (!chromium || !shotDir || reports.length === 0) {
  console.error('usage: check_reports.js CHROMIUM SCREENSHOT_DIR REPORT.html...');
  process.exit(2);
}
const RENDER_TIMEOUT_MS = 60000;
const WIDTH = 1280;
const MAX_HEIGHT = 12000;  // screenshots longer than this are cut (the checks still see the DOM)

// --- the browser over a pipe -------------------------------------------------------------
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'normlab-chromium-'));
const browser = spawn(chromium, [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-extensions', '--hide-scrollbars', '--mute-audio', `--user-data-dir=${profile}`,
  '--remote-debugging-pipe', 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
let browserLog = '';
browser.stderr.on('data', (d) => { browserLog = (browserLog + d).slice(-4000); });
const toBrowser = browser.stdio[3];
const fromBrowser = browser.stdio[4];

let nextId = 1;
const pending = new Map();
const listeners = [];
let buffer = Buffer.alloc(0);
fromBrowser.on('data', (chunk) => {
  buffer = Buffer.concat([buffer, chunk]);
  let end;
  while ((end = buffer.indexOf(0)) >= 0) {
    const msg = JSON.parse(buffer.subarray(0, end).toString('utf8'));
    buffer = buffer.subarray(end + 1);
    if (msg.id && pending.has(msg.id)) {
      const { resolve, reject } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) reject(new Error(`${msg.error.message} ${msg.error.data || ''}`));
      else resolve(msg.result);
    } else if (msg.method) {
      for (const l of listeners) l(msg);
    }
  }
});
browser.on('exit', (code) => {
  for (const { reject } of pending.values()) reject(new Error(`chromium exited (${code}): ${browserLog}`));
  pending.clear();
});

function send(method, params = {}, sessionId) {
  const id = nextId++;
  const msg = { id, method, params };
  if (sessionId) msg.sessionId = sessionId;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    toBrowser.write(JSON.stringify(msg) + '\0');
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- PNG decoding (8-bit RGB/RGBA, not interlaced: what Chromium writes) ------------------
function decodePng(buf) {
  let pos = 8;
  let width = 0, height = 0, channels = 0;
  const idat = [];
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos);
    const type = buf.toString('ascii', pos + 4, pos + 8);
    const data = buf.subarray(pos + 8, pos + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8], color = data[9], interlace = data[12];
      if (depth !== 8 || (color !== 2 && color !== 6) || interlace !== 0)
        throw new Error(`unexpected PNG format (depth ${depth}, colour type ${color}, interlace ${interlace})`);
      channels = color === 6 ? 4 : 3;
    } else if (type === 'IDAT') {
      idat.push(data);
    }
    pos += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const px = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? px[y * stride + x - channels] : 0;
      const b = y > 0 ? px[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? px[(y - 1) * stride + x - channels] : 0;
      let v = line[x];
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      px[y * stride + x] = v & 255;
    }
  }
  return { width, height, channels, px };
}

// Pixels in [x0,x1)x[y0,y1) that are not the page's white background.
function inkPixels(img, x0, y0, x1, y1) {
  let n = 0;
  for (let y = Math.max(0, y0); y < Math.min(img.height, y1); y++)
    for (let x = Math.max(0, x0); x < Math.min(img.width, x1); x++) {
      const i = (y * img.width + x) * img.channels;
      if (img.px[i] < 240 || img.px[i + 1] < 240 || img.px[i + 2] < 240) n++;
    }
  return n;
}

// --- one report ----------------------------------------------------------------------------
// Runs inside the page: what each figure container holds.
const FIGURE_PROBE = `JSON.stringify(Array.from(document.querySelectorAll('div.figure')).map(function (el) {
  var r = el.getBoundingClientRect();
  return { id: el.id, svgs: el.querySelectorAll('svg').length, canvases: el.querySelectorAll('canvas').length,
           marks: el.querySelectorAll('svg g.role-mark > *').length, failed: !!el.querySelector('.figerror'),
           svgWidth: el.querySelector('svg') ? el.querySelector('svg').getBoundingClientRect().width + 40 : r.width,
           x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height };
}))`;

async function checkReport(file) {
  const problems = [];
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const onEvent = (msg) => {
    if (msg.sessionId !== sessionId) return;
    const p = msg.params;
    // Warnings too: Vega warns of what it draws wrongly or not at all ("Infinite extent for
    // field ..." where a layer of a panel has no rows).
    if (msg.method === 'Runtime.consoleAPICalled' && (p.type === 'error' || p.type === 'assert' || p.type === 'warning'))
      problems.push('console.' + p.type + ': ' + p.args.map((a) => a.value !== undefined ? a.value : a.description).join(' '));
    else if (msg.method === 'Runtime.exceptionThrown')
      problems.push('exception: ' + (p.exceptionDetails.exception ? p.exceptionDetails.exception.description : p.exceptionDetails.text));
    else if (msg.method === 'Log.entryAdded' && p.entry.level === 'error')
      problems.push('log: ' + p.entry.text + (p.entry.url ? ' (' + p.entry.url + ')' : ''));
    else if (msg.method === 'Network.requestWillBeSent' && !/^(file|data|about|blob):/.test(p.request.url))
      problems.push('network request: ' + p.request.url);
  };
  listeners.push(onEvent);
  try {
    for (const domain of ['Runtime', 'Log', 'Page', 'Network']) await send(domain + '.enable', {}, sessionId);
    await send('Emulation.setDeviceMetricsOverride', { width: WIDTH, height: 900, deviceScaleFactor: 1, mobile: false }, sessionId);
    await send('Page.navigate', { url: 'file://' + path.resolve(file) }, sessionId);
    const t0 = Date.now();
    let state = null;
    while (Date.now() - t0 < RENDER_TIMEOUT_MS) {
      const r = await send('Runtime.evaluate', { expression: 'JSON.stringify(window.normlabReport || null)', returnByValue: true }, sessionId);
      state = r.result.value ? JSON.parse(r.result.value) : null;
      if (state && state.done) break;
      await sleep(100);
    }
    if (!state || !state.done) problems.push(`figures not rendered within ${RENDER_TIMEOUT_MS / 1000} s`);
    else for (const e of state.errors) problems.push('figure error: ' + e);

    const probe = await send('Runtime.evaluate', { expression: FIGURE_PROBE, returnByValue: true }, sessionId);
    const figures = JSON.parse(probe.result.value);
    if (figures.length === 0) problems.push('no figure container in the page');
    for (const f of figures) {
      if (f.failed) problems.push(`${f.id}: shows a failure message`);
      if (f.svgs + f.canvases === 0) problems.push(`${f.id}: no SVG or canvas`);
      if (f.marks === 0) problems.push(`${f.id}: the SVG has no data marks`);
    }

    // Screenshot of the whole page (up to MAX_HEIGHT), compared with a blank page.
    const metrics = await send('Page.getLayoutMetrics', {}, sessionId);
    const height = Math.min(Math.ceil(metrics.cssContentSize.height), MAX_HEIGHT);
    await send('Emulation.setDeviceMetricsOverride', { width: WIDTH, height, deviceScaleFactor: 1, mobile: false }, sessionId);
    await sleep(200);
    const shot = await send('Page.captureScreenshot', { format: 'png', clip: { x: 0, y: 0, width: WIDTH, height, scale: 1 } }, sessionId);
    const png = Buffer.from(shot.data, 'base64');
    const name = path.basename(path.dirname(path.resolve(file)));
    fs.writeFileSync(path.join(shotDir, name + '.png'), png);
    const img = decodePng(png);
    const ink = inkPixels(img, 0, 0, img.width, img.height);
    if (ink < 0.01 * img.width * img.height) problems.push(`screenshot is (nearly) blank: ${ink} non-white pixels`);
    for (const f of figures) {
      if (f.y + f.h > height) continue;  // below the cut
      const fink = inkPixels(img, Math.floor(f.x), Math.floor(f.y), Math.ceil(f.x + f.w), Math.ceil(f.y + f.h));
      if (fink < 200) problems.push(`${f.id}: its area of the screenshot is blank (${fink} non-white pixels)`);
      const clip = { x: f.x, y: f.y, width: Math.min(f.w, f.svgWidth + 8), height: f.h, scale: 1 };
      const figShot = await send('Page.captureScreenshot', { format: 'png', clip }, sessionId);
      fs.writeFileSync(path.join(shotDir, `${name}-${f.id}.png`), Buffer.from(figShot.data, 'base64'));
    }
    return { figures: figures.length, marks: figures.reduce((s, f) => s + f.marks, 0), problems };
  } finally {
    listeners.splice(listeners.indexOf(onEvent), 1);
    await send('Target.closeTarget', { targetId }).catch(() => {});
  }
}

(async () => {
  fs.mkdirSync(shotDir, { recursive: true });
  let passed = 0, failed = 0;
  try {
    for (const file of reports) {
      let result;
      try {
        result = await checkReport(file);
      } catch (e) {
        result = { figures: 0, marks: 0, problems: ['check failed: ' + e.message] };
      }
      if (result.problems.length === 0) {
        passed++;
        console.log(`ok   ${file}: ${result.figures} figure(s), ${result.marks} marks`);
      } else {
        failed++;
        console.log(`FAIL ${file}:\n  ` + result.problems.join('\n  '));
      }
    }
  } finally {
    const exited = browser.exitCode !== null ? Promise.resolve() : new Promise((r) => browser.once('exit', r));
    browser.kill();
    await exited;
    try {
      fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
    } catch (e) {
      console.error(`note: could not remove the browser profile ${profile}: ${e.message}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
})();
