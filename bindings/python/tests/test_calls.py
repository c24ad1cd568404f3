"""The reference's twelve functional tests through the binding, against a real `blerpc serve`,
with the demo service's messages (tests/demo_pb.py); streams both ways; what `info()` says."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Server, bounded
from demo_pb import counter_stream_request, counter_upload_request, decode, echo_request, flash_read_request
from functional import echo, the_twelve_functional_tests

import blerpc


@pytest.mark.asyncio
@bounded(30)
async def test_the_twelve_functional_tests(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        await the_twelve_functional_tests(conn)


@pytest.mark.asyncio
@bounded(20)
async def test_a_flash_read_at_an_address_returns_that_part(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        reply = decode(await conn.call("flash_read", flash_read_request(1, 3), deadline_ms=2000))
        assert reply == {1: 1, 2: bytes([38, 69, 100])}


@pytest.mark.asyncio
@bounded(20)
async def test_calls_run_concurrently_on_one_connection(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        # The four calls the core keeps in flight at once, several times over.
        for round in range(5):
            messages = [f"call {round}.{i}" for i in range(4)]
            assert await asyncio.gather(*(echo(conn, m) for m in messages)) == messages
        # A fifth while four are in flight (held by pausing the server) is refused, not
        # queued; the four answer.
        server.stop()
        held = [asyncio.create_task(echo(conn, f"held {i}")) for i in range(4)]
        await asyncio.sleep(0.2)
        with pytest.raises(blerpc.BlerpcError.Call) as e:
            await echo(conn, "fifth")
        assert e.value.code == "TOO_MANY_CALLS"
        server.resume()
        assert await asyncio.gather(*held) == [f"held {i}" for i in range(4)]


@pytest.mark.asyncio
@bounded(30)
async def test_eight_calls_in_flight_when_asked_for(server: Server) -> None:
    options = server.pinned()
    options.max_calls_in_flight = 8
    async with blerpc.connect(server.url, options) as conn:
        # Eight held at once (the server paused), a ninth refused; the server holds four and
        # answers the rest BUSY, which the connection retries while it answers the others.
        server.stop()
        held = [asyncio.create_task(echo(conn, f"held {i}")) for i in range(8)]
        await asyncio.sleep(0.2)
        with pytest.raises(blerpc.BlerpcError.Call) as e:
            await echo(conn, "ninth")
        assert e.value.code == "TOO_MANY_CALLS"
        server.resume()
        assert await asyncio.gather(*held) == [f"held {i}" for i in range(8)]
    options.max_calls_in_flight = 9
    with pytest.raises(blerpc.BlerpcError.InvalidArgument):
        await blerpc.connect(server.url, options)


@pytest.mark.asyncio
@bounded(20)
async def test_info_reports_what_setup_established(server: Server) -> None:
    conn = await blerpc.connect(server.url, server.pinned())
    info = conn.info()
    assert info.encrypted
    assert info.peer_identity == server.key
    assert info.pinned is None  # a trusted key: nothing pinned
    assert info.peer_id == server.url  # the pins' default device name
    assert info.att_mtu >= 247
    assert info.large_messages and info.max_request_len and info.max_request_len > 65535
    assert not conn.is_closed()
    await conn.disconnect()
    assert conn.is_closed()
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await conn.call("echo", echo_request("late"))
    assert e.value.code == "CLOSED"


@pytest.mark.asyncio
@bounded(20)
async def test_websocket_link(servers) -> None:
    s = servers("--listen", "ws://127.0.0.1:0")
    assert s.url.startswith("ws://")
    async with blerpc.connect(s.url, s.pinned()) as conn:
        assert await echo(conn, "over ws") == "over ws"
        assert conn.info().encrypted


@pytest.mark.asyncio
@bounded(20)
async def test_a_finished_upload_refuses_more(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        upload = await conn.client_stream("counter_upload")
        await upload.send(counter_upload_request(0, 0))
        assert decode(await upload.finish()) == {1: 1}
        with pytest.raises(blerpc.BlerpcError.InvalidArgument) as e:
            await upload.send(counter_upload_request(1, 10))
        assert e.value.code == "INVALID_ARGUMENT"
        # An upload abandoned half-way is cancelled: the next stream can start.
        async with await conn.client_stream("counter_upload") as upload:
            await upload.send(counter_upload_request(0, 0))
            await upload.cancel()
        items = [b async for b in conn.server_stream("counter_stream", counter_stream_request(2))]
        assert len(items) == 2


@pytest.mark.asyncio
@bounded(20)
async def test_diagnostics_are_the_servers_own_counts(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        assert await echo(conn, "counted") == "counted"
        d = await conn.diagnostics()
        # The echo and this request, on this connection of the server's.
        assert d["calls"] >= 2, d
        assert d["connections"] >= 1, d
        assert d["att_mtu"] == conn.info().att_mtu, d
        assert d["conn_interval_us"]["unavailable"].startswith("not a BLE link"), d
        assert isinstance(d["uptime_ms"], int), d


@pytest.mark.asyncio
@bounded(30)
async def test_a_stream_both_ways_echoes_every_item_in_order_interleaved(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        items = [f"item {i}".encode() for i in range(200)]
        async with await conn.bidi_stream("chat") as chat:

            async def send() -> None:
                for item in items:
                    await chat.send(item)
                await chat.finish()

            sender = asyncio.create_task(send())
            echoed = [item async for item in chat]
            await sender
        assert echoed == items
        # Lock-step: each echo read before the next item goes (the peripheral answers while
        # this side's half is open).
        async with await conn.bidi_stream("chat") as chat:
            for i in range(20):
                await chat.send(f"step {i}".encode())
                assert await chat.__anext__() == f"step {i}".encode()
            await chat.finish()
            assert [item async for item in chat] == []
        # Left mid-way: cancelled both ways; the connection goes on, and so do streams.
        async with await conn.bidi_stream("chat") as chat:
            await chat.send(b"one")
            assert await chat.__anext__() == b"one"
        assert await echo(conn, "after") == "after"
        async with await conn.bidi_stream("chat") as chat:
            await chat.send(b"again")
            await chat.finish()
            assert [item async for item in chat] == [b"again"]
        # A send after cancel is refused with the core's code.
        chat = await conn.bidi_stream("chat")
        await chat.cancel()
        with pytest.raises(blerpc.BlerpcError) as e:
            await chat.send(b"late")
        assert e.value.code == "CANCELLED"
