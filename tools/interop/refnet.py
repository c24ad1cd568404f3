"""TCP transport and protobuf helpers for interop peers built on the reference bleRPC library
(blerpc-protocol 0.8.0 from PyPI).

bleRPC over TCP carries containers back to back with no extra framing: a container is
self-delimiting (FIRST: 6-byte header + payload_len; SUBSEQUENT / CONTROL: 4 + payload_len).
"""

from __future__ import annotations

import asyncio

from blerpc_protocol import Container

ATT_MTU = 247


async def read_container(reader: asyncio.StreamReader) -> Container:
    """Reads exactly one container from a TCP stream."""
    head = await reader.readexactly(4)
    ctype = head[2] >> 6
    if ctype == 0:  # FIRST: [tid][seq][flags][total u16][payload_len]
        head += await reader.readexactly(2)
        payload_len = head[5]
    else:
        payload_len = head[3]
    payload = await reader.readexactly(payload_len)
    return Container.deserialize(head + payload)


def write_containers(writer: asyncio.StreamWriter, containers) -> None:
    for c in containers:
        writer.write(c.serialize())


# ---- protobuf (proto3) helpers for the demo service (wire.md section 1.7) ----


def varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_uint(field: int, v: int) -> bytes:
    """A varint field; zero is omitted (proto3). Negative int32 values use 10 bytes."""
    if v == 0:
        return b""
    if v < 0:
        v += 1 << 64
    return varint(field << 3) + varint(v)


def pb_bytes(field: int, v: bytes) -> bytes:
    if not v:
        return b""
    return varint(field << 3 | 2) + varint(len(v)) + v


def pb_decode(buf: bytes) -> dict[int, int | bytes]:
    """Decodes varint and length-delimited fields (last one wins)."""
    out: dict[int, int | bytes] = {}
    pos = 0

    def rv() -> int:
        nonlocal pos
        shift = v = 0
        while True:
            b = buf[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    while pos < len(buf):
        key = rv()
        if key & 7 == 0:
            out[key >> 3] = rv()
        elif key & 7 == 2:
            n = rv()
            out[key >> 3] = buf[pos : pos + n]
            pos += n
        else:
            raise ValueError(f"unsupported wire type {key & 7}")
    return out


def int32(v: int) -> int:
    """A decoded varint as int32."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v
