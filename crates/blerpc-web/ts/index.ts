/// <reference path="./web-bluetooth.d.ts" preserve="true" />
// The bleRPC browser central: the blerpc-proto core compiled to WebAssembly, over Web
// Bluetooth and WebSocket. See docs/web.md.

import initWasm, {
  Connection as RawConnection,
  forgetKey as rawForgetKey,
  knownKey as rawKnownKey,
  pinKey as rawPinKey,
  serviceUuid,
} from './blerpc_web.js';
import { Connection } from './connection.js';
import { attempt, settle } from './errors.js';

export { BlerpcError, type ErrorCode } from './errors.js';
export { Connection, type CallOptions, type ConnectionInfo, type Upload, type BidiStream } from './connection.js';
export * from './demo.js';

/** Options of both links. */
export interface ConnectOptions {
  /**
   * How the peripheral's identity key is trusted: `'tofu'` (default: pinned in browser storage
   * on first use, a different key later refused with `IDENTITY_CHANGED`), `{ trust: hex }` (only
   * this key, else `IDENTITY_REJECTED`), or `'none'` (any key: open to a man in the middle).
   */
  pinning?: 'tofu' | 'none' | { trust: string };
  /** Where trust on first use keeps pins (default `localStorage`): `get` returns the hex key or null. */
  keyStore?: { get(deviceId: string): string | null | undefined; set(deviceId: string, keyHex: string): void };
  /** The `localStorage` key prefix of pins (default `blerpc.known_keys.`). */
  keyStorePrefix?: string;
  /** The id the key is pinned under (default: the URL, or `ble:<BluetoothDevice.id>`). */
  deviceId?: string;
  /** Refuse a peripheral without encryption (default `true`). */
  requireEncryption?: boolean;
  /** Deadline of each call unless the call sets its own (default 5,000 ms). */
  callTimeoutMs?: number;
  /** Deadline of each setup reply, TIMEOUT and CAPABILITIES (default 1,000 ms). */
  setupTimeoutMs?: number;
  /** Deadline of each key-exchange reply (default 2,000 ms). */
  handshakeTimeoutMs?: number;
  /** Longest gap between two items of a peripheral → central stream (default 2,000 ms). */
  streamIdleTimeoutMs?: number;
  /** Largest response accepted, wire bytes (default 16 MiB). */
  maxResponseBytes?: number;
  /** Calls in flight at once, 1 to 4 (default 4). */
  maxCallsInFlight?: number;
  /** Stream items held before they are read; more fail the stream with `STREAM_OVERFLOW` (default 1,024). */
  streamBuffer?: number;
}

/** Options of the WebSocket link. */
export interface WebSocketOptions extends ConnectOptions {
  /** Give up opening the socket after this long (default 10,000 ms). */
  connectTimeoutMs?: number;
  /** Offer the long-container extension (16 KiB containers; default `true`; `blerpc serve` agrees unless `--classic-containers`). */
  longContainers?: boolean;
}

/** Options of the Web Bluetooth link. */
export interface BluetoothOptions extends ConnectOptions {
  /** A device the page already has: no chooser. */
  device?: BluetoothDevice;
  /** Offer only devices advertising this name. */
  name?: string;
  /** Offer only devices whose name starts with this. */
  namePrefix?: string;
  /**
   * The ATT MTU to assume (default 247; containers are at most `attMtu - 3` bytes). Web
   * Bluetooth has no MTU getter, so the page cannot learn what was negotiated: lower this for a
   * device known to negotiate less. The key exchange needs 136.
   */
  attMtu?: number;
}

/** The bleRPC GATT service UUID (for `requestDevice` filters of your own). */
export const SERVICE_UUID = '12340001-0000-1000-8000-00805f9b34fb';
/** The bleRPC characteristic UUID. */
export const CHARACTERISTIC_UUID = '12340002-0000-1000-8000-00805f9b34fb';

let ready: Promise<void> | undefined;

/**
 * Loads the WebAssembly module (once; later calls return the same promise). Connecting does it
 * too, but call it at page load when you use Web Bluetooth: `requestDevice` must run soon
 * after the user's click.
 */
export function init(wasm?: URL | string | Response | BufferSource | WebAssembly.Module): Promise<void> {
  ready ??= initWasm(wasm === undefined ? undefined : { module_or_path: wasm }).then((exports) => {
    if (serviceUuid() !== SERVICE_UUID) throw new Error('blerpc-web: package and wasm disagree');
    void exports;
  });
  return ready;
}

/** Connects to `blerpc serve --listen ws://…` (or `wss://`) and runs setup and the key exchange. */
export async function connectWebSocket(url: string, options: WebSocketOptions = {}): Promise<Connection> {
  await init();
  return new Connection(await settle(RawConnection.connectWebSocket(url, options)));
}

/**
 * Asks the user for a device advertising the bleRPC service, connects over GATT and runs setup
 * and the key exchange. Call it from a user gesture (a click).
 */
export async function connectBluetooth(options: BluetoothOptions = {}): Promise<Connection> {
  await init();
  return new Connection(await settle(RawConnection.connectBluetooth(options)));
}

/** The key pinned in `localStorage` for `deviceId` (64 hex digits), or null. */
export function knownKey(deviceId: string, prefix?: string): string | null {
  return attempt(() => rawKnownKey(deviceId, prefix) ?? null);
}

/** Forgets the key pinned in `localStorage` for `deviceId` (after a legitimate re-key). */
export function forgetKey(deviceId: string, prefix?: string): void {
  attempt(() => rawForgetKey(deviceId, prefix));
}

/** Pins `keyHex` for `deviceId` in `localStorage` (a key learnt another way, before the first connection). */
export function pinKey(deviceId: string, keyHex: string, prefix?: string): void {
  attempt(() => rawPinKey(deviceId, keyHex, prefix));
}
