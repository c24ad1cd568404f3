"""The demo service's messages (proto/blerpc.proto), encoded and decoded by hand.

An app would use the protobuf runtime's generated classes (``EchoRequest(message=...)
.SerializeToString()``); the project venv has no ``protobuf`` package, so these few messages
are written out here: each is a list of (field number, value) with ints as varints (int32
negatives as 10-byte two's complement, as protobuf has it) and str/bytes length-delimited.
"""

from __future__ import annotations

from typing import Dict, List, Tuple, Union

Value = Union[int, str, bytes]


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode(fields: List[Tuple[int, Value]]) -> bytes:
    """Encodes fields in order; proto3 defaults (0, empty) are left out, as protobuf does."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, int):
            if value:
                out += _varint(number << 3) + _varint(value)
        else:
            data = value.encode() if isinstance(value, str) else value
            if data:
                out += _varint(number << 3 | 2) + _varint(len(data)) + data
    return bytes(out)


def decode(data: bytes) -> Dict[int, Value]:
    """Decodes varint and length-delimited fields into {field number: int or bytes}."""
    fields: Dict[int, Value] = {}
    i = 0

    def varint() -> int:
        nonlocal i
        n = shift = 0
        while True:
            byte = data[i]
            i += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return n

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields[number] = varint()
        elif wire == 2:
            length = varint()
            fields[number] = data[i : i + length]
            i += length
        else:
            raise ValueError(f"wire type {wire} of field {number}")
    return fields


def int32(n: int) -> int:
    """A decoded varint read as protobuf int32."""
    n &= (1 << 64) - 1
    return n - (1 << 64) if n >= 1 << 63 else n


# The demo messages' encoders: field numbers from proto/blerpc.proto.
def echo_request(message: str) -> bytes:
    return encode([(1, message)])


def flash_read_request(address: int, length: int) -> bytes:
    return encode([(1, address), (2, length)])


def data_write_request(data: bytes) -> bytes:
    return encode([(1, data)])


def counter_stream_request(count: int) -> bytes:
    return encode([(1, count)])


def counter_upload_request(seq: int, value: int) -> bytes:
    return encode([(1, seq), (2, value)])


def test_the_encoder_matches_protobuf_bytes() -> None:
    # Bytes protobuf writes for these messages (the wire format spec's examples and ours).
    assert echo_request("hi") == b"\x0a\x02hi"
    assert echo_request("") == b""
    assert flash_read_request(1, 300) == b"\x08\x01\x10\xac\x02"
    assert counter_upload_request(0, -10) == b"\x10" + b"\xf6" + b"\xff" * 8 + b"\x01"
    assert decode(b"\x08\x96\x01\x12\x03abc") == {1: 150, 2: b"abc"}
    assert int32(decode(counter_upload_request(0, -10))[2]) == -10
