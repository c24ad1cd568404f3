// The codec benchmark in the browser: blerpc-bench codec's workloads (8 KB encrypted response,
// 5-byte echo, 8 KB plaintext, key exchange) compiled to wasm and timed in headless Chromium,
// beside `blerpc-bench codec` natively (blerpc-proto with each crypto provider, and the
// reference Python library), interleaved in one run (native rep 1, wasm rep 1, native rep 2,
// ...). Prints a table; --json FILE keeps every sample.
//
//   bash tools/web/codec.sh [--reps 5] [--json FILE]
//
// Needs web/pkg-bench (tools/web/build.sh --codec-bench) and a release blerpc-bench
// ($BLERPC_BENCH_BIN, else target/release/blerpc-bench).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join, resolve } from 'node:path';

import { launchChromium } from '../harness/chromium.mjs';
import { serveStatic } from '../harness/static-server.mjs';

const WEB = resolve(new URL('..', import.meta.url).pathname);
const ROOT = resolve(WEB, '..');
const WORKLOADS = ['enc_8k', 'enc_echo', 'plain_8k', 'kx'];

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const reps = Number(opt('--reps', '5'));
const samples = Number(opt('--samples', '10'));
const sampleMs = Number(opt('--sample-ms', '20'));
const jsonOut = opt('--json', null);
const bench = process.env.BLERPC_BENCH_BIN ?? join(ROOT, 'target/release/blerpc-bench');
if (!existsSync(bench)) throw new Error(`no ${bench}: cargo build --release -p blerpc-bench (or set BLERPC_BENCH_BIN)`);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (ns) => (ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : ns >= 1e3 ? `${(ns / 1e3).toFixed(2)} µs` : `${ns.toFixed(0)} ns`);

const site = await serveStatic(WEB);
const chromium = await launchChromium();
const page = chromium.page;
await page.goto(`${site.url}bench/codec.html`);
await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 20_000 });

const native = {}; // "workload/provider" -> samples
const wasm = {}; // workload -> samples
let reference = null;
const tmp = mkdtempSync(join(tmpdir(), 'blerpc-codec-'));
const started = Date.now();
for (let rep = 1; rep <= reps; rep++) {
  process.stderr.write(`codec: rep ${rep}/${reps}: native (blerpc-bench codec --reps 1)\n`);
  const file = join(tmp, `native-${rep}.json`);
  execFileSync(
    bench,
    ['codec', '--reps', '1', '--samples', String(samples), '--sample-ms', String(sampleMs), '--json', file],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const report = JSON.parse(readFileSync(file, 'utf8'));
  reference = report.reference ?? reference;
  const pythonSeen = new Set();
  for (const row of report.rows) {
    (native[`${row.workload}/${row.provider}`] ??= []).push(...row.rust_samples_ns.flat());
    // Every provider row of a workload carries the same reference samples: take them once.
    if (row.python_samples_ns?.length && !pythonSeen.has(row.workload)) {
      pythonSeen.add(row.workload);
      (native[`${row.workload}/python`] ??= []).push(...row.python_samples_ns.flat());
    }
  }
  process.stderr.write(`codec: rep ${rep}/${reps}: wasm in Chromium\n`);
  for (const w of WORKLOADS) {
    const r = await page.evaluate(([w, n, ms]) => globalThis.codecBench(w, n, ms), [w, samples, sampleMs]);
    (wasm[w] ??= []).push(...r.samplesNs);
  }
}
await chromium.close();
await site.close();

// plain_8k uses no crypto provider (its native row is "none"): the same figure in every column.
const nativeMed = (w, p) => {
  const s = native[`${w}/${p}`] ?? native[`${w}/none`];
  return s ? median(s) : null;
};
const dedupPython = (w) => (native[`${w}/python`] ? median(native[`${w}/python`]) : null);
const providers = [...new Set(Object.keys(native).map((k) => k.split('/')[1]).filter((p) => p !== 'python' && p !== 'none'))];
const head = ['workload', 'wasm (Chromium)', ...providers.map((p) => `native ${p}`), 'python (reference)', 'wasm ÷ native rustcrypto', 'python ÷ wasm'];
const lines = [];
const json = { command: `node web/bench/codec.mjs ${args.join(' ')}`.trim(), chromium: chromium.version, cpu: cpus()[0]?.model, cores: cpus().length, reference, reps, samples, sampleMs, rows: [] };
for (const w of WORKLOADS) {
  const wm = median(wasm[w]);
  const nat = providers.map((p) => nativeMed(w, p));
  const rc = nativeMed(w, 'rustcrypto');
  const py = dedupPython(w);
  lines.push([w, fmt(wm), ...nat.map((v) => (v == null ? '' : fmt(v))), py == null ? '' : fmt(py), rc ? `${(wm / rc).toFixed(1)}×` : '', py ? `${(py / wm).toFixed(1)}×` : '']);
  json.rows.push({ workload: w, wasm_median_ns: wm, wasm_samples_ns: wasm[w], native_median_ns: Object.fromEntries(providers.map((p, i) => [p, nat[i]])), python_median_ns: py });
}
const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
console.log('bleRPC codec workloads: wasm in headless Chromium vs native, same run (interleaved reps)');
console.log(`host:      ${json.cpu}, ${json.cores} cores; ${chromium.version}`);
console.log(`reference: ${reference ?? 'not run'}`);
console.log('TypeScript reference (@blerpc/protocol-ts): not on the npm registry, not run');
console.log(`method:    ${reps} interleaved reps x ${samples} samples per side; median ns/op over all samples; MTU 247; wasm uses the RustCrypto provider`);
console.log('');
console.log(head.map((h, i) => h.padEnd(widths[i])).join('  '));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const l of lines) console.log(l.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  '));
console.log(`\n${((Date.now() - started) / 1000).toFixed(0)} s`);
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(json, null, 2));
