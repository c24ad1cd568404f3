// The gateway's dashboard in headless Chromium, against a real `blerpc gateway` with real
// devices (`blerpc serve --dial`): the page lists them live, a call from its form returns the
// right JSON, and a device that disconnects turns offline on the page within seconds.
//
//   node --test crates/blerpc-gateway/tests/dashboard/   (tools/gateway/dashboard.sh sets it up)
//
// $BLERPC_BIN is the `blerpc` binary (default target/debug/blerpc); screenshots go to
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
