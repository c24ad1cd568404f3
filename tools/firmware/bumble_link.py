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
