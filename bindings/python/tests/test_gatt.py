"""A GATT link the app provides, through the bleak adapter (``blerpc.bleak``) at its seam:
bleak's client faked (tests/fake_bleak.py, its peer a real ``blerpc serve`` over TCP, one
container per notification, MTU 247), the adapter and ``blerpc.connect_gatt`` real. The
twelve functional tests, calls and streams cancelled mid-way, a link lost mid-call, a write
that fails, an inbox that overflows; and bleak's real API, when bleak is installed."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Callable, Optional

import pytest
from conftest import Server, bounded
from demo_pb import counter_stream_request, decode, echo_request
from fake_bleak import FakeBleakClient
from functional import echo, the_twelve_functional_tests

import blerpc
import blerpc.bleak

ADDRESS = "FA:KE:00:00:00:01"


async def bleak_client(server: Server, inbox: blerpc.GattInbox, address: str = ADDRESS) -> FakeBleakClient:
    """A connected fake client, made as an app makes bleak's."""
    client = FakeBleakClient(
        address, disconnected_callback=blerpc.bleak.disconnected_callback(inbox), peer=server.url
    )
    await client.connect()
    return client


async def connect(
    server: Server, options: Optional[blerpc.ConnectOptions] = None
) -> "tuple[blerpc.Connection, FakeBleakClient]":
    inbox = blerpc.GattInbox()
    client = await bleak_client(server, inbox)
    chosen = options if options is not None else server.pinned()
    return await blerpc.bleak.connect(client, inbox, chosen), client


async def disconnected(client: FakeBleakClient) -> None:
    """Returns once the library has disconnected the GATT link (fails after 1 s)."""
    for _ in range(100):
        if not client.is_connected:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the library did not disconnect the GATT link")


@pytest.mark.asyncio
@bounded(60)
async def test_the_twelve_functional_tests_over_bleak(server: Server) -> None:
    conn, client = await connect(server)
    async with conn:
        await the_twelve_functional_tests(conn)
    # Every PDU fitted the MTU; leaving the block disconnected the client.
    assert client.written and max(map(len, client.written)) <= 244
    assert not client.is_connected


@pytest.mark.asyncio
@bounded(20)
async def test_info_over_gatt(server: Server) -> None:
    conn, _ = await connect(server)
    async with conn:
        info = conn.info()
        assert info.encrypted and info.peer_identity == server.key
        assert info.att_mtu == 247
        assert info.peer_id == f"ble://{ADDRESS}"
        assert not info.long_containers


@pytest.mark.asyncio
@bounded(20)
async def test_cancelling_calls_and_streams_leaves_the_gatt_connection_usable(server: Server) -> None:
    conn, _ = await connect(server)
    async with conn:
        server.stop()
        held = [asyncio.create_task(echo(conn, f"held {i}")) for i in range(4)]
        await asyncio.sleep(0.2)
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        assert all(t.cancelled() for t in held)
        server.resume()
        assert await asyncio.gather(*(echo(conn, f"after {i}") for i in range(4))) == [f"after {i}" for i in range(4)]

        # A stream whose reader is cancelled after the first item, then left.
        async def first_item() -> None:
            async with conn.server_stream("counter_stream", counter_stream_request(3)) as items:
                async for _ in items:
                    await asyncio.Event().wait()

        task = asyncio.create_task(first_item())
        await asyncio.sleep(0.3)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert await echo(conn, "still here") == "still here"
        items = [decode(b) async for b in conn.server_stream("counter_stream", counter_stream_request(2))]
        assert len(items) == 2


@pytest.mark.asyncio
@bounded(20)
async def test_a_link_lost_mid_call_fails_the_call_promptly(server: Server) -> None:
    conn, client = await connect(server)
    server.stop()
    call = asyncio.create_task(conn.call("echo", echo_request("lost")))
    await asyncio.sleep(0.2)
    start = time.monotonic()
    client.drop()
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await call
    assert time.monotonic() - start < 2
    assert e.value.code == "LINK_CLOSED"
    await conn.wait_closed()
    assert conn.is_closed()
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await conn.call("echo", echo_request("late"))
    assert e.value.code == "CLOSED"
    server.resume()


@pytest.mark.asyncio
@bounded(20)
async def test_a_write_that_fails_fails_the_link(server: Server) -> None:
    conn, client = await connect(server)
    client.write_error = OSError("the stack refused the write")
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await conn.call("echo", echo_request("never sent"))
    assert e.value.code == "LINK_FAILED"
    assert "the stack refused the write" in e.value.detail
    await disconnected(client)


@pytest.mark.asyncio
@bounded(20)
async def test_an_inbox_that_overflows_fails_the_link(server: Server) -> None:
    inbox = blerpc.GattInbox(2)
    client = await bleak_client(server, inbox)
    # Notifications nobody takes yet (the connection has not started): the third overflows.
    assert inbox.notification(b"\x00\x00\xc4\x00")
    assert inbox.notification(b"\x00\x00\xc4\x00")
    assert not inbox.notification(b"\x00\x00\xc4\x00")
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await blerpc.bleak.connect(client, inbox, server.pinned())
    assert e.value.code == "LINK_FAILED"
    assert "GATT inbox overflow: 2 notifications" in e.value.detail
    await disconnected(client)
    # A notification longer than an ATT value (514 bytes at the largest MTU) is refused too.
    inbox = blerpc.GattInbox()
    assert inbox.notification(bytes(514))
    assert not inbox.notification(bytes(515))
    assert not inbox.notification(b"\x00")


@pytest.mark.asyncio
@bounded(20)
async def test_exceptions_from_the_apps_link_are_errors(server: Server) -> None:
    # A disconnect that raises (the stack had already dropped the link) is logged: the
    # connection still closes.
    conn, client = await connect(server)
    client.disconnect_error = OSError("not connected")
    await conn.disconnect()
    assert conn.is_closed()
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await conn.call("echo", echo_request("late"))
    assert e.value.code == "CLOSED"
    # An MTU the stack cannot give fails the connect with its text.
    inbox = blerpc.GattInbox()
    client = await bleak_client(server, inbox)
    client.mtu_error = RuntimeError("no MTU yet")
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await blerpc.bleak.connect(client, inbox, server.pinned())
    assert e.value.code == "LINK_FAILED"
    assert "no MTU yet" in e.value.detail


@pytest.mark.asyncio
@bounded(20)
async def test_an_inbox_serves_one_connection(server: Server) -> None:
    inbox = blerpc.GattInbox()
    client = await bleak_client(server, inbox)
    link = blerpc.bleak.BleakGattLink(client)
    async with blerpc.bleak.connect(client, inbox, server.pinned()) as conn:
        assert await echo(conn, "one") == "one"
        with pytest.raises(blerpc.BlerpcError.InvalidArgument) as e:
            await blerpc.connect_gatt(link, inbox, server.pinned())
        assert "already served" in e.value.detail


def test_the_fake_has_bleaks_api() -> None:
    """The calls the adapter makes exist in the real bleak, with the same positional
    parameters as the fake's (when bleak is installed)."""
    bleak = pytest.importorskip("bleak")
    real = bleak.BleakClient

    def positional(f: Callable) -> "list[str]":
        return [p.name for p in inspect.signature(f).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]

    for name in ["__init__", "connect", "disconnect", "start_notify", "stop_notify", "write_gatt_char"]:
        assert positional(getattr(FakeBleakClient, name)) == positional(getattr(real, name)), name
    assert positional(real.write_gatt_char) == ["self", "char_specifier", "data", "response"]
    for prop in ["address", "mtu_size", "is_connected"]:
        assert isinstance(getattr(real, prop), property), prop
