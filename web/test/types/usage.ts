// A page's use of the package, type-checked against the emitted .d.ts (tools/web/check.sh runs
// `tsc -p web/test/types`): what compiles here is the API as TypeScript users see it.

import {
  BlerpcError,
  type Connection,
  type ConnectionInfo,
  type Counter,
  DemoClient,
  type ErrorCode,
  connectBluetooth,
  connectWebSocket,
  forgetKey,
  init,
  knownKey,
  pinKey,
} from '../../pkg/index.js';

export async function usage(): Promise<void> {
  await init();
  const conn: Connection = await connectWebSocket('ws://127.0.0.1:9000', {
    pinning: { trust: '00'.repeat(32) },
    callTimeoutMs: 2000,
    longContainers: true,
  });
  const info: ConnectionInfo = conn.info;
  const pinned: 'first-use' | 'matched' | null = info.pinned;
  void pinned;
  const demo = new DemoClient(conn);
  const echoed: string = (await demo.echo({ message: 'hi' }, { timeoutMs: 100 })).message;
  const data: Uint8Array = (await demo.flashRead({ address: 0, length: 16 })).data;
  const counted: number = (await demo.dataWrite({ data })).length;
  for await (const item of demo.counterStream({ count: 3 })) {
    const c: Counter = item;
    void c;
  }
  const received: number = (await demo.counterUpload([{ seq: 0, value: 0 }])).receivedCount;
  const ac = new AbortController();
  const raw: Uint8Array = await conn.call('echo', new Uint8Array([0x0a, 0x00]), { signal: ac.signal });
  for await (const item of conn.serverStream('counter_stream', new Uint8Array([8, 3]))) {
    const bytes: Uint8Array = item;
    void bytes;
  }
  const up = conn.upload('counter_upload');
  await up.send(new Uint8Array([8, 1]));
  const done: Uint8Array = await up.finish();
  const reason: BlerpcError = await conn.closed;
  const code: ErrorCode = reason.code;
  const ble = await connectBluetooth({ namePrefix: 'blerpc', attMtu: 185, pinning: 'tofu' });
  const device: BluetoothDevice | undefined = ble.bluetoothDevice;
  if (device) await connectBluetooth({ device });
  pinKey('ble:abc', 'ff'.repeat(32));
  const key: string | null = knownKey('ble:abc');
  forgetKey('ble:abc');
  try {
    await demo.echo({ message: 'x' });
  } catch (e) {
    if (e instanceof BlerpcError && e.code === 'LINK_CLOSED') conn.close();
  }
  void [echoed, counted, received, raw, done, code, key];
}
