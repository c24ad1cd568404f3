// The demo service (proto/blerpc.proto), typed: the reference firmware's five commands.

import { type CallOptions, Connection } from './connection.js';
import { BlerpcError } from './errors.js';
import { decode, encode, type Field } from './proto.js';

/** `EchoRequest` / `EchoResponse`: a string echoed back (the reference firmware caps it at 256 bytes). */
export interface Echo {
  message: string;
}
/** `FlashReadRequest`: `length` bytes of flash at `address` (at most 8,192 per read on the reference firmware). */
export interface FlashReadRequest {
  address: number;
  length: number;
}
/** `FlashReadResponse`. */
export interface FlashReadResponse {
  address: number;
  data: Uint8Array;
}
/** `DataWriteRequest`. */
export interface DataWriteRequest {
  data: Uint8Array;
}
/** `DataWriteResponse`: how many bytes arrived. */
export interface DataWriteResponse {
  length: number;
}
/** `CounterStreamRequest`: how many items to stream. */
export interface CounterStreamRequest {
  count: number;
}
/** `CounterStreamResponse` / `CounterUploadRequest`: item `seq`, value `seq × 10`. */
export interface Counter {
  seq: number;
  value: number;
}
/** `CounterUploadResponse`. */
export interface CounterUploadResponse {
  receivedCount: number;
}

const F = {
  echo: [{ no: 1, name: 'message', type: 'string' }],
  flashReadRequest: [
    { no: 1, name: 'address', type: 'uint32' },
    { no: 2, name: 'length', type: 'uint32' },
  ],
  flashReadResponse: [
    { no: 1, name: 'address', type: 'uint32' },
    { no: 2, name: 'data', type: 'bytes' },
  ],
  dataWriteRequest: [{ no: 1, name: 'data', type: 'bytes' }],
  dataWriteResponse: [{ no: 1, name: 'length', type: 'uint32' }],
  counterStreamRequest: [{ no: 1, name: 'count', type: 'uint32' }],
  counter: [
    { no: 1, name: 'seq', type: 'uint32' },
    { no: 2, name: 'value', type: 'int32' },
  ],
  counterUploadResponse: [{ no: 1, name: 'receivedCount', type: 'uint32' }],
} as const satisfies Record<string, readonly Field[]>;

function decoded<T>(fields: readonly Field[], bytes: Uint8Array, what: string): T {
  try {
    return decode<T>(fields, bytes);
  } catch (e) {
    throw new BlerpcError('DECODE', `${what} does not decode: ${String(e)}`, undefined, { cause: e });
  }
}

/** A typed client of the demo service over any connection. */
export class DemoClient {
  constructor(readonly connection: Connection) {}

  /** `echo`: the message back. */
  async echo(request: Echo, options?: CallOptions): Promise<Echo> {
    const r = await this.connection.call('echo', encode(F.echo, request), options);
    return decoded<Echo>(F.echo, r, 'EchoResponse');
  }

  /** `flash_read`: bytes of the peripheral's flash. */
  async flashRead(request: FlashReadRequest, options?: CallOptions): Promise<FlashReadResponse> {
    const r = await this.connection.call('flash_read', encode(F.flashReadRequest, request), options);
    return decoded<FlashReadResponse>(F.flashReadResponse, r, 'FlashReadResponse');
  }

  /** `data_write`: sends a block; the reply counts it. */
  async dataWrite(request: DataWriteRequest, options?: CallOptions): Promise<DataWriteResponse> {
    const r = await this.connection.call('data_write', encode(F.dataWriteRequest, request), options);
    return decoded<DataWriteResponse>(F.dataWriteResponse, r, 'DataWriteResponse');
  }

  /** `counter_stream` (peripheral → central): `count` items. Breaking out of the loop cancels it. */
  async *counterStream(request: CounterStreamRequest, options?: CallOptions): AsyncGenerator<Counter, void, undefined> {
    const stream = this.connection.serverStream('counter_stream', encode(F.counterStreamRequest, request), options);
    for await (const item of stream) yield decoded<Counter>(F.counter, item, 'CounterStreamResponse');
  }

  /** `counter_upload` (central → peripheral): sends every item, then the reply counts them. */
  async counterUpload(
    items: Iterable<Counter> | AsyncIterable<Counter>,
    options?: CallOptions,
  ): Promise<CounterUploadResponse> {
    async function* encoded(): AsyncGenerator<Uint8Array> {
      for await (const item of items) yield encode(F.counter, item);
    }
    const r = await this.connection.clientStream('counter_upload', encoded(), options);
    return decoded<CounterUploadResponse>(F.counterUploadResponse, r, 'CounterUploadResponse');
  }
}
