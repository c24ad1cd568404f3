/// <reference path="./web-bluetooth.d.ts" preserve="true" />
// A connection as pages use it: calls as promises, streams as async iterators, deadlines and
// AbortSignal cancellation, every failure a BlerpcError.

import type { Connection as RawConnection } from './blerpc_web.js';
import { BlerpcError, attempt, settle } from './errors.js';

/** Per-call options. */
export interface CallOptions {
  /** Deadline of the whole call, in milliseconds from now (default: the connection's `callTimeoutMs`, 5,000). */
  timeoutMs?: number;
  /** Cancels the call when aborted: its promise rejects with `CANCELLED`. */
  signal?: AbortSignal;
}

/** What setup established. */
export interface ConnectionInfo {
  /** `websocket` or `bluetooth`. */
  link: 'websocket' | 'bluetooth';
  /** The id the key is pinned under: the URL as dialled, or `ble:<BluetoothDevice.id>`. */
  deviceId: string;
  /** `true` when calls are end-to-end encrypted. */
  encrypted: boolean;
  /** The peripheral's Ed25519 identity key (64 hex digits), when encrypted. */
  peerIdentity: string | null;
  /** Trust on first use: `first-use` (pinned now) or `matched` (was pinned); `null` otherwise. */
  pinned: 'first-use' | 'matched' | null;
  /** The ATT MTU the connection assumes (containers are at most `attMtu - 3` bytes, or longer with `longContainers`). */
  attMtu: number;
  /** The longest container this connection sends or accepts. */
  maxContainer: number;
  /** The peripheral's CAPABILITIES: largest request and response (wire bytes). */
  maxRequest: number | null;
  maxResponse: number | null;
  /** The peripheral's TIMEOUT value. */
  peerTimeoutMs: number;
  /** `true` when both sides use the large-message extension (messages above 64 KiB). */
  largeMessages: boolean;
  /** `true` when both sides use the long-container extension (WebSocket only). */
  longContainers: boolean;
}

const UNARY = 0;
const SERVER_STREAM = 1;
const CLIENT_STREAM = 2;
const BIDI_STREAM = 3;

function cancelled(): BlerpcError {
  return new BlerpcError('CANCELLED', 'the call was cancelled');
}

/** An upload (central → peripheral stream) in progress. */
export interface Upload {
  /** Sends one item; resolves once it is queued (waits while the outbox is full). */
  send(item: Uint8Array): Promise<void>;
  /** Ends the stream and resolves with the peripheral's response. */
  finish(): Promise<Uint8Array>;
  /** Cancels the upload. */
  cancel(): void;
}

/**
 * A bidirectional stream (`rpc Chat(stream A) returns (stream B)`) in progress: send items
 * and finish this side's half while reading the peripheral's items (the streams extension).
 */
export interface BidiStream extends AsyncIterable<Uint8Array> {
  /** Sends one item; resolves once it is queued (waits while the peripheral grants no room). */
  send(item: Uint8Array): Promise<void>;
  /** Ends this side's half; the peripheral's items keep coming until it ends the call. */
  finish(): Promise<void>;
  /** Cancels the stream. */
  cancel(): void;
}

/** One bleRPC connection (a central). Make one with `connectWebSocket` or `connectBluetooth`. */
export class Connection {
  readonly #raw: RawConnection;
  /** Settles with the reason (a BlerpcError) when the connection closes, whoever closed it. */
  readonly closed: Promise<BlerpcError>;

  /** @internal */
  constructor(raw: RawConnection) {
    this.#raw = raw;
    this.closed = raw.closed().then((e: unknown) => {
      const err = e as { code?: string; message?: string };
      return new BlerpcError((err.code ?? 'CLOSED') as BlerpcError['code'], String(err.message), undefined, {
        cause: e,
      });
    });
  }

  /** What setup established. */
  get info(): ConnectionInfo {
    return this.#raw.info() as ConnectionInfo;
  }

  /** `true` once the connection is closed. */
  get isClosed(): boolean {
    return this.#raw.isClosed;
  }

  /** The largest request data a call to `name` can carry now (bytes of protobuf). */
  maxRequestData(name: string): number {
    return this.#raw.maxRequestData(new TextEncoder().encode(name).length);
  }

  /** The Web Bluetooth device (to reconnect without the chooser: `connectBluetooth({ device })`). */
  get bluetoothDevice(): BluetoothDevice | undefined {
    return (this.#raw.bluetoothDevice() ?? undefined) as BluetoothDevice | undefined;
  }

  #start(name: string, data: Uint8Array, kind: number, options?: CallOptions): { ticket: number; done: () => void } {
    const signal = options?.signal;
    if (signal?.aborted) throw cancelled();
    const ticket = attempt(() => this.#raw.start(name, data, kind, options?.timeoutMs));
    if (!signal) return { ticket, done: () => {} };
    const onAbort = (): void => this.#raw.cancel(ticket);
    signal.addEventListener('abort', onAbort, { once: true });
    return { ticket, done: () => signal.removeEventListener('abort', onAbort) };
  }

  /** A unary call of any command: request and response are protobuf bytes. */
  async call(name: string, request: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    const { ticket, done } = this.#start(name, request, UNARY, options);
    try {
      return (await settle(this.#raw.response(ticket) as Promise<Uint8Array>));
    } finally {
      done();
    }
  }

  /**
   * A peripheral → central stream of any command: one request, then the items. Leaving the
   * loop early (break, return, an exception) cancels the call.
   */
  async *serverStream(name: string, request: Uint8Array, options?: CallOptions): AsyncGenerator<Uint8Array, void, undefined> {
    const { ticket, done } = this.#start(name, request, SERVER_STREAM, options);
    let ended = false;
    try {
      for (;;) {
        const item = (await settle(this.#raw.next(ticket) as Promise<Uint8Array | undefined>));
        if (item === undefined) {
          ended = true;
          return;
        }
        yield item;
      }
    } finally {
      if (!ended) this.#raw.cancel(ticket);
      done();
    }
  }

  /** Starts a central → peripheral stream of any command; send items, then finish. */
  upload(name: string, options?: CallOptions): Upload {
    const { ticket, done } = this.#start(name, new Uint8Array(0), CLIENT_STREAM, options);
    const raw = this.#raw;
    return {
      send: (item) => settle(raw.send(ticket, item) as Promise<void>),
      finish: async () => {
        try {
          await settle(raw.finish(ticket) as Promise<void>);
          return await settle(raw.response(ticket) as Promise<Uint8Array>);
        } finally {
          done();
        }
      },
      cancel: () => {
        raw.cancel(ticket);
        done();
      },
    };
  }

  /**
   * A bidirectional stream of any command (needs a peripheral with the streams extension: a
   * `blerpc` server). Leaving a `for await` over it early cancels the call.
   */
  bidiStream(name: string, options?: CallOptions): BidiStream {
    const { ticket, done } = this.#start(name, new Uint8Array(0), BIDI_STREAM, options);
    const raw = this.#raw;
    let ended = false;
    return {
      send: (item) => settle(raw.send(ticket, item) as Promise<void>),
      finish: () => settle(raw.finish(ticket) as Promise<void>),
      cancel: () => {
        raw.cancel(ticket);
        done();
      },
      async *[Symbol.asyncIterator]() {
        try {
          for (;;) {
            const item = (await settle(raw.next(ticket) as Promise<Uint8Array | undefined>));
            if (item === undefined) {
              ended = true;
              return;
            }
            yield item;
          }
        } finally {
          if (!ended) raw.cancel(ticket);
          done();
        }
      },
    };
  }

  /** A central → peripheral stream of any command: sends every item, then the response. */
  async clientStream(
    name: string,
    items: Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    const up = this.upload(name, options);
    try {
      for await (const item of items) await up.send(item);
    } catch (e) {
      up.cancel();
      throw e;
    }
    return up.finish();
  }

  /** Closes the connection; calls still waiting reject with `CLOSED`. */
  close(): void {
    this.#raw.close();
  }
}
