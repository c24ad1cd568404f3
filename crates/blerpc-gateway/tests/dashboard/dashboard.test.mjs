// The gateway's dashboard in headless Chromium, against a real `blerpc gateway` with real
// devices (`blerpc serve --dial`): the page lists them live, a call from its form returns the
// right JSON, and a device that disconnects turns offline on the page within seconds. In a
// fleet (a real `nats-server`), the chosen device's durable calls show with their states as
// they change, and a queued one is cancelled from the page.
//
//   node --test crates/blerpc-gateway/tests/dashboard/   (tools/gateway/dashboard.sh sets it up)
//
// $BLERPC_BIN is the `blerpc` binary (default target/debug/blerpc); $BLERPC_NATS_SERVER the
// `nats-server` (default: the reference venv's, $BLERPC_VENV or .venv); screenshots go to
// $BLERPC_WEB_SCREENSHOTS (default target/web-screenshots).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(new URL('../../../..', import.meta.url).pathname);
const { launchChromium } = await import(join(ROOT, 'web/harness/chromium.mjs'));
const BIN = process.env.BLERPC_BIN ?? join(ROOT, 'target/debug/blerpc');
const TOKEN = 'dashboard-test-token-0123456789';

/** Spawns `args`, resolves with { child, lines } once `count` stdout lines arrived. */
function start(args, count, env = {}) {
  return new Promise((ok, fail) => {
    const child = spawn(BIN, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env, RUST_LOG: process.env.RUST_LOG ?? 'warn' },
    });
    const lines = [];
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => fail(new Error(`${args[0]}: no output in 20 s: ${stderr}`)), 20_000);
    createInterface({ input: child.stdout }).on('line', (l) => {
      lines.push(l);
      if (lines.length === count) {
        clearTimeout(timer);
        ok({ child, lines });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`${args[0]} exited with ${code}: ${stderr}`));
    });
  });
}

/** A `nats-server` with JetStream on `dir`; resolves with { child, url } once it listens. */
function startNats(dir) {
  const bin = process.env.BLERPC_NATS_SERVER
    ?? join(process.env.BLERPC_VENV ?? join(ROOT, '.venv'), 'bin/nats-server');
  return new Promise((ok, fail) => {
    const child = spawn(bin, ['-a', '127.0.0.1', '-p', '-1', '-js', '-sd', join(dir, 'nats')],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => fail(new Error(`nats-server: not listening in 20 s: ${log}`)), 20_000);
    createInterface({ input: child.stderr }).on('line', (l) => {
      log += l + '\n';
      const m = l.match(/Listening for client connections on (\S+)/);
      if (m) {
        clearTimeout(timer);
        ok({ child, url: `nats://${m[1]}` });
      }
    });
    child.on('error', (e) => fail(new Error(`${bin}: ${e.message} (bash tools/venv.sh installs it)`)));
  });
}

async function screenshot(page, name) {
  const dir = process.env.BLERPC_WEB_SCREENSHOTS ?? join(ROOT, 'target/web-screenshots');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
}

test('the dashboard lists devices live, calls from its form, and shows a disconnect', { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'blerpc-dashboard-'));
  const env = { XDG_CONFIG_HOME: dir };
  writeFileSync(join(dir, 'tokens'), `${TOKEN}\n`);
  const children = [];
  let chromium;
  try {
    const gw = await start(
      ['gateway', '--devices', 'tcp://127.0.0.1:0', '--http', '127.0.0.1:0', '--enroll',
        '--known-devices', join(dir, 'devices.json'), '--tokens', join(dir, 'tokens')],
      2, env);
    children.push(gw.child);
    const devicesUrl = gw.lines[0].replace(/^devices /, '');
    const httpUrl = gw.lines[1].replace(/^http /, '');
    const keys = [];
    for (const name of ['kitchen', 'garage']) {
      const keyFile = join(dir, `${name}.key`);
      execFileSync(BIN, ['keygen', '--out', keyFile], { env: { ...process.env, ...env }, stdio: 'ignore' });
      const dev = await start(['serve', '--dial', devicesUrl, '--identity', keyFile], 1, env);
      children.push(dev.child);
      keys.push({ name, id: dev.lines[0].split(' ')[3], child: dev.child });
    }

    chromium = await launchChromium();
    const page = chromium.page;
    await page.addInitScript((t) => sessionStorage.setItem('blerpc-gateway-token', t), TOKEN);
    await page.goto(`${httpUrl}/`);
    // Both devices appear, online, pushed by the event stream.
    for (const k of keys) {
      await page.waitForSelector(`tr[data-id="${k.id}"][data-status="online"]`, { timeout: 15_000 });
    }
    assert.equal(await page.textContent('#connected'), '2');
    // Outside a fleet, the durable calls section says what they need.
    await page.waitForFunction(() => document.querySelector('#durable-note').textContent.includes('--nats'), null, { timeout: 10_000 });

    // A call from the form.
    await page.selectOption('#device', keys[0].id);
    await page.selectOption('#command', 'echo');
    await page.fill('#request', '{"message":"from the dashboard"}');
    await page.click('#call');
    await page.waitForFunction(() => document.querySelector('#result').dataset.status !== undefined, null, { timeout: 15_000 });
    const result = await page.textContent('#result');
    assert.match(result, /^HTTP 200 in [\d.]+ ms/);
    assert.deepEqual(JSON.parse(result.slice(result.indexOf('\n') + 1)), { message: 'from the dashboard' });

    // Some traffic for the chart and the per-device figures.
    for (let i = 0; i < 40; i++) {
      const r = await fetch(`${httpUrl}/v1/devices/${keys[i % 2].id}/calls/echo`, {
        method: 'POST', body: `{"message":"${i}"}`, headers: { Authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(r.status, 200);
      await new Promise((r) => setTimeout(r, 50));
    }
    await page.waitForFunction(
      (id) => Number(document.querySelector(`tr[data-id="${id}"] td:nth-child(6)`)?.textContent) >= 21,
      keys[0].id, { timeout: 10_000 });
    await screenshot(page, 'gateway-dashboard');

    // A stream from the form: the NDJSON items are shown.
    await page.selectOption('#command', 'counter_stream');
    await page.fill('#request', '{"count":3}');
    await page.click('#call');
    await page.waitForFunction(() => document.querySelector('#result').textContent.includes('"seq":2'), null, { timeout: 15_000 });

    // A device goes away: offline on the page within seconds.
    const gone = Date.now();
    keys[1].child.kill('SIGKILL');
    await page.waitForSelector(`tr[data-id="${keys[1].id}"][data-status="offline"]`, { timeout: 10_000 });
    const took = Date.now() - gone;
    console.log(`offline on the page ${took} ms after the device was killed`);
    assert.ok(took < 5_000, `took ${took} ms`);
    assert.equal(await page.textContent('#connected'), '1');
    await screenshot(page, 'gateway-dashboard-offline');
  } finally {
    if (chromium) await chromium.close();
    for (const c of children) c.kill('SIGKILL');
  }
});

test('in a fleet, the dashboard follows a device\'s durable calls live and cancels a queued one', { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'blerpc-dashboard-durable-'));
  const env = { XDG_CONFIG_HOME: dir };
  writeFileSync(join(dir, 'tokens'), `${TOKEN}\n`);
  const children = [];
  let chromium;
  try {
    const nats = await startNats(dir);
    children.push(nats.child);
    const gw = await start(
      ['gateway', '--devices', 'tcp://127.0.0.1:0', '--http', '127.0.0.1:0', '--enroll',
        '--known-devices', join(dir, 'devices.json'), '--tokens', join(dir, 'tokens'),
        '--nats', nats.url, '--nats-name', 'gw-a'],
      3, env);
    children.push(gw.child);
    const devicesUrl = gw.lines[0].replace(/^devices /, '');
    const httpUrl = gw.lines[1].replace(/^http /, '');
    const keyFile = join(dir, 'porch.key');
    execFileSync(BIN, ['keygen', '--out', keyFile], { env: { ...process.env, ...env }, stdio: 'ignore' });
    const dev = await start(['serve', '--dial', devicesUrl, '--identity', keyFile], 1, env);
    children.push(dev.child);
    const id = dev.lines[0].split(' ')[3];
    const auth = { Authorization: `Bearer ${TOKEN}` };
    const submit = async (message) => {
      const r = await fetch(`${httpUrl}/v1/devices/${id}/calls/echo`, {
        method: 'POST', body: JSON.stringify({ message }),
        headers: { ...auth, 'Content-Type': 'application/json', 'Blerpc-Durable': 'ttl=60' },
      });
      assert.equal(r.status, 202, await r.clone().text());
      return (await r.json()).id;
    };

    chromium = await launchChromium();
    const page = chromium.page;
    await page.addInitScript((t) => sessionStorage.setItem('blerpc-gateway-token', t), TOKEN);
    await page.goto(`${httpUrl}/`);
    await page.waitForSelector(`tr[data-id="${id}"][data-status="online"]`, { timeout: 15_000 });
    await page.waitForSelector('#durable[data-available="true"]', { timeout: 10_000 });

    // A call made through the API while the page is open: it appears and runs to succeeded.
    const done = await submit('durable, from the API');
    const row = (call, state) => `#durable-calls tr[data-call="${call}"][data-state="${state}"]`;
    await page.waitForSelector(row(done, 'succeeded'), { timeout: 15_000 });
    const cells = await page.$$eval(`${row(done, 'succeeded')} td`, (tds) => tds.map((t) => t.textContent));
    assert.equal(cells[1], 'echo');
    assert.equal(cells[5], '1');
    assert.equal(cells[6], 'gw-a');

    // The device goes away: the next call waits, queued, and is cancelled from the page.
    dev.child.kill('SIGKILL');
    await page.waitForSelector(`tr[data-id="${id}"][data-status="offline"]`, { timeout: 10_000 });
    const waiting = await submit('durable, never sent');
    await page.click(`${row(waiting, 'queued')} button.cancel`, { timeout: 15_000 });
    await page.waitForSelector(row(waiting, 'cancelled'), { timeout: 10_000 });
    const stored = await (await fetch(`${httpUrl}/v1/devices/${id}/durable/${waiting}`, { headers: auth })).json();
    assert.equal(stored.state, 'cancelled');
    assert.equal(await page.textContent(`${row(waiting, 'cancelled')} td:nth-child(5)`), 'cancelled by the caller');
    // A reload lists both from the API.
    await page.reload();
    await page.waitForSelector(row(done, 'succeeded'), { timeout: 15_000 });
    await page.waitForSelector(row(waiting, 'cancelled'), { timeout: 5_000 });
    await screenshot(page, 'gateway-dashboard-durable');
  } finally {
    if (chromium) await chromium.close();
    for (const c of children) c.kill('SIGKILL');
  }
});
