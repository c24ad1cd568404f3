"""The demo service's messages (proto/blerpc.proto) as protobuf bytes, with the hand-written
proto3 helpers the interop and Bumble tests already use (tools/interop/refnet.py).

An app would use its protobuf runtime's generated classes instead
(``EchoRequest(message=...).SerializeToString()``); the project venv has no ``protobuf``
package, so these few messages are written out by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools" / "interop"))

from refnet import int32, pb_bytes, pb_decode, pb_uint  # noqa: E402

__all__ = ["decode", "int32"]

decode = pb_decode


def echo_request(message: str) -> bytes:
    return pb_bytes(1, message.encode())


def flash_read_request(address: int, length: int) -> bytes:
    return pb_uint(1, address) + pb_uint(2, length)


def data_write_request(data: bytes) -> bytes:
    return pb_bytes(1, data)


def counter_stream_request(count: int) -> bytes:
    return pb_uint(1, count)


def counter_upload_request(seq: int, value: int) -> bytes:
    return pb_uint(1, seq) + pb_uint(2, value)


def test_the_messages_are_protobuf_bytes() -> None:
    # What protobuf writes for these messages.
    assert echo_request("hi") == b"\x0a\x02hi"
    assert echo_request("") == b""
    assert flash_read_request(1, 300) == b"\x08\x01\x10\xac\x02"
    assert counter_upload_request(0, -10) == b"\x10\xf6" + b"\xff" * 8 + b"\x01"
    assert decode(b"\x08\x96\x01\x12\x03abc") == {1: 150, 2: b"abc"}
    assert int32(decode(counter_upload_request(0, -10))[2]) == -10
