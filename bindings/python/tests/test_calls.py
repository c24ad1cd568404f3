"""The reference's twelve functional tests through the binding, against a real `blerpc serve`,
with the demo service's messages (tests/demo_pb.py); streams both ways; what `info()` says."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Server, bounded
from demo_pb import (
    counter_stream_request,
    counter_upload_request,
    data_write_request,
    decode,
    echo_request,
    flash_read_request,
    int32,
)

import blerpc


def flash_byte(i: int) -> int:
    """The synthetic flash image of `blerpc serve`: byte i is (31 i + 7) mod 256."""
    return (31 * i + 7) % 256


def pinned(server: Server) -> blerpc.ConnectOptions:
    return blerpc.ConnectOptions(trust_key=server.key)


async def echo(conn: blerpc.Connection, message: str) -> str:
    reply = decode(await conn.call("echo", echo_request(message)))
    return bytes(reply.get(1, b"")).decode()


@pytest.mark.asyncio
@bounded(30)
async def test_the_twelve_functional_tests(server: Server) -> None:
    async with blerpc.connect(server.url, pinned(server)) as conn:
        # echo_basic, echo_empty, echo_max_length, multi_container_echo
        for message in ["hello", "", "A" * 256, "B" * 250]:
            assert await echo(conn, message) == message
        # flash_read_basic, flash_read_8kb
        for length in [16, 8192]:
            reply = decode(await conn.call("flash_read", flash_read_request(0, length)))
            assert reply[2] == bytes(flash_byte(i) for i in range(length))
        # data_write_basic, data_write_8kb
        for length in [1024, 8192]:
            data = bytes(i % 256 for i in range(length))
            reply = decode(await conn.call("data_write", data_write_request(data)))
            assert reply[1] == length
        # counter_stream, counter_stream_large
        for count in [5, 20]:
            items = [decode(b) async for b in conn.server_stream("counter_stream", counter_stream_request(count))]
            assert [(i.get(1, 0), int32(i.get(2, 0))) for i in items] == [(s, s * 10) for s in range(count)]
        # counter_upload, counter_upload_large
        for count in [5, 20]:
            upload = await conn.client_stream("counter_upload")
            for seq in range(count):
                await upload.send(counter_upload_request(seq, seq * 10))
            assert decode(await upload.finish()) == {1: count}


@pytest.mark.asyncio
@bounded(20)
async def test_a_flash_read_at_an_address_returns_that_part(server: Server) -> None:
    async with blerpc.connect(server.url, pinned(server)) as conn:
        reply = decode(await conn.call("flash_read", flash_read_request(1, 3), deadline_ms=2000))
        assert reply == {1: 1, 2: bytes([38, 69, 100])}


@pytest.mark.asyncio
@bounded(20)
async def test_calls_run_concurrently_on_one_connection(server: Server) -> None:
    async with blerpc.connect(server.url, pinned(server)) as conn:
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
@bounded(20)
async def test_info_reports_what_setup_established(server: Server) -> None:
    conn = await blerpc.connect(server.url, pinned(server))
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
    async with blerpc.connect(s.url, pinned(s)) as conn:
        assert await echo(conn, "over ws") == "over ws"
        assert conn.info().encrypted


@pytest.mark.asyncio
@bounded(20)
async def test_a_finished_upload_refuses_more(server: Server) -> None:
    async with blerpc.connect(server.url, pinned(server)) as conn:
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
