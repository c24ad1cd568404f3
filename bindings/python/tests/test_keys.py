"""Pins kept in a store the app provides (``ConnectOptions(key_store=...)``): trust on first
use is the core's, the store only keeps the keys. Over the GATT link the app provides (the
fake bleak client of test_gatt.py, pins under its ``ble://`` peer id) and over TCP."""

from __future__ import annotations

from typing import Dict, Optional

import pytest
from conftest import bounded
from functional import echo
from test_gatt import ADDRESS, bleak_client

import blerpc
import blerpc.bleak


class MemoryKeyStore(blerpc.KeyStore):
    """An app's store: a dict (an app would use its preferences or keychain)."""

    def __init__(self) -> None:
        self.pins: Dict[str, str] = {}
        self.puts = 0

    def get(self, device_id: str) -> Optional[str]:
        return self.pins.get(device_id)

    def put(self, device_id: str, key: str) -> None:
        self.puts += 1
        self.pins[device_id] = key


class BrokenKeyStore(blerpc.KeyStore):
    def get(self, device_id: str) -> Optional[str]:
        raise OSError("the keychain is locked")

    def put(self, device_id: str, key: str) -> None:
        raise OSError("the keychain is locked")


async def connect_gatt(server, options: blerpc.ConnectOptions) -> blerpc.Connection:
    inbox = blerpc.GattInbox()
    client = await bleak_client(server, inbox, ADDRESS)
    return await blerpc.bleak.connect(client, inbox, options)


@pytest.mark.asyncio
@bounded(30)
async def test_an_app_store_pins_on_first_use_and_refuses_another_key(servers) -> None:
    store = MemoryKeyStore()
    options = blerpc.ConnectOptions(key_store=store)
    first = servers("--listen", "tcp://127.0.0.1:0")
    async with await connect_gatt(first, options) as conn:
        assert conn.info().pinned == blerpc.Pinned.FIRST_USE
        assert await echo(conn, "pinned") == "pinned"
    assert store.pins == {f"ble://{ADDRESS}": first.key}
    async with await connect_gatt(first, options) as conn:
        assert conn.info().pinned == blerpc.Pinned.MATCHED
    assert store.puts == 1
    # Another peripheral (a new key) at the same address: refused, nothing pinned over.
    second = servers("--listen", "tcp://127.0.0.1:0")
    with pytest.raises(blerpc.BlerpcError.Setup) as e:
        await connect_gatt(second, options)
    assert e.value.code == "IDENTITY_CHANGED"
    assert store.pins == {f"ble://{ADDRESS}": first.key}


@pytest.mark.asyncio
@bounded(20)
async def test_an_app_store_on_a_url_link_with_a_device_id(server) -> None:
    store = MemoryKeyStore()
    options = blerpc.ConnectOptions(key_store=store, device_id="thermostat")
    async with blerpc.connect(server.url, options) as conn:
        assert conn.info().pinned == blerpc.Pinned.FIRST_USE
    assert store.pins == {"thermostat": server.key}


@pytest.mark.asyncio
@bounded(20)
async def test_a_store_that_fails_or_holds_garbage_refuses_the_connection(server) -> None:
    with pytest.raises(blerpc.BlerpcError.Setup) as e:
        await connect_gatt(server, blerpc.ConnectOptions(key_store=BrokenKeyStore()))
    assert e.value.code == "KEY_STORE"
    assert "the keychain is locked" in e.value.detail
    store = MemoryKeyStore()
    store.pins[f"ble://{ADDRESS}"] = "not a key"
    with pytest.raises(blerpc.BlerpcError.Setup) as e:
        await connect_gatt(server, blerpc.ConnectOptions(key_store=store))
    assert e.value.code == "KEY_STORE"
    assert "not a key" in e.value.detail


@pytest.mark.asyncio
@bounded(20)
async def test_a_store_excludes_the_other_pinning_options(server) -> None:
    for options in [
        blerpc.ConnectOptions(key_store=MemoryKeyStore(), trust_key=server.key),
        blerpc.ConnectOptions(key_store=MemoryKeyStore(), allow_any_key=True),
    ]:
        with pytest.raises(blerpc.BlerpcError.InvalidArgument) as e:
            await blerpc.connect(server.url, options)
        assert "exclude each other" in e.value.detail
