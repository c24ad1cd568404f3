// The reference's functional tests and benchmarks (benchmarks.md §1; crates/blerpc-demo's
// functional.rs and crates/blerpc-bench's reference.rs), with the reference's exact
// parameters, warm-ups and formulas, over a DemoClient. Used by the demo page and its tests.

/** The twelve functional tests, in the reference's order. */
export const TESTS = [
  'echo_basic',
  'echo_empty',
  'echo_max_length',
  'multi_container_echo',
  'flash_read_basic',
  'flash_read_8kb',
  'data_write_basic',
  'data_write_8kb',
  'counter_stream',
  'counter_stream_large',
  'counter_upload',
  'counter_upload_large',
];

/** The six benchmarks, in the runners' order. */
export const BENCHMARKS = [
  'flash_read_throughput',
  'flash_read_overhead',
  'echo_roundtrip',
  'data_write_throughput',
  'counter_stream',
  'counter_upload',
];

/**
 * The published Web figures (Chrome on macOS, Web Bluetooth; nRF54L15 DK peripheral, E2E
 * encryption, ATT MTU 247, CI 15 ms; benchmarks.md §1.1).
 */
export const PUBLISHED_WEB = {
  flash_read_throughput: { kbps: 57.4, ms: 139.3 },
  flash_read_overhead: { ms: 30.0 },
  echo_roundtrip: { ms: 30.0 },
  data_write_throughput: { kbps: 6.5, ms: 30.0 },
  counter_stream: { ms: 3.1, totalMs: 61 },
  counter_upload: { ms: 2.8, totalMs: 56 },
};

function check(ok, what) {
  if (!ok) throw new Error(what());
}

/** Bytes 0, 1, ..., 255, 0, 1, ... of length n. */
function pattern(n) {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = i % 256;
  return b;
}

async function echo(demo, message) {
  const r = await demo.echo({ message });
  check(r.message === message, () => `echoed ${r.message.length} bytes, sent ${message.length}`);
}

async function flashRead(demo, length) {
  const r = await demo.flashRead({ address: 0, length });
  check(r.data.length === length, () => `got ${r.data.length} bytes, asked ${length}`);
}

async function dataWrite(demo, data) {
  const r = await demo.dataWrite({ data });
  check(r.length === data.length, () => `peripheral counted ${r.length}, sent ${data.length}`);
}

async function counterStream(demo, count) {
  const items = [];
  for await (const item of demo.counterStream({ count })) items.push(item);
  check(items.length === count, () => `${items.length} items, expected ${count}`);
  items.forEach((it, i) =>
    check(it.seq === i && it.value === i * 10, () => `item ${i} is seq=${it.seq} value=${it.value}`),
  );
}

async function counterUpload(demo, count) {
  const items = Array.from({ length: count }, (_, i) => ({ seq: i, value: i * 10 }));
  const r = await demo.counterUpload(items);
  check(r.receivedCount === count, () => `received_count ${r.receivedCount}, sent ${count}`);
}

const BODIES = {
  echo_basic: (d) => echo(d, 'hello'),
  echo_empty: (d) => echo(d, ''),
  echo_max_length: (d) => echo(d, 'A'.repeat(256)),
  multi_container_echo: (d) => echo(d, 'B'.repeat(250)),
  flash_read_basic: (d) => flashRead(d, 16),
  flash_read_8kb: (d) => flashRead(d, 8192),
  data_write_basic: (d) => dataWrite(d, pattern(1024)),
  data_write_8kb: (d) => dataWrite(d, pattern(8192)),
  counter_stream: (d) => counterStream(d, 5),
  counter_stream_large: (d) => counterStream(d, 20),
  counter_upload: (d) => counterUpload(d, 5),
  counter_upload_large: (d) => counterUpload(d, 20),
};

/** Runs one functional test: `{ name, ok, error, ms }`. */
export async function runTest(demo, name) {
  const t = performance.now();
  try {
    await BODIES[name](demo);
    return { name, ok: true, error: null, ms: performance.now() - t };
  } catch (e) {
    return { name, ok: false, error: `${e.code ? `${e.code}: ` : ''}${e.message}`, ms: performance.now() - t };
  }
}

/** Runs the twelve tests in order; `onResult` sees each as it finishes. */
export async function runFunctional(demo, onResult = () => {}) {
  const out = [];
  for (const name of TESTS) {
    const r = await runTest(demo, name);
    out.push(r);
    onResult(r);
  }
  return out;
}

function result(name, count, elapsedMs, per, bytes) {
  return {
    name,
    count,
    elapsedMs,
    ms: elapsedMs / count,
    per,
    kbps: bytes === undefined ? null : bytes / 1024 / (elapsedMs / 1000),
  };
}

/** Runs one benchmark with the reference's parameters and formulas. */
export async function runBenchmark(demo, name) {
  switch (name) {
    case 'flash_read_throughput': {
      await flashRead(demo, 8192);
      const t = performance.now();
      for (let i = 0; i < 10; i++) await flashRead(demo, 8192);
      return result(name, 10, performance.now() - t, 'call', 81920);
    }
    case 'flash_read_overhead': {
      await flashRead(demo, 1);
      const t = performance.now();
      for (let i = 0; i < 20; i++) await flashRead(demo, 1);
      return result(name, 20, performance.now() - t, 'call');
    }
    case 'echo_roundtrip': {
      await echo(demo, 'x');
      const t = performance.now();
      for (let i = 0; i < 50; i++) await echo(demo, 'hello');
      return result(name, 50, performance.now() - t, 'call');
    }
    case 'data_write_throughput': {
      const data = pattern(200);
      await dataWrite(demo, data);
      const t = performance.now();
      for (let i = 0; i < 20; i++) await dataWrite(demo, data);
      return result(name, 20, performance.now() - t, 'call', 4000);
    }
    case 'counter_stream': {
      const t = performance.now();
      await counterStream(demo, 20);
      return result(name, 20, performance.now() - t, 'item');
    }
    case 'counter_upload': {
      const t = performance.now();
      await counterUpload(demo, 20);
      return result(name, 20, performance.now() - t, 'item');
    }
    default:
      throw new Error(`unknown benchmark ${name}`);
  }
}

/** Runs the six benchmarks in order: `{ name, ok, result, error }` each. */
export async function runBenchmarks(demo, onResult = () => {}) {
  const out = [];
  for (const name of BENCHMARKS) {
    let r;
    try {
      r = { name, ok: true, result: await runBenchmark(demo, name), error: null };
    } catch (e) {
      r = { name, ok: false, result: null, error: `${e.code ? `${e.code}: ` : ''}${e.message}` };
    }
    out.push(r);
    onResult(r);
  }
  return out;
}

/** A figure as the publication prints it: one decimal from 1 up, three significant digits below. */
export function num(v) {
  if (Math.abs(v) >= 1000) return v.toFixed(0);
  if (!Number.isFinite(v) || v === 0 || Math.abs(v) >= 1) return v.toFixed(1);
  const digits = Math.min(9, Math.max(0, 2 - Math.floor(Math.log10(Math.abs(v)))));
  return v.toFixed(digits);
}

/** A result cell as the publication prints it: `57.4 KB/s, 139.3 ms/call`, `3.1 ms/item (61 ms)`. */
export function cell({ kbps, ms, per, totalMs }) {
  if (kbps != null) return `${num(kbps)} KB/s, ${num(ms)} ms/${per}`;
  if (per === 'item') return `${num(ms)} ms/item (${totalMs >= 1 ? totalMs.toFixed(0) : num(totalMs)} ms)`;
  return `${num(ms)} ms/${per}`;
}
