#!/usr/bin/env python3
"""Generate the large-message extension vectors (testdata/vectors/large_messages.json).

The reference (blerpc-protocol 0.8.0) has no large-message extension, so these bytes cannot come
from it. They are built here, independently of the Rust code, from the byte layout documented in
docs/protocol.md ("Large messages"):

    CAPABILITIES request   the classic 6 bytes, flags bit 1 (0x0002) set
    CAPABILITIES reply     [max_request u16][max_response u16][flags u16 | 0x0002]
                           [max_request u32][max_response u32]                 (14 bytes, LE)
    LARGE FIRST container  [tid][seq 0][flags 0x01][total_length u32][payload_len u8][payload]
                           (flags bit 1 is not reserved: it selects the u16 payload_len of the
                           long-container extension, see tools/vectors/long.py)
    SUBSEQUENT             unchanged; seq counts 1..255, 0, 1, ... (mod 256)
    command, data > 65535  [type | 0x01][name_len][name][data_len u32][data]

Splitting: eff = mtu - 3; a message that fits a classic transaction (<= 65,535 bytes and <= 256
containers) is split classically; otherwise the LARGE FIRST carries min(eff - 8, 255) bytes and
each SUBSEQUENT min(eff - 4, 255).

Only the standard library is used (and ext_common.py, the helpers shared with the other
extension generator), plus AES-GCM from ``cryptography`` (already in the vectors
venv) for the encrypted case (nonce = counter u32 LE || direction byte || 7 zero bytes, empty AAD,
frame = counter || ciphertext || tag).

Usage::

    python tools/vectors/large.py --out testdata/vectors   # write the file
    python tools/vectors/large.py --check                  # compare with the committed file
"""

from __future__ import annotations

import json
import struct
import sys

from ext_common import SESSION_KEY, caps_request, command, control, pattern, run, seal, sha

FILE = "large_messages.json"

LARGE_BIT = 0x0002
ENC_BIT = 0x0001
LARGE_FIRST_FLAG = 0x01
# Flags bit 1 on FIRST / SUBSEQUENT: the long-container extension's u16 payload_len (tools/vectors/long.py).
LONG_BIT = 0x02
SUBSEQUENT_FLAGS = 0x40
CAPS_FLAGS = 0xC0 | (0x4 << 2)  # 0xD0


# ----- layout -------------------------------------------------------------------------------------


def caps_reply(max_request: int, max_response: int, flags: int) -> bytes:
    return struct.pack(
        "<HHHII",
        min(max_request, 0xFFFF),
        min(max_response, 0xFFFF),
        flags | LARGE_BIT,
        max_request,
        max_response,
    )


def large_first(tid: int, total: int, chunk: bytes) -> bytes:
    return bytes([tid, 0, LARGE_FIRST_FLAG]) + struct.pack("<I", total) + bytes([len(chunk)]) + chunk


def classic_first(tid: int, total: int, chunk: bytes) -> bytes:
    return bytes([tid, 0, 0x00]) + struct.pack("<H", total) + bytes([len(chunk)]) + chunk


def subsequent(tid: int, seq: int, chunk: bytes) -> bytes:
    return bytes([tid, seq & 0xFF, SUBSEQUENT_FLAGS, len(chunk)]) + chunk


def split(tid: int, message: bytes, mtu: int) -> tuple[bool, list[bytes]]:
    eff = mtu - 3
    sub = min(eff - 4, 255)
    classic_first_cap = min(eff - 6, 255)
    classic_count = 1 + max(0, -(-(len(message) - classic_first_cap) // sub))
    large = len(message) > 0xFFFF or classic_count > 256
    first_cap = min(eff - 8, 255) if large else classic_first_cap
    out = []
    chunk, rest = message[:first_cap], message[first_cap:]
    out.append(large_first(tid, len(message), chunk) if large else classic_first(tid, len(message), chunk))
    seq = 1
    while rest:
        chunk, rest = rest[:sub], rest[sub:]
        out.append(subsequent(tid, seq, chunk))
        seq += 1
    return large, out


# ----- cases --------------------------------------------------------------------------------------


def control_cases() -> list[dict]:
    cases = [
        {
            "name": "caps_request_announce_tid1",
            "kind": "control",
            "direction": "c2p",
            "container_hex": control(1, CAPS_FLAGS, caps_request(LARGE_BIT)).hex(),
            "fields": {"max_request": 0, "max_response": 0, "flags": LARGE_BIT},
            "note": "a central announces the extension: flags bit 1, no extension bytes",
        },
        {
            "name": "caps_request_announce_c_central_tid0",
            "kind": "control",
            "direction": "c2p",
            "container_hex": control(0, CAPS_FLAGS, caps_request(LARGE_BIT)).hex(),
            "fields": {"max_request": 0, "max_response": 0, "flags": LARGE_BIT},
            "note": "announcing needs the 6-byte request even where the C central sends an empty one",
        },
    ]
    for name, tid, req, resp, flags in [
        ("caps_reply_16mib_encrypted_tid1", 1, 16 << 20, 16 << 20, ENC_BIT),
        ("caps_reply_1mib_16mib_plaintext_tid1", 1, 1 << 20, 16 << 20, 0),
        ("caps_reply_below_classic_tid0", 0, 40_000, 50_000, ENC_BIT),
        ("caps_reply_u32_max_tid9", 9, 0xFFFFFFFF, 0xFFFFFFFF, ENC_BIT),
    ]:
        cases.append(
            {
                "name": name,
                "kind": "control",
                "direction": "p2c",
                "container_hex": control(tid, CAPS_FLAGS, caps_reply(req, resp, flags)).hex(),
                "fields": {
                    "max_request": min(req, 0xFFFF),
                    "max_response": min(resp, 0xFFFF),
                    "flags": flags | LARGE_BIT,
                    "large_max_request": req,
                    "large_max_response": resp,
                },
            }
        )
    full = caps_reply(16 << 20, 16 << 20, ENC_BIT)
    for keep, field, offset in [(6, "max_request_ext", 6), (9, "max_request_ext", 6), (13, "max_response_ext", 10)]:
        cases.append(
            {
                "name": f"caps_reply_extension_truncated_to_{keep}",
                "kind": "control_invalid",
                "direction": "p2c",
                "container_hex": control(1, CAPS_FLAGS, full[:keep]).hex(),
                "error": {"kind": "truncated", "field": field, "offset": offset},
                "note": "the LARGE_MESSAGES bit promises 14 bytes: a shorter reply is malformed",
            }
        )
    return cases


def container_cases() -> list[dict]:
    cases = []
    for name, tid, total, payload in [
        ("large_first_65536_tid2a", 0x2A, 65_536, bytes.fromhex("aabbcc")),
        ("large_first_16mib_empty_tid07", 0x07, 16 << 20, b""),
        ("large_first_u32_max_mtu247_tidff", 0xFF, 0xFFFFFFFF, pattern(236, 31, 7)),
        ("large_first_255_byte_chunk_tid00", 0x00, 1 << 20, pattern(255, 3, 1)),
    ]:
        cases.append(
            {
                "name": name,
                "kind": "container",
                "hex": large_first(tid, total, payload).hex(),
                "fields": {"tid": tid, "seq": 0, "total_length": total, "payload_len": len(payload)},
            }
        )
    cases.append(
        {
            "name": "large_first_bit0_alone_selects_large",
            "kind": "container",
            "hex": large_first(0x11, 70_000, b"xy").hex(),
            "fields": {"tid": 0x11, "seq": 0, "total_length": 70_000, "payload_len": 2},
            "note": "flags 0x01: bit 0 alone selects LARGE FIRST, with a u8 payload_len; bit 1 is not "
            "reserved (it marks the LONG form of the long-container extension, long_containers.json)",
        }
    )
    # The same bytes with flags 0x03 are a LONG LARGE FIRST: payload_len is the u16 at 7..9
    # (02 78 = 30,722 bytes), of which one is present.
    as_long = bytearray(large_first(0x11, 70_000, b"xy"))
    as_long[2] = LARGE_FIRST_FLAG | LONG_BIT
    cases.append(
        {
            "name": "large_first_bit1_reads_u16_payload_len",
            "kind": "container_invalid",
            "hex": bytes(as_long).hex(),
            "error": {"kind": "truncated", "field": "payload", "offset": 9},
            "note": "flags 0x03 is LONG LARGE FIRST: bytes 7..9 are a u16 payload_len (30,722), so this "
            "container is truncated; bit 1 is never an ignored reserved bit on FIRST",
        }
    )
    whole = large_first(0x2A, 65_536, bytes.fromhex("aabbcc"))
    for cut, field, offset in [(3, "total_length", 3), (6, "total_length", 3), (7, "payload_len", 7), (10, "payload", 8)]:
        cases.append(
            {
                "name": f"large_first_truncated_to_{cut}",
                "kind": "container_invalid",
                "hex": whole[:cut].hex(),
                "error": {"kind": "truncated", "field": field, "offset": offset},
            }
        )
    return cases


def command_cases() -> list[dict]:
    cases = []
    for name, response, cmd_name, n in [
        ("command_request_echo_65536", False, b"echo", 65_536),
        ("command_response_e_70000", True, b"e", 70_000),
        ("command_request_echo_65535_stays_classic", False, b"echo", 65_535),
    ]:
        data = pattern(n, 7, 0)
        packet = command(response, cmd_name, data)
        header_len = len(packet) - n
        cases.append(
            {
                "name": name,
                "kind": "command",
                "type": "RESPONSE" if response else "REQUEST",
                "cmd_name": cmd_name.decode(),
                "data": {"len": n, "pattern": "i * 7 mod 256"},
                "header_hex": packet[:header_len].hex(),
                "packet_len": len(packet),
                "packet_sha256": sha(packet),
            }
        )
    for name, hexs, field, kind, offset in [
        ("command_non_canonical_extended_header", "01046563686fffff0000", "data_len", "invalid", 6),
        ("command_extended_data_len_truncated", "01046563686f000001", "data_len", "truncated", 6),
        ("command_extended_data_truncated", "01046563686f00000100aabb", "data", "truncated", 10),
    ]:
        cases.append(
            {
                "name": name,
                "kind": "command_invalid",
                "hex": hexs,
                "error": {"kind": kind, "field": field, "offset": offset},
            }
        )
    return cases


def split_case(name: str, tid: int, message: bytes, mtu: int, payload_desc: dict, extra: dict | None = None) -> dict:
    large, containers = split(tid, message, mtu)
    case = {
        "name": name,
        "kind": "split",
        "tid": tid,
        "mtu": mtu,
        "payload": payload_desc,
        "large": large,
        "container_count": len(containers),
        "first_hex": containers[0].hex(),
        "second_hex": containers[1].hex() if len(containers) > 1 else None,
        "last_hex": containers[-1].hex(),
        "headers_at": {str(i): containers[i][:4].hex() for i in (255, 256, 257, 511, 512) if i < len(containers)},
        "containers_sha256": sha(b"".join(containers)),
        "max_container_len": max(len(c) for c in containers),
    }
    if extra:
        case.update(extra)
    return case


def split_cases() -> list[dict]:
    cases = []
    for name, tid, n, mtu in [
        ("split_70000_mtu23", 0x2A, 70_000, 23),
        ("split_65536_mtu247", 0x04, 65_536, 247),
        ("split_61439_mtu247_one_above_classic", 0x05, 61_439, 247),
        ("split_61438_mtu247_classic", 0x06, 61_438, 247),
        ("split_1mib_mtu512", 0x09, 1 << 20, 512),
        ("split_300000_mtu21_smallest_negotiable", 0x0A, 300_000, 21),
    ]:
        cases.append(split_case(name, tid, pattern(n, 31, 7), mtu, {"len": n, "pattern": "(i * 31 + 7) mod 256"}))
    # An encrypted 64 KiB echo request (counter 5, central -> peripheral) under the KX session key.
    plaintext = command(False, b"echo", pattern(65_536, 7, 0))
    frame = seal(SESSION_KEY, 5, 0x00, plaintext)
    cases.append(
        split_case(
            "split_encrypted_echo_65536_mtu247",
            0x04,
            frame,
            247,
            {"len": len(frame), "pattern": "seal(command_request_echo_65536)"},
            {
                "session_key": SESSION_KEY.hex(),
                "counter": 5,
                "direction": "c2p",
                "plaintext_sha256": sha(plaintext),
                "frame_sha256": sha(frame),
                "frame_tag_hex": frame[-16:].hex(),
            },
        )
    )
    return cases


def document() -> dict:
    return {
        "family": "large_messages",
        "schema_version": 1,
        "generator": "tools/vectors/large.py",
        "layout": "docs/protocol.md#large-messages",
        "reference": None,
        "note": "blerpc-rs extension; the reference cannot produce these bytes. Built from the documented layout, not from the Rust code.",
        "cases": control_cases() + container_cases() + command_cases() + split_cases(),
    }


def render() -> str:
    return json.dumps(document(), indent=1) + "\n"


if __name__ == "__main__":
    sys.exit(run(__doc__, FILE, "tools/vectors/large.py", render))
