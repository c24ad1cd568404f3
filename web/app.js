// The demo page: connect over WebSocket or Web Bluetooth, run the reference's functional tests
// and benchmarks, show them beside the published Web figures. Also exposes `window.blerpcDemo`
// for the headless tests (web/test/), which drive exactly what the buttons do.

import { init, connectWebSocket, connectBluetooth, DemoClient, forgetKey } from './pkg/index.js';
import { BENCHMARKS, PUBLISHED_WEB, TESTS, cell, num, runBenchmarks, runFunctional } from './suite.js';
import { drawChart } from './chart.js';

const $ = (id) => document.getElementById(id);
const state = { conn: null, demo: null, tests: null, benchmarks: null, info: null, lastError: null };

function status(text, kind = '') {
  const s = $('status');
  s.textContent = text;
  s.className = `status ${kind}`;
}

function options() {
  const o = {};
  const pin = $('pinning').value;
  if (pin === 'trust') o.pinning = { trust: $('key').value.trim() };
  else o.pinning = pin;
  if ($('plaintext').checked) o.requireEncryption = false;
  if ($('link').value === 'bluetooth') o.attMtu = Number($('mtu').value);
  return o;
}

function describe(info) {
  const lines = [
    `connected over ${info.link} to ${info.deviceId}`,
    info.encrypted
      ? `end-to-end encrypted; peripheral key ${info.peerIdentity}` +
        (info.pinned ? ` (${info.pinned === 'first-use' ? 'pinned now: trust on first use' : 'matches the pinned key'})` : '')
      : 'NOT encrypted (plaintext peripheral allowed)',
    `ATT MTU ${info.attMtu}, containers up to ${info.maxContainer} B${info.longContainers ? ' (long containers)' : ''}; ` +
      `peripheral accepts requests up to ${info.maxRequest} B, responses up to ${info.maxResponse} B`,
  ];
  return lines.join('\n');
}

function buttons() {
  const up = state.conn && !state.conn.isClosed;
  $('connect-btn').disabled = !!up;
  $('disconnect-btn').disabled = !up;
  for (const id of ['tests-btn', 'bench-btn', 'all-btn']) $(id).disabled = !up;
}

async function connect(kind = $('link').value, opts = options(), url = $('url').value.trim()) {
  // The form shows what is connected, also when a test calls this directly.
  $('link').value = kind;
  $('link').dispatchEvent(new Event('change'));
  if (kind === 'websocket') $('url').value = url;
  status(kind === 'bluetooth' ? 'Choose a device…' : `Connecting to ${url}…`);
  try {
    const conn = kind === 'bluetooth' ? await connectBluetooth(opts) : await connectWebSocket(url, opts);
    state.conn = conn;
    state.demo = new DemoClient(conn);
    state.info = conn.info;
    state.lastError = null;
    status(describe(state.info), 'ok');
    conn.closed.then((e) => {
      if (state.conn === conn) {
        status(`Disconnected: ${e.code}: ${e.message}`, e.code === 'CLOSED' ? '' : 'error');
        buttons();
      }
    });
    buttons();
    return state.info;
  } catch (e) {
    state.lastError = { code: e.code ?? null, message: e.message };
    status(`${e.code ?? 'ERROR'}: ${e.message}`, 'error');
    buttons();
    throw e;
  }
}

function disconnect() {
  state.conn?.close();
  buttons();
}

function renderTests(results) {
  const body = $('tests-table').tBodies[0];
  body.replaceChildren(
    ...results.map((r) => {
      const tr = document.createElement('tr');
      tr.innerHTML = `<td>${r.name}</td><td class="${r.ok ? 'pass' : 'fail'}"></td><td class="num">${num(r.ms)} ms</td>`;
      tr.children[1].textContent = r.ok ? 'PASS' : `FAIL: ${r.error}`;
      return tr;
    }),
  );
  const passed = results.filter((r) => r.ok).length;
  $('tests-summary').textContent = results.length ? ` (${passed} of ${results.length} passed)` : '';
}

function renderBenchmarks(results) {
  const body = $('bench-table').tBodies[0];
  const rows = [];
  body.replaceChildren(
    ...results.map((r) => {
      const pub = PUBLISHED_WEB[r.name];
      const per = r.name.startsWith('counter_') ? 'item' : 'call';
      const tr = document.createElement('tr');
      const ours = r.ok ? cell({ ...r.result, totalMs: r.result.elapsedMs }) : `FAIL: ${r.error}`;
      const ratio = r.ok ? r.result.ms / pub.ms : null;
      tr.innerHTML = '<td></td><td class="num"></td><td class="num"></td><td class="num"></td>';
      tr.children[0].textContent = r.name;
      tr.children[1].textContent = ours;
      tr.children[1].className = r.ok ? 'num' : 'num fail';
      tr.children[2].textContent = cell({ ...pub, per });
      tr.children[3].textContent = ratio === null ? '' : `${num(ratio)}×`;
      rows.push({ name: r.name, ours: r.ok ? r.result.ms : 0, published: pub.ms, per });
      return tr;
    }),
  );
  drawChart($('chart'), rows, `this page, ${state.info?.link ?? ''}`);
}

async function runTests() {
  renderTests([]);
  const done = [];
  state.tests = await runFunctional(state.demo, (r) => {
    done.push(r);
    renderTests(done);
  });
  return state.tests;
}

async function runBench() {
  const done = [];
  state.benchmarks = await runBenchmarks(state.demo, (r) => {
    done.push(r);
    renderBenchmarks(done);
  });
  return state.benchmarks;
}

function wire() {
  $('link').addEventListener('change', () => {
    const ble = $('link').value === 'bluetooth';
    $('url-label').hidden = ble;
    $('mtu-label').hidden = !ble;
  });
  $('pinning').addEventListener('change', () => {
    $('key-label').hidden = $('pinning').value !== 'trust';
  });
  $('connect-btn').addEventListener('click', () => connect().catch(() => {}));
  $('disconnect-btn').addEventListener('click', disconnect);
  $('forget-btn').addEventListener('click', () => {
    const id = state.info?.deviceId ?? $('url').value.trim();
    forgetKey(id);
    status(`Forgot the key pinned for ${id}.`);
  });
  $('tests-btn').addEventListener('click', () => runTests());
  $('bench-btn').addEventListener('click', () => runBench());
  $('all-btn').addEventListener('click', async () => {
    await runTests();
    await runBench();
  });
  // ?url=ws://…&link=bluetooth&pinning=none&key=…: pre-fill the form.
  const q = new URLSearchParams(location.search);
  for (const id of ['url', 'link', 'pinning', 'key', 'mtu']) {
    if (q.has(id)) {
      $(id).value = q.get(id);
      $(id).dispatchEvent(new Event('change'));
    }
  }
  buttons();
}

wire();
await init();
window.blerpcDemo = {
  state,
  tests: TESTS,
  benchmarks: BENCHMARKS,
  connect,
  disconnect,
  runTests,
  runBench,
  ready: true,
};
document.body.dataset.ready = 'true';
