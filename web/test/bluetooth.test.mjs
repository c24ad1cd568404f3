// The browser central over Web Bluetooth, in headless Chromium's Bluetooth emulation, bridged
// to a real `blerpc serve` (web/harness/ble-bridge.mjs says what is emulated and how). The
// page connects by a click on its Connect button (requestDevice needs a user gesture), through
// the emulated chooser, GATT connection, discovery and subscription; the central's code is the
// one that runs against a real device.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { bridgeBluetooth } from '../harness/ble-bridge.mjs';
import { launchChromium } from '../harness/chromium.mjs';
import { serveStatic } from '../harness/static-server.mjs';
import { startServer } from '../harness/serve.mjs';
import { WEB, openDemo, printBenchmarks, screenshot } from './common.mjs';

let chromium;
let site;
let server;

before(async () => {
  site = await serveStatic(WEB);
  server = await startServer();
  chromium = await launchChromium({ bluetooth: true });
});

after(async () => {
  await chromium?.close();
  await server?.stop();
  await site?.close();
});

async function connectByClick(page, bridge, query) {
  await openDemo(page, site.url, query);
  await page.click('#connect-btn');
  await page.waitForFunction(
    () => globalThis.blerpcDemo.state.info || globalThis.blerpcDemo.state.lastError,
    null,
    { timeout: 30_000 },
  );
  const state = await page.evaluate(() => ({ info: blerpcDemo.state.info, error: blerpcDemo.state.lastError }));
  assert.equal(state.error, null, `connect failed: ${JSON.stringify(state.error)}; bridge: ${JSON.stringify(bridge.stats)}`);
  return state.info;
}

describe('Web Bluetooth link, on Chromium’s Bluetooth emulation, bridged to blerpc serve', () => {
  test('the 12 functional tests pass, encrypted, the key trusted explicitly', async () => {
    const page = await chromium.newPage();
    const bridge = await bridgeBluetooth({ browser: chromium.browser, page, serverUrl: server.url });
    try {
      const info = await connectByClick(page, bridge, `link=bluetooth&pinning=trust&key=${server.identity}`);
      assert.equal(info.link, 'bluetooth');
      assert.equal(info.encrypted, true);
      assert.equal(info.peerIdentity, server.identity);
      assert.equal(info.attMtu, 247);
      assert.equal(info.longContainers, false, 'BLE never uses long containers');
      assert.match(info.deviceId, /^ble:/);
      const results = await page.evaluate(() => blerpcDemo.runTests());
      assert.equal(results.length, 12);
      for (const r of results) assert.ok(r.ok, `${r.name}: ${r.error}`);
      console.log(
        `  12/12 functional tests passed over emulated Web Bluetooth, encrypted; ` +
          `${bridge.stats.toPeripheral} writes, ${bridge.stats.toCentral} notifications (read path)`,
      );
      for (const c of await page.evaluate(() => blerpcDemo.state.tests.map((t) => t.ms))) assert.ok(c >= 0);
      const bench = await page.evaluate(() => blerpcDemo.runBench());
      printBenchmarks('benchmarks over emulated Web Bluetooth (bridge round trips, not radio timing):', bench);
      for (const r of bench) assert.ok(r.ok, `${r.name}: ${r.error}`);
      const shot = await screenshot(page, 'demo-bluetooth');
      console.log(`  screenshot: ${shot}`);
      assert.deepEqual(bridge.stats.errors, []);
    } finally {
      await page.evaluate(() => blerpcDemo.disconnect()).catch(() => {});
      await bridge.close();
      await page.close();
    }
  });

  test('the attMtu option: containers fit the MTU given; below 136 the key exchange cannot run (MTU_TOO_SMALL)', async () => {
    const page = await chromium.newPage();
    const bridge = await bridgeBluetooth({ browser: chromium.browser, page, serverUrl: server.url });
    try {
      const info = await connectByClick(page, bridge, 'link=bluetooth&pinning=none&mtu=185');
      assert.equal(info.attMtu, 185);
      assert.equal(info.maxContainer, 182);
      const results = await page.evaluate(async () => {
        const out = [];
        for (const name of ['echo_max_length', 'data_write_8kb', 'counter_upload_large']) {
          out.push(await (await import('./suite.js')).runTest(blerpcDemo.state.demo, name));
        }
        return out;
      });
      for (const r of results) assert.ok(r.ok, `${r.name}: ${r.error}`);
      assert.ok(bridge.stats.maxWrite <= 182 && bridge.stats.maxWrite > 150, `longest write ${bridge.stats.maxWrite} B`);
      await page.evaluate(() => blerpcDemo.disconnect());
      const small = await page.evaluate(async () => {
        const pkg = await import('./pkg/index.js');
        try {
          await pkg.connectBluetooth({ device: blerpcDemo.state.conn.bluetoothDevice, attMtu: 100, pinning: 'none' });
          return null;
        } catch (e) {
          return { code: e.code, message: e.message };
        }
      });
      assert.equal(small?.code, 'MTU_TOO_SMALL', JSON.stringify(small));
      console.log(`  attMtu 185: longest write ${bridge.stats.maxWrite} B; attMtu 100: ${small.code}`);
    } finally {
      await bridge.close();
      await page.close();
    }
  });

  test('trust on first use pins the device key in browser storage; the device disconnecting fails calls with LINK_CLOSED', async () => {
    const page = await chromium.newPage();
    const bridge = await bridgeBluetooth({ browser: chromium.browser, page, serverUrl: server.url });
    try {
      const info = await connectByClick(page, bridge, 'link=bluetooth&pinning=tofu');
      assert.equal(info.encrypted, true);
      assert.equal(info.pinned, 'first-use');
      const pinned = await page.evaluate(async (id) => (await import('./pkg/index.js')).knownKey(id), info.deviceId);
      assert.equal(pinned, server.identity);
      const echo = await page.evaluate(async () => (await blerpcDemo.state.demo.echo({ message: 'over BLE' })).message);
      assert.equal(echo, 'over BLE');
      await bridge.disconnect();
      const closed = await page.evaluate(() => blerpcDemo.state.conn.closed.then((e) => ({ code: e.code, message: e.message })));
      assert.equal(closed.code, 'LINK_CLOSED');
      const after = await page.evaluate(async () => {
        try {
          await blerpcDemo.state.demo.echo({ message: 'x' });
          return null;
        } catch (e) {
          return e.code;
        }
      });
      assert.equal(after, 'LINK_CLOSED');
    } finally {
      await bridge.close();
      await page.close();
    }
  });
});
