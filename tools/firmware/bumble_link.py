"""bleRPC over a real BLE host stack (Google's Bumble) for the reference peers of tools/interop/.

The reference central and peripheral in tools/interop/ read containers from an asyncio stream
and write them to a writer with ``write()`` + ``drain()`` (their TCP framing: containers are
self-delimiting). Here each GATT PDU is one container, so the same classes run over BLE
unchanged: notifications (or writes) are fed into an ``asyncio.StreamReader``, and each
``write()`` becomes one ATT Write Command (or one notification), sent in order by ``drain()``.
"""

from __future__ import annotations

import asyncio
import os
import sys

from bumble.core import UUID

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))

SERVICE_UUID = UUID("12340001-0000-1000-8000-00805f9b34fb")
CHARACTERISTIC_UUID = UUID("12340002-0000-1000-8000-00805f9b34fb")
ATT_MTU = 247


class PduWriter:
    """A stream-writer look-alike: each ``write()`` is one PDU, sent by ``drain()`` in order."""

    def __init__(self, send):
        self._send = send
        self._pending: list[bytes] = []
        self.sent = 0

    def write(self, data: bytes) -> None:
        self._pending.append(bytes(data))

    async def drain(self) -> None:
        while self._pending:
            pdu = self._pending.pop(0)
            await self._send(pdu)
            self.sent += 1

    def close(self) -> None:
        self._pending.clear()


def pdu_reader() -> asyncio.StreamReader:
    """A reader the PDUs are fed into (``feed_data`` per notification or write)."""
    return asyncio.StreamReader()


def advertises_service(advertisement) -> bool:
    """True if a Bumble advertisement lists the bleRPC service UUID."""
    from bumble.core import AdvertisingData

    for kind in (
        AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS,
        AdvertisingData.INCOMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS,
    ):
        uuids = advertisement.data.get(kind) or []
        if SERVICE_UUID in uuids:
            return True
    return False


class CentralLink:
    """A Bumble central's GATT connection to a bleRPC peripheral, from :func:`connect_central`:
    the connection, its ``Peer``, the bleRPC characteristic and the exchanged ATT MTU. Not yet
    subscribed (``peer.subscribe(characteristic, on_value)``)."""

    def __init__(self, connection, peer, characteristic, mtu: int):
        self.connection = connection
        self.peer = peer
        self.characteristic = characteristic
        self.mtu = mtu


async def connect_central(device, timeout: float) -> CentralLink:
    """Scans (on a powered-on Bumble ``device``) for the bleRPC service, connects, exchanges the
    ATT MTU (asking for 247) and discovers the service and characteristic. Raises
    ``asyncio.TimeoutError`` if nothing advertises or connects within ``timeout`` seconds, and
    ``LookupError`` if the peripheral lacks the service or the characteristic."""
    from bumble.device import Peer

    found: asyncio.Future = asyncio.get_running_loop().create_future()

    def on_advertisement(adv) -> None:
        if not found.done() and advertises_service(adv):
            found.set_result(adv)

    device.on("advertisement", on_advertisement)
    await device.start_scanning()
    try:
        adv = await asyncio.wait_for(found, timeout)
    finally:
        device.remove_listener("advertisement", on_advertisement)
        await device.stop_scanning()
    connection = await asyncio.wait_for(device.connect(adv.address), timeout)
    peer = Peer(connection)
    mtu = await peer.request_mtu(ATT_MTU)
    await peer.discover_services([SERVICE_UUID])
    services = peer.get_services_by_uuid(SERVICE_UUID)
    if not services:
        raise LookupError("no bleRPC service")
    await services[0].discover_characteristics()
    chars = services[0].get_characteristics_by_uuid(CHARACTERISTIC_UUID)
    if not chars:
        raise LookupError("no bleRPC characteristic")
    return CentralLink(connection, peer, chars[0], mtu)
