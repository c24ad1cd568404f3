"""bleRPC over bleak (https://github.com/hbldh/bleak): a connected ``BleakClient`` as the
GATT link of :func:`blerpc.connect_gatt`.

    import blerpc
    import blerpc.bleak
    from bleak import BleakClient

    inbox = blerpc.GattInbox()
    client = BleakClient(device, disconnected_callback=blerpc.bleak.disconnected_callback(inbox))
    await client.connect()
    async with blerpc.bleak.connect(client, inbox, blerpc.ConnectOptions(trust_key=KEY)) as conn:
        reply = await conn.call("echo", request)

The adapter only moves bytes: each PDU the library sends is ``write_gatt_char(characteristic,
pdu, response=False)`` (bleak paces writes without response itself), each notification of
the characteristic goes to the inbox (``start_notify``), the MTU is ``client.mtu_size`` and the
disconnection reaches the inbox through the client's ``disconnected_callback``, which bleak
takes only when the client is made: hence :func:`disconnected_callback`. bleak itself is not a
dependency of this package.

On Linux (BlueZ), bleak reports an ``mtu_size`` of 23 until the MTU is acquired; BlueZ
exchanges it on connect (the reference peripherals settle on 247), so pass ``att_mtu=247``
there if bleak reports 23. bleRPC's encryption needs an ATT MTU of at least 136.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from . import ConnectOptions, GattInbox, GattLink, _Connecting, _open_gatt

if TYPE_CHECKING:
    from bleak import BleakClient

    from ._ffi.blerpc_ffi import Connection as _Connection

__all__ = ["CHARACTERISTIC_UUID", "SERVICE_UUID", "BleakGattLink", "connect", "disconnected_callback"]

#: The bleRPC primary service.
SERVICE_UUID = "12340001-0000-1000-8000-00805f9b34fb"
#: The bleRPC characteristic (write without response, notify).
CHARACTERISTIC_UUID = "12340002-0000-1000-8000-00805f9b34fb"


def disconnected_callback(inbox: GattInbox) -> Callable[["BleakClient"], None]:
    """The ``disconnected_callback`` to make the ``BleakClient`` with: tells ``inbox``."""

    def on_disconnect(client: "BleakClient") -> None:
        inbox.disconnected(f"bleak: {client.address} disconnected")

    return on_disconnect


class BleakGattLink(GattLink):
    """A connected ``BleakClient`` as a :class:`blerpc.GattLink`."""

    def __init__(self, client: "BleakClient", *, att_mtu: Optional[int] = None) -> None:
        self._client = client
        self._att_mtu = att_mtu

    def att_mtu(self) -> int:
        return self._att_mtu if self._att_mtu is not None else self._client.mtu_size

    def peer_id(self) -> str:
        return f"ble://{self._client.address}"

    async def write_without_response(self, pdu: bytes) -> None:
        await self._client.write_gatt_char(CHARACTERISTIC_UUID, pdu, response=False)

    async def disconnect(self) -> None:
        await self._client.disconnect()


def connect(
    client: "BleakClient",
    inbox: GattInbox,
    options: Optional[ConnectOptions] = None,
    *,
    att_mtu: Optional[int] = None,
) -> _Connecting:
    """Subscribes to the bleRPC characteristic's notifications (into ``inbox``) and connects
    over ``client`` (made with ``disconnected_callback=disconnected_callback(inbox)``, then
    connected). Await it, or ``async with`` it, as :func:`blerpc.connect`. ``att_mtu``
    overrides ``client.mtu_size``."""
    link = BleakGattLink(client, att_mtu=att_mtu)

    def on_notification(_characteristic: Any, data: bytearray) -> None:
        inbox.notification(bytes(data))

    async def open() -> "_Connection":
        await client.start_notify(CHARACTERISTIC_UUID, on_notification)
        return await _open_gatt(link, inbox, options)

    return _Connecting(open)
