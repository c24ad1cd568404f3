// Prints what a page downloads from a built package directory: the wasm and every JS module,
// raw and gzipped (level 9), as a table.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const dir = process.argv[2] ?? 'web/pkg';
const files = readdirSync(dir).filter((f) => f.endsWith('.wasm') || (f.endsWith('.js') && !f.endsWith('.d.js')));
const rows = files.map((f) => {
  const body = readFileSync(join(dir, f));
  return { f, raw: body.length, gz: gzipSync(body, { level: 9 }).length };
});
rows.sort((a, b) => b.raw - a.raw);
const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
const w = Math.max(...rows.map((r) => r.f.length), 5);
console.log(`${'file'.padEnd(w)}  ${'raw'.padStart(10)}  ${'gzip -9'.padStart(10)}`);
for (const r of rows) console.log(`${r.f.padEnd(w)}  ${kib(r.raw).padStart(10)}  ${kib(r.gz).padStart(10)}`);
const sum = (k) => rows.reduce((s, r) => s + r[k], 0);
console.log(`${'total'.padEnd(w)}  ${kib(sum('raw')).padStart(10)}  ${kib(sum('gz')).padStart(10)}`);
