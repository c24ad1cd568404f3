// Starts a real `blerpc serve` (the binary built from this checkout) and reads its
// `listening URL identity KEY` line.

import { spawn } from 'node:child_process';
import { mkdtempSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = resolve(new URL('../..', import.meta.url).pathname);

/** The blerpc binary: $BLERPC_BIN, else target/debug/blerpc of this checkout. */
export function blerpcBin() {
  const bin = process.env.BLERPC_BIN ?? join(ROOT, 'target/debug/blerpc');
  if (!existsSync(bin)) {
    throw new Error(`no blerpc binary at ${bin}: build it (cargo build -p blerpc-cli) or set BLERPC_BIN`);
  }
  return bin;
}

/**
 * `blerpc serve --listen ws://127.0.0.1:0` (a free port) with a new identity for this run (an
 * empty config dir): `{ url, identity (null with --plaintext), pid, kill(signal), exited }`.
 */
export async function startServer(extraArgs = []) {
  const config = mkdtempSync(join(tmpdir(), 'blerpc-web-test-'));
  // A --listen among the extra arguments replaces the default one.
  const listen = extraArgs.includes('--listen') ? [] : ['--listen', 'ws://127.0.0.1:0'];
  const child = spawn(blerpcBin(), ['serve', ...listen, ...extraArgs], {
    env: { ...process.env, XDG_CONFIG_HOME: config, HOME: config },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((ok) => child.once('exit', (code, signal) => ok({ code, signal })));
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
    if (process.env.BLERPC_WEB_VERBOSE) process.stderr.write(`[blerpc serve] ${d}`);
  });
  const lines = createInterface({ input: child.stdout });
  const line = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`blerpc serve did not start in 20 s: ${stderr}`)), 20_000);
    lines.once('line', (l) => {
      clearTimeout(timer);
      ok(l);
    });
    exited.then(({ code }) => fail(new Error(`blerpc serve exited (${code}): ${stderr}`)));
  });
  const m = /^listening (\S+) identity ([0-9a-f]{64}|none)$/.exec(line);
  if (!m) throw new Error(`unexpected first line from blerpc serve: ${line}`);
  return {
    url: m[1],
    identity: m[2] === 'none' ? null : m[2],
    pid: child.pid,
    exited,
    kill: (signal = 'SIGTERM') => child.kill(signal),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
