"""Deadlines, cancellation and a dying server: a call never hangs, and a cancelled call or
stream leaves the connection usable. The server is paused with SIGSTOP (it keeps its socket
and answers nothing) to hold a call in flight."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import Server, bounded
from demo_pb import counter_stream_request, decode, echo_request
from functional import echo

import blerpc


@pytest.mark.asyncio
@bounded(20)
async def test_a_deadline_that_passes_gives_timeout(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        server.stop()
        started = time.monotonic()
        with pytest.raises(blerpc.BlerpcError.Call) as e:
            await conn.call("echo", echo_request("late"), deadline_ms=300)
        elapsed = time.monotonic() - started
        assert e.value.code == "TIMEOUT"
        assert 0.25 <= elapsed < 2.0, elapsed
        server.resume()
        # The late answer is dropped; the connection goes on.
        assert await echo(conn, "after") == "after"


@pytest.mark.asyncio
@bounded(20)
async def test_cancelling_calls_mid_call_leaves_the_connection_usable(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        server.stop()
        # The four calls in flight the core allows, all cancelled.
        tasks = [asyncio.create_task(echo(conn, f"held {i}")) for i in range(4)]
        await asyncio.sleep(0.2)
        assert not any(t.done() for t in tasks)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with pytest.raises(asyncio.CancelledError):
                await t
        server.resume()
        # Every slot was released: four new calls at once answer.
        messages = [f"after {i}" for i in range(4)]
        assert await asyncio.gather(*(echo(conn, m) for m in messages)) == messages


@pytest.mark.asyncio
@bounded(20)
async def test_wait_for_around_a_call_cancels_it(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        server.stop()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(echo(conn, "held"), 0.2)
        server.resume()
        assert await echo(conn, "after") == "after"


@pytest.mark.asyncio
@bounded(20)
async def test_cancelling_a_task_mid_stream_leaves_the_connection_usable(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        got = []

        async def consume() -> None:
            # Fewer items than the stream's 1,024-item buffer, read slowly: 10 s in all.
            async with conn.server_stream("counter_stream", counter_stream_request(1_000)) as items:
                async for item in items:
                    got.append(decode(item))
                    await asyncio.sleep(0.01)

        task = asyncio.create_task(consume())
        while len(got) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert 3 <= len(got) < 1_000
        assert await echo(conn, "after") == "after"
        # The stream was cancelled in the core: a new one can start (else STREAM_ACTIVE).
        items = [decode(b) async for b in conn.server_stream("counter_stream", counter_stream_request(3))]
        assert [i.get(1, 0) for i in items] == [0, 1, 2]


@pytest.mark.asyncio
@bounded(20)
async def test_a_reader_that_falls_behind_slows_the_stream(server: Server) -> None:
    # The streams extension: the peripheral sends only what the reader has room for, so a
    # reader that stops for 2 s loses nothing and overflows nothing.
    async with blerpc.connect(server.url, server.pinned()) as conn:
        stream = conn.server_stream("counter_stream", counter_stream_request(5_000))
        first = await stream.__anext__()
        assert decode(first) == {}  # seq 0, value 0: all defaults
        await asyncio.sleep(2)
        seqs = [decode(item).get(1, 0) async for item in stream]
        assert seqs == list(range(1, 5_000))
        assert await echo(conn, "after") == "after"


@pytest.mark.asyncio
@bounded(20)
async def test_a_server_killed_mid_call_fails_the_call_promptly(server: Server) -> None:
    conn = await blerpc.connect(server.url, server.pinned())
    server.stop()
    call = asyncio.create_task(echo(conn, "never answered"))
    await asyncio.sleep(0.2)
    assert not call.done()
    started = time.monotonic()
    server.kill()
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await asyncio.wait_for(call, 5)
    assert time.monotonic() - started < 2.0
    assert e.value.code in ("LINK_CLOSED", "LINK_FAILED"), e.value
    await asyncio.wait_for(conn.wait_closed(), 2)
    assert conn.is_closed()
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await asyncio.wait_for(echo(conn, "later"), 2)
    assert e.value.code == "CLOSED"


@pytest.mark.asyncio
@bounded(20)
async def test_a_server_killed_mid_stream_ends_the_stream_with_an_error(server: Server) -> None:
    conn = await blerpc.connect(server.url, server.pinned())
    stream = conn.server_stream("counter_stream", counter_stream_request(10_000))
    await stream.__anext__()
    server.kill()
    with pytest.raises(blerpc.BlerpcError) as e:
        async for _ in stream:
            pass
    assert e.value.code in ("LINK_CLOSED", "LINK_FAILED", "STREAM_OVERFLOW"), e.value
