"""The reference peripheral (tools/interop/peripheral.py's ``Connection``, on blerpc-protocol
0.8.0) as a Bumble GATT server: the bleRPC service and characteristic (WRITE_WITHOUT_RESPONSE |
NOTIFY), advertising the service UUID with the name "blerpc" in the scan response, one
connection at a time, encryption required.

    python tools/firmware/bumble_peripheral.py --hci tcp-client:127.0.0.1:PORT --seed HEX

Prints ``IDENTITY <public key hex>`` once advertising, then serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import bumble_link  # noqa: F401  (puts tools/interop on the path)
from blerpc_protocol.crypto import BlerpcCrypto
from bumble.core import AdvertisingData
from bumble.device import Device
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.hci import Address
from bumble.transport import open_transport
from bumble_link import ATT_MTU, CHARACTERISTIC_UUID, SERVICE_UUID, PduWriter, pdu_reader
from peripheral import Connection


async def run(args) -> int:
    identity = BlerpcCrypto.ed25519_private_from_bytes(bytes.fromhex(args.seed))
    public = BlerpcCrypto.ed25519_public_bytes(identity)

    async with await open_transport(args.hci) as hci:
        device = Device.with_hci("blerpc", Address("C0:C1:C2:C3:C4:C5"), hci.source, hci.sink)
        device.gatt_server.max_mtu = ATT_MTU
        readers: dict = {}

        def on_write(connection, value) -> None:
            reader = readers.get(connection.handle)
            if reader is not None:
                reader.feed_data(bytes(value))

        char = Characteristic(
            CHARACTERISTIC_UUID,
            Characteristic.Properties.WRITE_WITHOUT_RESPONSE | Characteristic.Properties.NOTIFY,
            Characteristic.WRITEABLE,
            CharacteristicValue(write=on_write),
        )
        device.add_service(Service(SERVICE_UUID, [char]))
        device.advertising_data = bytes(
            AdvertisingData(
                [
                    (AdvertisingData.FLAGS, bytes([0x06])),
                    (AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS, bytes(SERVICE_UUID)),
                ]
            )
        )
        device.scan_response_data = bytes(AdvertisingData([(AdvertisingData.COMPLETE_LOCAL_NAME, b"blerpc")]))

        def on_connection(connection) -> None:
            reader = pdu_reader()
            readers[connection.handle] = reader

            async def notify(pdu: bytes) -> None:
                await device.notify_subscriber(connection, char, pdu)

            async def serve() -> None:
                try:
                    await Connection(reader, PduWriter(notify), identity).serve()
                except Exception as e:  # noqa: BLE001 - logged; the link goes on
                    print(f"connection error: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

            task = asyncio.get_running_loop().create_task(serve())

            def on_disconnection(_reason) -> None:
                readers.pop(connection.handle, None)
                reader.feed_eof()
                task.cancel()

            connection.on("disconnection", on_disconnection)

        device.on("connection", on_connection)
        await device.power_on()
        await device.start_advertising(auto_restart=True)
        print(f"IDENTITY {public.hex()}", flush=True)
        await asyncio.Event().wait()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hci", required=True, help="Bumble transport, e.g. tcp-client:127.0.0.1:PORT")
    ap.add_argument("--seed", required=True, help="the Ed25519 identity seed, 32 bytes hex")
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
