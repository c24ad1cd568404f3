// What the browser tests share: the demo site, the page, screenshots.

import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const WEB = resolve(new URL('..', import.meta.url).pathname);
export const ROOT = resolve(WEB, '..');

/** Opens the demo page (optionally with a query) and waits for it to load the wasm. */
export async function openDemo(page, siteUrl, query = '') {
  await page.goto(`${siteUrl}${query ? `?${query}` : ''}`);
  await page.waitForFunction(() => globalThis.blerpcDemo?.ready === true, null, { timeout: 20_000 });
}

/**
 * Saves a full-page screenshot in $BLERPC_WEB_SCREENSHOTS (default target/web-screenshots;
 * never committed) and returns its path.
 */
export async function screenshot(page, name) {
  const dir = process.env.BLERPC_WEB_SCREENSHOTS ?? join(ROOT, 'target/web-screenshots');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Prints the benchmark results as a table (on the test's output). */
export function printBenchmarks(title, results) {
  const rows = results.map((r) => [
    r.name,
    r.ok ? `${r.result.ms.toFixed(3)} ms/${r.result.per}` : `FAIL ${r.error}`,
    r.ok && r.result.kbps != null ? `${r.result.kbps.toFixed(1)} KB/s` : '',
  ]);
  const w = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i].length), 10));
  console.log(`\n${title}`);
  for (const r of rows) console.log(`  ${r[0].padEnd(w[0])}  ${r[1].padStart(w[1])}  ${r[2].padStart(w[2])}`);
}
