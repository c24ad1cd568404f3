// The browser central over WebSocket, in headless Chromium, against a real `blerpc serve
// --listen ws://127.0.0.1:<free port>`: the reference's functional tests encrypted with the key
// pinned, the pinning policies (a wrong key refused), deadlines, cancellation, errors with
// codes, a server that dies mid-call, the benchmarks, and a screenshot of the demo page.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate, createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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
  chromium = await launchChromium();
});

after(async () => {
  await chromium?.close();
  await server?.stop();
  await site?.close();
});

/** Runs `f(pkg, arg)` in the page with the package imported. */
function inPage(page, f, arg) {
  return page.evaluate(
    async ([body, a]) => {
      const pkg = await import('./pkg/index.js');
      // eslint-disable-next-line no-new-func
      return new Function('pkg', 'arg', `return (${body})(pkg, arg);`)(pkg, a);
    },
    [f.toString(), arg],
  );
}

/** A call's outcome as plain data: `{ ok, value }` or `{ ok: false, code, message, ms }`. */
const outcome = `async (p) => {
  const t = performance.now();
  try { return { ok: true, value: await p, ms: performance.now() - t }; }
  catch (e) { return { ok: false, code: e.code, name: e.name, isBlerpc: e instanceof (await import('./pkg/index.js')).BlerpcError, message: e.message, ms: performance.now() - t }; }
}`;

describe('WebSocket link, against blerpc serve', () => {
  test('the 12 functional tests pass, encrypted, with the key pinned (trust on first use, then matched)', async () => {
    const page = chromium.page;
    await openDemo(page, site.url);
    const first = await page.evaluate(async (url) => {
      const info = await blerpcDemo.connect('websocket', {}, url);
      blerpcDemo.disconnect();
      return info;
    }, server.url);
    assert.equal(first.encrypted, true);
    assert.equal(first.pinned, 'first-use');
    assert.equal(first.peerIdentity, server.identity);
    assert.equal(first.deviceId, server.url);

    const { info, ms } = await page.evaluate(async (url) => {
      const t = performance.now();
      const info = await blerpcDemo.connect('websocket', {}, url);
      return { info, ms: performance.now() - t };
    }, server.url);
    console.log(`  connect (WebSocket open, setup, key exchange, pin check): ${ms.toFixed(1)} ms`);
    assert.equal(info.encrypted, true);
    assert.equal(info.pinned, 'matched', 'the second connection finds the key pinned');
    assert.equal(info.longContainers, true);
    const results = await page.evaluate(() => blerpcDemo.runTests());
    assert.equal(results.length, 12);
    for (const r of results) assert.ok(r.ok, `${r.name}: ${r.error}`);
    console.log(`  12/12 functional tests passed over WebSocket, encrypted, key ${info.pinned}`);

    const bench = await page.evaluate(() => blerpcDemo.runBench());
    printBenchmarks('benchmarks over a loopback WebSocket (encrypted; this machine):', bench);
    for (const r of bench) assert.ok(r.ok, `${r.name}: ${r.error}`);
    const shot = await screenshot(page, 'demo-websocket');
    console.log(`  screenshot: ${shot}`);
    await page.evaluate(() => blerpcDemo.disconnect());
  });

  test('an explicitly trusted key connects; a different trusted key is refused', async () => {
    const page = chromium.page;
    await openDemo(page, site.url);
    const r = await inPage(
      page,
      async (pkg, { url, key }) => {
        const good = await pkg.connectWebSocket(url, { pinning: { trust: key } });
        const info = good.info;
        const echo = await new pkg.DemoClient(good).echo({ message: 'trusted' });
        good.close();
        const wrongKey = key.replace(/^./, (c) => (c === '0' ? '1' : '0'));
        try {
          await pkg.connectWebSocket(url, { pinning: { trust: wrongKey } });
          return { info, echo, refused: null };
        } catch (e) {
          return { info, echo, refused: { code: e.code, isBlerpc: e instanceof pkg.BlerpcError, message: e.message } };
        }
      },
      { url: server.url, key: server.identity },
    );
    assert.equal(r.info.encrypted, true);
    assert.equal(r.info.pinned, null);
    assert.equal(r.echo.message, 'trusted');
    assert.ok(r.refused, 'a wrong trusted key must be refused');
    assert.equal(r.refused.code, 'IDENTITY_REJECTED');
    assert.equal(r.refused.isBlerpc, true);
  });

  test('a different key pinned in browser storage is refused (IDENTITY_CHANGED), and forgetting it re-pins', async () => {
    const page = chromium.page;
    await openDemo(page, site.url);
    const r = await inPage(
      page,
      async (pkg, { url }) => {
        const device = `${url}#pin-test`;
        pkg.pinKey(device, 'ab'.repeat(32));
        let refused = null;
        try {
          await pkg.connectWebSocket(url, { deviceId: device });
        } catch (e) {
          refused = { code: e.code, message: e.message };
        }
        const stillPinned = pkg.knownKey(device);
        pkg.forgetKey(device);
        const conn = await pkg.connectWebSocket(url, { deviceId: device });
        const info = conn.info;
        conn.close();
        return { refused, stillPinned, info, pinnedNow: pkg.knownKey(device) };
      },
      { url: server.url },
    );
    assert.ok(r.refused, 'the wrong pinned key must be refused');
    assert.equal(r.refused.code, 'IDENTITY_CHANGED');
    assert.match(r.refused.message, new RegExp(server.identity));
    assert.equal(r.stillPinned, 'ab'.repeat(32), 'a refusal never overwrites the pin');
    assert.equal(r.info.pinned, 'first-use');
    assert.equal(r.pinnedNow, server.identity);
  });

  test('no pinning is an explicit opt-out and still encrypts; a plaintext server is refused unless allowed', async () => {
    const plain = await startServer(['--plaintext']);
    try {
      const page = chromium.page;
      await openDemo(page, site.url);
      const r = await inPage(
        page,
        async (pkg, { url, plainUrl }) => {
          const c = await pkg.connectWebSocket(url, { pinning: 'none' });
          const none = c.info;
          c.close();
          let refused = null;
          try {
            await pkg.connectWebSocket(plainUrl);
          } catch (e) {
            refused = e.code;
          }
          const p = await pkg.connectWebSocket(plainUrl, { requireEncryption: false });
          const echo = await new pkg.DemoClient(p).echo({ message: 'plain' });
          const plainInfo = p.info;
          p.close();
          return { none, refused, echo, plainInfo };
        },
        { url: server.url, plainUrl: plain.url },
      );
      assert.equal(r.none.encrypted, true);
      assert.equal(r.none.pinned, null);
      assert.equal(r.refused, 'ENCRYPTION_UNAVAILABLE');
      assert.equal(r.plainInfo.encrypted, false);
      assert.equal(r.echo.message, 'plain');
    } finally {
      await plain.stop();
    }
  });

  test('errors carry codes; deadlines, cancellation and early stream exits leave the connection usable', async () => {
    const page = chromium.page;
    await openDemo(page, site.url);
    const r = await inPage(
      page,
      async (pkg, { url, outcome }) => {
        const settle = eval(outcome);
        const conn = await pkg.connectWebSocket(url, { pinning: 'none' });
        const demo = new pkg.DemoClient(conn);
        const unknown = await settle(conn.call('no_such_command', new Uint8Array(0)));
        const tooBig = await settle(demo.echo({ message: 'x'.repeat(300) }));
        const badArg = await settle(conn.call('echo', new Uint8Array(0), { timeoutMs: -1 }));
        // An abort before the call, and during a stream.
        const ac = new AbortController();
        ac.abort();
        const preAborted = await settle(demo.echo({ message: 'a' }, { signal: ac.signal }));
        // Leaving a long stream early cancels it; the connection goes on.
        let seen = 0;
        for await (const item of demo.counterStream({ count: 10000 })) {
          if (++seen === 3) break;
          void item;
        }
        const afterBreak = await demo.echo({ message: 'after break' });
        const up = conn.upload('counter_upload');
        await up.send(new Uint8Array([8, 1]));
        up.cancel();
        const afterCancel = await demo.echo({ message: 'after cancel' });
        const parallel = await Promise.all([1, 2, 3, 4].map((i) => demo.echo({ message: `p${i}` })));
        // A stream nobody reads for a while: the peripheral waits for the page (the streams
        // extension's credits) instead of overflowing its 4-item buffer; every item arrives.
        const small = await pkg.connectWebSocket(url, { pinning: 'none', streamBuffer: 4 });
        const unread = small.serverStream('counter_stream', new Uint8Array([8, 100]));
        const first = await unread.next();
        await new Promise((ok) => setTimeout(ok, 300));
        const overflow = await settle((async () => {
          let n = 1;
          for (;;) {
            if ((await unread.next()).done) return n;
            n += 1;
          }
        })());
        // Both ways under one stream: `blerpc serve`'s `chat` echoes each item as it comes.
        const chat = conn.bidiStream('chat');
        const echoes = [];
        const reading = (async () => {
          for await (const item of chat) echoes.push(Array.from(item));
        })();
        for (let i = 0; i < 30; i++) await chat.send(new Uint8Array([i, i, i]));
        await chat.finish();
        await reading;
        // A command that is not a stream both ways is refused; the connection goes on.
        const refused = await settle((async () => {
          for await (const item of conn.bidiStream('echo')) void item;
          return 'ended';
        })());
        const afterOverflow = (await new pkg.DemoClient(small).echo({ message: 'after overflow' })).message;
        small.close();
        conn.close();
        const afterClose = await settle(demo.echo({ message: 'closed' }));
        return { unknown, tooBig, badArg, preAborted, seen, afterBreak, afterCancel, parallel: parallel.map((p) => p.message), afterClose, firstDone: first.done, overflow, afterOverflow, refused, echoes };
      },
      { url: server.url, outcome },
    );
    assert.equal(r.unknown.ok, false);
    assert.equal(r.unknown.code, 'PEER_ERROR');
    assert.equal(r.unknown.isBlerpc, true);
    assert.equal(r.tooBig.ok, false, 'the demo service caps echo at 256 bytes');
    assert.equal(r.badArg.code, 'INVALID_ARGUMENT');
    assert.equal(r.preAborted.code, 'CANCELLED');
    assert.equal(r.seen, 3);
    assert.equal(r.afterBreak.message, 'after break');
    assert.equal(r.afterCancel.message, 'after cancel');
    assert.deepEqual(r.parallel, ['p1', 'p2', 'p3', 'p4']);
    assert.equal(r.afterClose.code, 'CLOSED');
    assert.equal(r.firstDone, false);
    assert.deepEqual(r.overflow, { ok: true, value: 100, ms: r.overflow.ms }, JSON.stringify(r.overflow));
    assert.equal(r.refused.code, 'PEER_ERROR', JSON.stringify(r.refused));
    assert.deepEqual(r.echoes, Array.from({ length: 30 }, (_, i) => [i, i, i]));
    assert.equal(r.afterOverflow, 'after overflow');
    console.log(`  unknown command: ${r.unknown.code} (${r.unknown.message}); echo of 300 B: ${r.tooBig.code}`);
  });

  test('a frozen server: the deadline fires (TIMEOUT) and an abort cancels (CANCELLED)', async () => {
    const frozen = await startServer();
    try {
      const page = chromium.page;
      await openDemo(page, site.url);
      await inPage(page, async (pkg, { url }) => {
        globalThis.frozenConn = await pkg.connectWebSocket(url, { pinning: 'none' });
      }, { url: frozen.url });
      frozen.kill('SIGSTOP');
      const r = await inPage(
        page,
        async (pkg, { outcome }) => {
          const settle = eval(outcome);
          const demo = new pkg.DemoClient(globalThis.frozenConn);
          const timeout = await settle(demo.echo({ message: 'hello' }, { timeoutMs: 300 }));
          const ac = new AbortController();
          setTimeout(() => ac.abort(), 100);
          const aborted = await settle(demo.echo({ message: 'hello' }, { signal: ac.signal, timeoutMs: 5000 }));
          return { timeout, aborted };
        },
        { outcome },
      );
      assert.equal(r.timeout.code, 'TIMEOUT');
      assert.ok(r.timeout.ms >= 290 && r.timeout.ms < 1500, `timed out after ${r.timeout.ms} ms`);
      assert.equal(r.aborted.code, 'CANCELLED');
      assert.ok(r.aborted.ms < 1000, `cancelled after ${r.aborted.ms} ms`);
    } finally {
      frozen.kill('SIGCONT');
      await frozen.stop();
    }
  });

  test('a server killed mid-call gives a clear LINK_CLOSED error at once, not a hang', async () => {
    const doomed = await startServer();
    try {
      const page = chromium.page;
      await openDemo(page, site.url);
      await inPage(page, async (pkg, { url }) => {
        const conn = await pkg.connectWebSocket(url, { pinning: 'none', callTimeoutMs: 20000 });
        globalThis.doomedConn = conn;
        globalThis.doomedClosed = conn.closed.then((e) => ({ code: e.code, message: e.message }));
      }, { url: doomed.url });
      // Frozen first, so that the calls below are in flight (sent, never answered) when it dies.
      doomed.kill('SIGSTOP');
      await inPage(page, async (pkg, { outcome }) => {
        const settle = eval(outcome);
        const demo = new pkg.DemoClient(globalThis.doomedConn);
        globalThis.doomedCall = settle(demo.flashRead({ address: 0, length: 8192 }));
        globalThis.doomedStream = settle((async () => {
          let n = 0;
          for await (const it of demo.counterStream({ count: 10000 })) n += it ? 1 : 0;
          return n;
        })());
      }, { outcome });
      await new Promise((ok) => setTimeout(ok, 200));
      const killedAt = Date.now();
      doomed.kill('SIGKILL');
      const r = await page.evaluate(async () => ({
        call: await globalThis.doomedCall,
        stream: await globalThis.doomedStream,
        closed: await globalThis.doomedClosed,
        isClosed: globalThis.doomedConn.isClosed,
      }));
      const waited = Date.now() - killedAt;
      console.log(`  after SIGKILL: call ${r.call.code} after ${waited} ms: ${r.call.message}`);
      assert.equal(r.call.ok, false);
      assert.equal(r.call.code, 'LINK_CLOSED');
      assert.match(r.call.message, /closed/);
      assert.equal(r.stream.code, 'LINK_CLOSED', `stream: ${JSON.stringify(r.stream)}`);
      assert.equal(r.closed.code, 'LINK_CLOSED');
      assert.equal(r.isClosed, true);
      assert.ok(waited < 5000, `the page learnt it ${waited} ms after the kill (the call deadline was 20 s)`);
    } finally {
      await doomed.stop();
    }
  });

  test('wss://: the 12 functional tests pass over TLS (a self-signed certificate Chromium is told to trust by its key)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'blerpc-web-tls-'));
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert,
    ], { stdio: 'ignore' });
    // Chromium trusts exactly this certificate's key, nothing else.
    const spki = new X509Certificate(readFileSync(cert)).publicKey.export({ type: 'spki', format: 'der' });
    const hash = createHash('sha256').update(spki).digest('base64');
    const tls = await startServer(['--listen', 'wss://127.0.0.1:0', '--tls-cert', cert, '--tls-key', key]);
    const browser = await launchChromium({ args: [`--ignore-certificate-errors-spki-list=${hash}`] });
    try {
      assert.match(tls.url, /^wss:\/\//);
      await openDemo(browser.page, site.url);
      const info = await browser.page.evaluate(
        (a) => blerpcDemo.connect('websocket', { pinning: { trust: a.key } }, a.url),
        { url: tls.url, key: tls.identity },
      );
      assert.equal(info.encrypted, true);
      const results = await browser.page.evaluate(() => blerpcDemo.runTests());
      for (const r of results) assert.ok(r.ok, `${r.name}: ${r.error}`);
      assert.equal(results.length, 12);
      console.log(`  12/12 functional tests passed over ${tls.url}, TLS and end-to-end encrypted`);
    } finally {
      await browser.close();
      await tls.stop();
    }
  });

  test('a server that is not there: LINK_FAILED', async () => {
    const gone = await startServer();
    await gone.stop();
    const page = chromium.page;
    await openDemo(page, site.url);
    const r = await inPage(page, async (pkg, { url }) => {
      try {
        await pkg.connectWebSocket(url);
        return null;
      } catch (e) {
        return { code: e.code, message: e.message };
      }
    }, { url: gone.url });
    assert.equal(r?.code, 'LINK_FAILED');
  });
});
