// A minimal protobuf (proto3) codec for the demo service's messages: varint (uint32, int32),
// length-delimited (string, bytes); unknown fields skipped; default values omitted on encode,
// as prost and the reference generators do. Messages of other services travel as bytes
// (Connection.call), encoded with whatever protobuf library the page uses.

/** The field types the demo service uses. */
export type FieldType = 'string' | 'bytes' | 'uint32' | 'int32';

/** One field of a message: its number, its name in the JavaScript object, its type. */
export interface Field {
  readonly no: number;
  readonly name: string;
  readonly type: FieldType;
}

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

class Writer {
  private buf = new Uint8Array(64);
  private len = 0;

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  varint(v: number): void {
    this.reserve(10);
    if (v < 0) {
      // A negative int32 is sign-extended to 64 bits: ten bytes.
      let big = BigInt.asUintN(64, BigInt(v));
      for (let i = 0; i < 9; i++) {
        this.buf[this.len++] = Number(big & 0x7fn) | 0x80;
        big >>= 7n;
      }
      this.buf[this.len++] = Number(big);
      return;
    }
    while (v >= 0x80) {
      this.buf[this.len++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.len++] = v;
  }

  bytes(b: Uint8Array): void {
    this.varint(b.length);
    this.reserve(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

function checkInt(name: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new TypeError(`field ${name} must be an integer in ${min}..${max}, got ${String(v)}`);
  }
  return v;
}

/** Encodes `msg` (a plain object) with `fields`. */
export function encode(fields: readonly Field[], msg: object): Uint8Array {
  const w = new Writer();
  const m = msg as Record<string, unknown>;
  for (const f of fields) {
    const v = m[f.name];
    if (v === undefined || v === null) continue;
    switch (f.type) {
      case 'uint32': {
        const n = checkInt(f.name, v, 0, 0xffffffff);
        if (n === 0) break;
        w.varint(f.no << 3);
        w.varint(n);
        break;
      }
      case 'int32': {
        const n = checkInt(f.name, v, -0x80000000, 0x7fffffff);
        if (n === 0) break;
        w.varint(f.no << 3);
        w.varint(n);
        break;
      }
      case 'string': {
        if (typeof v !== 'string') throw new TypeError(`field ${f.name} must be a string`);
        if (v.length === 0) break;
        w.varint((f.no << 3) | 2);
        w.bytes(utf8Encoder.encode(v));
        break;
      }
      case 'bytes': {
        if (!(v instanceof Uint8Array)) throw new TypeError(`field ${f.name} must be a Uint8Array`);
        if (v.length === 0) break;
        w.varint((f.no << 3) | 2);
        w.bytes(v);
        break;
      }
    }
  }
  return w.finish();
}

class Reader {
  pos = 0;
  constructor(readonly buf: Uint8Array) {}

  /** A varint as a BigInt (up to 64 bits). */
  varint(): bigint {
    let v = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.pos >= this.buf.length) throw new RangeError('truncated varint');
      const b = this.buf[this.pos++];
      v |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return BigInt.asUintN(64, v);
    }
    throw new RangeError('varint longer than 10 bytes');
  }

  length(): number {
    const n = this.varint();
    if (n > BigInt(this.buf.length - this.pos)) throw new RangeError('field longer than the message');
    return Number(n);
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0: this.varint(); return;
      case 1: this.pos += 8; break;
      case 2: {
        // Not `this.pos += this.length()`: that adds to the position read before the length.
        const n = this.length();
        this.pos += n;
        return;
      }
      case 5: this.pos += 4; break;
      default: throw new RangeError(`unsupported wire type ${wireType}`);
    }
    if (this.pos > this.buf.length) throw new RangeError('truncated field');
  }
}

/** Decodes a message of `fields` from `bytes`; absent fields take proto3's defaults. */
export function decode<T>(fields: readonly Field[], bytes: Uint8Array): T {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    out[f.name] = f.type === 'string' ? '' : f.type === 'bytes' ? new Uint8Array(0) : 0;
  }
  const r = new Reader(bytes);
  while (r.pos < bytes.length) {
    const key = r.varint();
    const no = Number(key >> 3n);
    const wireType = Number(key & 7n);
    const f = fields.find((x) => x.no === no);
    if (!f) {
      r.skip(wireType);
      continue;
    }
    const want = f.type === 'string' || f.type === 'bytes' ? 2 : 0;
    if (wireType !== want) throw new RangeError(`field ${f.name} has wire type ${wireType}`);
    switch (f.type) {
      case 'uint32': out[f.name] = Number(BigInt.asUintN(32, r.varint())); break;
      case 'int32': out[f.name] = Number(BigInt.asIntN(32, r.varint())); break;
      case 'string': {
        const n = r.length();
        out[f.name] = utf8Decoder.decode(bytes.subarray(r.pos, r.pos + n));
        r.pos += n;
        break;
      }
      case 'bytes': {
        const n = r.length();
        out[f.name] = bytes.slice(r.pos, r.pos + n);
        r.pos += n;
        break;
      }
    }
  }
  return out as T;
}
