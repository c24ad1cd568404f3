"""The reference's twelve functional tests (echo ×4, flash_read ×2, data_write ×2,
counter_stream ×2, counter_upload ×2) with their checks, through the binding: over TCP
(test_calls.py), over a GATT link the app provides (test_gatt.py, test_bumble.py)."""

from __future__ import annotations

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
    """The synthetic flash image of `blerpc serve` and the Linux firmware: byte i is
    (31 i + 7) mod 256."""
    return (31 * i + 7) % 256


async def echo(conn: blerpc.Connection, message: str) -> str:
    reply = decode(await conn.call("echo", echo_request(message)))
    return bytes(reply.get(1, b"")).decode()


async def the_twelve_functional_tests(conn: blerpc.Connection) -> None:
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
