"""A fake ``bleak.BleakClient`` whose peripheral is a real ``blerpc serve`` over TCP: the seam
the bleak adapter (``blerpc.bleak``) is tested at, since BlueZ cannot run here.

It has the methods and signatures of bleak's client that the adapter uses (checked against the
real package in test_gatt.py when bleak is installed). Each write without response is one
container on the TCP stream; each container the server sends is one notification, split off
the stream with ``blerpc.container_len`` (the core's header parsing), in order. ``drop()`` is
a radio link loss: the socket closes and ``disconnected_callback`` runs, as bleak runs it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, List, Optional, Union
from urllib.parse import urlparse

import blerpc
import blerpc.bleak

MTU = 247


class FakeBleakClient:
    def __init__(
        self,
        address_or_ble_device: Union[str, Any],
        disconnected_callback: Optional[Callable[["FakeBleakClient"], None]] = None,
        services: Optional[Any] = None,
        *,
        timeout: float = 30,
        peer: str = "",
        **kwargs: Any,
    ) -> None:
        self._address = str(address_or_ble_device)
        self._disconnected_callback = disconnected_callback
        self._peer = urlparse(peer)  # the server's tcp:// URL
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._pump: Optional[asyncio.Task] = None
        self._notify: Optional[Callable[[Any, bytearray], None]] = None
        self.written: List[bytes] = []
        #: Set to make every later write fail, as a stack's write error would.
        self.write_error: Optional[Exception] = None
        #: Set to make `disconnect` (and `mtu_size`) fail, as on a stack that already lost
        #: the link.
        self.disconnect_error: Optional[Exception] = None
        self.mtu_error: Optional[Exception] = None

    @property
    def address(self) -> str:
        return self._address

    @property
    def mtu_size(self) -> int:
        if self.mtu_error is not None:
            raise self.mtu_error
        return MTU

    @property
    def is_connected(self) -> bool:
        return self._writer is not None

    async def connect(self, **kwargs: Any) -> None:
        self._reader, self._writer = await asyncio.open_connection(self._peer.hostname, self._peer.port)
        self._pump = asyncio.create_task(self._notifications())

    async def disconnect(self) -> None:
        if self.disconnect_error is not None:
            raise self.disconnect_error
        self._gone()

    def drop(self) -> None:
        """The radio link is lost."""
        self._gone()

    async def start_notify(
        self, char_specifier: Union[Any, int, str], callback: Callable[[Any, bytearray], None], **kwargs: Any
    ) -> None:
        assert str(char_specifier) == blerpc.bleak.CHARACTERISTIC_UUID
        self._notify = callback

    async def stop_notify(self, char_specifier: Union[Any, int, str]) -> None:
        self._notify = None

    async def write_gatt_char(
        self, char_specifier: Union[Any, int, str], data: Any, response: Optional[bool] = None
    ) -> None:
        assert str(char_specifier) == blerpc.bleak.CHARACTERISTIC_UUID
        assert response is False, "bleRPC writes without response"
        if self.write_error is not None:
            raise self.write_error
        if self._writer is None:
            raise ConnectionError("not connected")
        assert len(data) <= MTU - 3, f"a PDU of {len(data)} bytes over the MTU"
        self.written.append(bytes(data))
        self._writer.write(bytes(data))
        await self._writer.drain()

    async def _notifications(self) -> None:
        assert self._reader is not None
        buf = b""
        while True:
            chunk = await self._reader.read(4096)
            if not chunk:
                break
            buf += chunk
            while (n := blerpc.container_len(buf)) is not None and len(buf) >= n:
                pdu, buf = buf[:n], buf[n:]
                if self._notify is not None:
                    self._notify(blerpc.bleak.CHARACTERISTIC_UUID, bytearray(pdu))
        self._gone()

    def _gone(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        if self._pump is not None and self._pump is not asyncio.current_task():
            self._pump.cancel()
        if self._disconnected_callback is not None:
            self._disconnected_callback(self)
