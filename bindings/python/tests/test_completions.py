"""The completion queue under `Connection.call`: each event loop has its own, outcomes reach
the call that started them (however the calls of several connections interleave), errors keep
their type, and the answers are the ones UniFFI's own async method gives."""

from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest
from conftest import Server, bounded
from demo_pb import decode, echo_request
from functional import echo

import blerpc


@pytest.mark.asyncio
@bounded(20)
async def test_calls_take_the_queue_and_answer_as_uniffi_does(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        assert blerpc._Completions.of(asyncio.get_running_loop()) is not None
        request = echo_request("same")
        assert await conn.call("echo", request) == await conn._raw.call("echo", request, None)
        # A deadline that does not pass changes nothing.
        assert await conn.call("echo", request, deadline_ms=2_000) == await conn.call("echo", request)


@pytest.mark.asyncio
@bounded(20)
async def test_interleaved_calls_of_two_connections_get_their_own_answers(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as a, blerpc.connect(server.url, server.pinned()) as b:
        for round in range(10):
            names = [f"{c}{round}.{i}" for c in "ab" for i in range(4)]
            calls = [echo(a if n.startswith("a") else b, n) for n in names]
            assert await asyncio.gather(*calls) == names


@pytest.mark.asyncio
@bounded(20)
async def test_an_error_through_the_queue_keeps_its_type_and_code(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        with pytest.raises(blerpc.BlerpcError.Call) as e:
            await conn.call("no_such_command", b"")
        assert e.value.code == "PEER_ERROR" and e.value.peer_code == 0x03
        # (A fifth call at once refused with TOO_MANY_CALLS, through the queue too:
        # test_calls.py.)
        assert await echo(conn, "after") == "after"


@bounded(30)
async def _calls_on_a_loop_of_its_own(server: Server, message: str) -> str:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        assert blerpc._Completions.of(asyncio.get_running_loop()) is not None
        reply = decode(await conn.call("echo", echo_request(message)))
        return bytes(reply.get(1, b"")).decode()


def test_each_event_loop_has_its_own_queue(server: Server) -> None:
    # Loops one after another (UniFFI's connect keeps one loop per process at a time), the
    # second in another thread: each gets its own queue and its answers.
    assert asyncio.run(_calls_on_a_loop_of_its_own(server, "one")) == "one"
    answers: List[str] = []
    thread = threading.Thread(target=lambda: answers.append(asyncio.run(_calls_on_a_loop_of_its_own(server, "two"))))
    thread.start()
    thread.join(30)
    assert answers == ["two"]
