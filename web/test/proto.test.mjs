// The TypeScript API's protobuf codec (ts/proto.ts, compiled into web/pkg/proto.js), with
// byte literals as protoc and prost encode them. Runs in Node (no browser, no wasm).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { decode, encode } from '../pkg/proto.js';

const ECHO = [{ no: 1, name: 'message', type: 'string' }];
const COUNTER = [
  { no: 1, name: 'seq', type: 'uint32' },
  { no: 2, name: 'value', type: 'int32' },
];
const FLASH = [
  { no: 1, name: 'address', type: 'uint32' },
  { no: 2, name: 'data', type: 'bytes' },
];
const hex = (b) => Buffer.from(b).toString('hex');

test('encodes as protoc does: strings, varints, negative int32 as ten bytes, defaults omitted', () => {
  assert.equal(hex(encode(ECHO, { message: 'hello' })), '0a0568656c6c6f');
  assert.equal(hex(encode(ECHO, { message: '' })), '');
  assert.equal(hex(encode(COUNTER, { seq: 300, value: 10 })), '08ac02100a');
  assert.equal(hex(encode(COUNTER, { seq: 1, value: -10 })), '080110f6ffffffffffffffff01');
  assert.equal(hex(encode(COUNTER, { seq: 0xffffffff, value: -0x80000000 })), '08ffffffff0f1080808080f8ffffffff01');
  assert.equal(hex(encode(FLASH, { address: 0, data: new Uint8Array([1, 2]) })), '12020102');
});

test('decodes what it encodes, skips unknown fields, fills defaults', () => {
  for (const v of [0, 1, -1, 10, -10, 0x7fffffff, -0x80000000]) {
    assert.deepEqual(decode(COUNTER, encode(COUNTER, { seq: 7, value: v })), { seq: 7, value: v });
  }
  // Field 3 (varint), field 4 (fixed64), field 5 (bytes), field 6 (fixed32) are skipped.
  const withUnknown = Buffer.from('0807' + '1803' + '210102030405060708' + '2a0161' + '3501020304' + '10f6ffffffffffffffff01', 'hex');
  assert.deepEqual(decode(COUNTER, withUnknown), { seq: 7, value: -10 });
  assert.deepEqual(decode(COUNTER, new Uint8Array(0)), { seq: 0, value: 0 });
  const flash = decode(FLASH, Buffer.from('0804120401020304', 'hex'));
  assert.equal(flash.address, 4);
  assert.equal(hex(flash.data), '01020304');
});

test('refuses what does not decode and what does not fit its field', () => {
  assert.throws(() => decode(ECHO, Buffer.from('0a05686568', 'hex')), /longer than the message/);
  assert.throws(() => decode(ECHO, Buffer.from('08', 'hex')), /truncated varint|wire type/);
  assert.throws(() => decode(ECHO, Buffer.from('0802', 'hex')), /wire type/);
  assert.throws(() => encode(COUNTER, { seq: -1 }), /integer in 0\.\.4294967295/);
  assert.throws(() => encode(COUNTER, { value: 2 ** 31 }), /integer in/);
  assert.throws(() => encode(ECHO, { message: 5 }), /must be a string/);
});
