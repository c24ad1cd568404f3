// Chromium's Bluetooth emulation (CDP BluetoothEmulation + DeviceAccess) bridged to a real
// `blerpc serve` peripheral over WebSocket, so that the page's Web Bluetooth central talks to
// a real bleRPC server through Chromium's own Web Bluetooth stack.
//
//   page (wasm central)                  Chromium (emulated adapter)             this bridge              blerpc serve
//   writeValueWithoutResponse(container) → characteristicOperationReceived write → one WebSocket message → ws://…
//   'characteristicvaluechanged'         ← read answered with the container     ← one WebSocket message ←
//
// What is emulated: the adapter (powered on, LE), one advertising device with the bleRPC
// service and characteristic (plus the 0x2902 descriptor startNotifications needs), the
// chooser (answered with DeviceAccess.selectPrompt), GATT connection and discovery, writes
// without response, and the subscription. CDP has no command that pushes a notification, so
// peripheral→central bytes take the read path: the bridge has the page's own characteristic
// call readValue() (reached through an init script that remembers the characteristic the page
// subscribed on) and answers that read with the container; Chromium then fires a trusted
// `characteristicvaluechanged` on it, which is what the central listens to, as for a
// notification. The emulated characteristic therefore also has the READ property; the central
// never reads. Not emulated: radio timing (connection intervals, packets per event), the MTU
// exchange (Web Bluetooth has no MTU getter; nothing checks write lengths here), loss.

/** The bleRPC GATT UUIDs. */
export const SERVICE_UUID = '12340001-0000-1000-8000-00805f9b34fb';
export const CHARACTERISTIC_UUID = '12340002-0000-1000-8000-00805f9b34fb';
const CCCD_UUID = '00002902-0000-1000-8000-00805f9b34fb';

/**
 * The init script the page must get (before it loads): remembers the characteristic the page
 * subscribes on and offers the bridge a way to read it.
 */
export const INIT_SCRIPT = `(() => {
  const proto = globalThis.BluetoothRemoteGATTCharacteristic && BluetoothRemoteGATTCharacteristic.prototype;
  if (!proto) return;
  const start = proto.startNotifications;
  proto.startNotifications = function () {
    globalThis.__blerpcBridgeCharacteristic = this;
    return start.call(this);
  };
  globalThis.__blerpcBridgeRead = () => globalThis.__blerpcBridgeCharacteristic.readValue().then(() => true);
})();`;

/**
 * Sets up the emulation for `page` (which must be fresh: call before `page.goto`) and bridges
 * the emulated device to `serverUrl`. Returns `{ stats, disconnect(), close() }`; `stats` counts
 * the containers each way and the longest write.
 */
export async function bridgeBluetooth({ browser, page, serverUrl, address = '0A:0B:0C:0D:0E:0F', name = 'blerpc' }) {
  await page.addInitScript(INIT_SCRIPT);
  const bt = await browser.newBrowserCDPSession();
  const devices = await page.context().newCDPSession(page);
  await bt.send('BluetoothEmulation.enable', { state: 'powered-on', leSupported: true });
  await devices.send('DeviceAccess.enable');

  const stats = { toPeripheral: 0, toCentral: 0, connections: 0, maxWrite: 0, errors: [] };
  const log = (m) => {
    if (process.env.BLERPC_WEB_VERBOSE) process.stderr.write(`[ble bridge] ${m}\n`);
  };
  const fail = (m) => {
    stats.errors.push(m);
    process.stderr.write(`[ble bridge] error: ${m}\n`);
  };
  let characteristicId = null;
  let advertised = false;
  let ws = null; // the WebSocket to blerpc serve for the current GATT connection
  let pendingWrites = []; // writes that arrived before the socket opened
  const toCentral = []; // containers waiting to be delivered through the read path
  let delivering = false;
  let closed = false;
  // The device's GATT database is complete: only then may the chooser pick it (the page
  // connects and discovers at once, and startNotifications needs the 0x2902 descriptor).
  let gattReady;
  const gattBuilt = new Promise((ok) => {
    gattReady = ok;
  });

  devices.on('DeviceAccess.deviceRequestPrompted', async ({ id, devices: listed }) => {
    try {
      if (listed.length === 0) {
        if (advertised) return;
        advertised = true;
        // scanRecord needs appearance and txPower, or the emulation is torn down.
        await bt.send('BluetoothEmulation.simulateAdvertisement', {
          entry: {
            deviceAddress: address,
            rssi: -40,
            scanRecord: { name, uuids: [SERVICE_UUID], appearance: 0, txPower: 0 },
          },
        });
        const { serviceId } = await bt.send('BluetoothEmulation.addService', { address, serviceUuid: SERVICE_UUID });
        ({ characteristicId } = await bt.send('BluetoothEmulation.addCharacteristic', {
          serviceId,
          characteristicUuid: CHARACTERISTIC_UUID,
          properties: { writeWithoutResponse: true, notify: true, read: true },
        }));
        await bt.send('BluetoothEmulation.addDescriptor', { characteristicId, descriptorUuid: CCCD_UUID });
        log(`advertising ${address} with service ${serviceId}, characteristic ${characteristicId}`);
        gattReady();
      } else {
        // The prompt fires again once the device is listed: pick it, once its GATT database is
        // complete.
        await gattBuilt;
        const device = listed.find((d) => d.name === name) ?? listed[0];
        await devices.send('DeviceAccess.selectPrompt', { id, deviceId: device.id });
        log(`selected ${device.id}`);
      }
    } catch (e) {
      fail(`device prompt: ${e.message}`);
    }
  });

  function openSocket() {
    if (ws) ws.close();
    stats.connections += 1;
    const socket = new WebSocket(serverUrl);
    socket.binaryType = 'arraybuffer';
    ws = socket;
    socket.addEventListener('open', () => {
      for (const w of pendingWrites) socket.send(w);
      pendingWrites = [];
    });
    socket.addEventListener('message', (e) => {
      if (ws !== socket) return;
      toCentral.push(new Uint8Array(e.data));
      deliver();
    });
    socket.addEventListener('close', () => {
      if (ws === socket && !closed) {
        log('the server closed the WebSocket: disconnecting the emulated device');
        bt.send('BluetoothEmulation.simulateGATTDisconnection', { address }).catch(() => {});
      }
    });
    socket.addEventListener('error', () => log('WebSocket error'));
  }

  // Delivers one container at a time: the page reads, the read is answered with the container.
  let inRead = null;
  async function deliver() {
    if (delivering || toCentral.length === 0 || closed) return;
    delivering = true;
    inRead = toCentral.shift();
    try {
      await page.evaluate(() => globalThis.__blerpcBridgeRead());
      stats.toCentral += 1;
    } catch (e) {
      if (!closed) fail(`read path: ${e.message}`);
    }
    inRead = null;
    delivering = false;
    deliver();
  }

  bt.on('BluetoothEmulation.gattOperationReceived', async ({ address: a, type }) => {
    try {
      if (type === 'connection') openSocket();
      await bt.send('BluetoothEmulation.simulateGATTOperationResponse', { address: a, type, code: 0 });
      log(`gatt ${type}`);
    } catch (e) {
      fail(`gatt ${type}: ${e.message}`);
    }
  });

  bt.on('BluetoothEmulation.characteristicOperationReceived', async (op) => {
    try {
      switch (op.type) {
        case 'write': {
          const bytes = Buffer.from(op.data, 'base64');
          stats.toPeripheral += 1;
          stats.maxWrite = Math.max(stats.maxWrite, bytes.length);
          if (ws && ws.readyState === WebSocket.OPEN) ws.send(bytes);
          else pendingWrites.push(bytes);
          if (op.writeType !== 'write-without-response') {
            await bt.send('BluetoothEmulation.simulateCharacteristicOperationResponse', {
              characteristicId: op.characteristicId,
              type: 'write',
              code: 0,
            });
          }
          break;
        }
        case 'read': {
          const data = inRead ?? new Uint8Array(0);
          await bt.send('BluetoothEmulation.simulateCharacteristicOperationResponse', {
            characteristicId: op.characteristicId,
            type: 'read',
            code: 0,
            data: Buffer.from(data).toString('base64'),
          });
          break;
        }
        default:
          // subscribe-to-notifications, unsubscribe-from-notifications
          await bt.send('BluetoothEmulation.simulateCharacteristicOperationResponse', {
            characteristicId: op.characteristicId,
            type: op.type,
            code: 0,
          });
          log(op.type);
      }
    } catch (e) {
      fail(`characteristic ${op.type}: ${e.message}`);
    }
  });

  bt.on('BluetoothEmulation.descriptorOperationReceived', async (op) => {
    try {
      await bt.send('BluetoothEmulation.simulateDescriptorOperationResponse', {
        descriptorId: op.descriptorId,
        type: op.type,
        code: 0,
        ...(op.type === 'read' ? { data: Buffer.from([0, 0]).toString('base64') } : {}),
      });
    } catch (e) {
      fail(`descriptor ${op.type}: ${e.message}`);
    }
  });

  return {
    stats,
    /** Disconnects the emulated device (the page sees gattserverdisconnected). */
    disconnect: () => bt.send('BluetoothEmulation.simulateGATTDisconnection', { address }),
    close: async () => {
      closed = true;
      if (ws) ws.close();
      // Disconnect before the emulation goes away (disabling it under a connected device is not
      // something a test should depend on).
      await bt.send('BluetoothEmulation.simulateGATTDisconnection', { address }).catch(() => {});
      await bt.send('BluetoothEmulation.disable').catch(() => {});
      await bt.detach().catch(() => {});
      await devices.detach().catch(() => {});
    },
  };
}
