#!/usr/bin/env python3
"""Generate the long-container extension vectors (testdata/vectors/long_containers.json).

The reference (blerpc-protocol 0.8.0) has no long-container extension, so these bytes cannot come
from it. They are built here, independently of the Rust code, from the byte layout of the
extension (CAPABILITIES flags bit 2, LONG_CONTAINERS; docs/protocol.md, "Long containers"):

    LONG FIRST        [tid][seq 0][flags 0x02][total_length u16][payload_len u16][payload]   header 7
    LONG LARGE FIRST  [tid][seq 0][flags 0x03][total_length u32][payload_len u16][payload]   header 9
    LONG SUBSEQUENT   [tid][seq n][flags 0x42][payload_len u16][payload]                     header 5
                                                                             (all integers LE)

    flags bit 1 (0x02) on FIRST / LARGE FIRST / SUBSEQUENT: payload_len is a u16. The LONG form is
    used exactly when the payload is longer than 255 bytes; a LONG header announcing 255 or fewer
    is not canonical and is rejected. CONTROL containers have no LONG form (bit 1 is ignored).
    A container is at most 16,384 bytes, header included.

    CAPABILITIES request   [max_request u16 = 0][max_response u16 = 0][flags u16 = 0x0004]
                           (0x0006 with the large-message extension announced too)
    CAPABILITIES reply     the classic 6 bytes, or the 14-byte large-message reply, bit 2 set

Splitting with the extension in force ignores the ATT MTU: the FIRST chunk is 16,384 - 7 = 16,377
bytes, each SUBSEQUENT 16,384 - 5 = 16,379; a chunk of 255 bytes or fewer keeps the classic header
(FIRST 6, SUBSEQUENT 4). A message of up to 65,535 bytes is one classic transaction (u16 total,
seq 0, 1, ...). With the large-message extension also in force, a longer message starts with a
LONG LARGE FIRST (chunk 16,375) and the SUBSEQUENT seq wraps mod 256; without it, such a message
is refused.

Only the standard library is used (and ext_common.py, the helpers shared with the other
extension generator), plus AES-GCM from ``cryptography`` (already in the vectors
venv) for the encrypted cases (nonce = counter u32 LE || direction byte || 7 zero bytes, empty
AAD, frame = counter || ciphertext || tag).

Usage::

    python tools/vectors/long.py --out testdata/vectors   # write the file
    python tools/vectors/long.py --check                  # compare with the committed file
"""

from __future__ import annotations

import json
import struct
import sys

from ext_common import SESSION_KEY, caps_request, command, control, pattern, run, seal, sha

FILE = "long_containers.json"

ENC_BIT = 0x0001
LARGE_BIT = 0x0002
LONG_BIT = 0x0004
TYPE_FIRST = 0x00
TYPE_SUBSEQUENT = 0x40
TYPE_CONTROL = 0xC0
LARGE_FLAG = 0x01
LONG_FLAG = 0x02
CAPS_FLAGS = TYPE_CONTROL | (0x4 << 2)  # 0xD0
ERROR_FLAGS = TYPE_CONTROL | (0x5 << 2)  # 0xD4
MAX_CHUNK = 255
MAX_CONTAINER = 16_384
MAX_CLASSIC_TOTAL = 0xFFFF
MAX_LARGE_TOTAL = 0xFFFFFFFF
HEADER = {  # (classic, LONG) header lengths
    "FIRST": (6, 7),
    "LARGE_FIRST": (8, 9),
    "SUBSEQUENT": (4, 5),
}
FIRST_CAP = MAX_CONTAINER - HEADER["FIRST"][1]  # 16,377
LARGE_FIRST_CAP = MAX_CONTAINER - HEADER["LARGE_FIRST"][1]  # 16,375
SUBSEQUENT_CAP = MAX_CONTAINER - HEADER["SUBSEQUENT"][1]  # 16,379
# Containers up to this many bytes are also recorded in full (hex).
FULL_HEX_MAX = 600


def pattern_desc(n: int, mul: int, add: int) -> dict:
    return {"len": n, "mul": mul, "add": add, "sha256": sha(pattern(n, mul, add))}


# ----- layout -------------------------------------------------------------------------------------


def header(kind: str, tid: int, seq: int, payload_len: int, total: int = 0) -> bytes:
    """The header of a FIRST / LARGE_FIRST / SUBSEQUENT container; LONG iff payload_len > 255."""
    long = payload_len > MAX_CHUNK
    flags = LONG_FLAG if long else 0
    length = struct.pack("<H", payload_len) if long else bytes([payload_len])
    if kind == "FIRST":
        return bytes([tid, 0, TYPE_FIRST | flags]) + struct.pack("<H", total) + length
    if kind == "LARGE_FIRST":
        return bytes([tid, 0, TYPE_FIRST | LARGE_FLAG | flags]) + struct.pack("<I", total) + length
    assert kind == "SUBSEQUENT"
    return bytes([tid, seq & 0xFF, TYPE_SUBSEQUENT | flags]) + length


def container(kind: str, tid: int, seq: int, payload: bytes, total: int = 0) -> bytes:
    head = header(kind, tid, seq, len(payload), total)
    assert len(head) == HEADER[kind][len(payload) > MAX_CHUNK]
    return head + payload


def caps_reply(max_request: int, max_response: int, flags: int, large: tuple[int, int] | None) -> bytes:
    if large is None:
        return struct.pack("<HHH", max_request, max_response, flags)
    return struct.pack("<HHHII", max_request, max_response, flags | LARGE_BIT, *large)


class Refused(Exception):
    def __init__(self, length: int, maximum: int):
        super().__init__(length, maximum)
        self.length = length
        self.maximum = maximum


def split_plan(n: int, large: bool) -> tuple[bool, list[int]]:
    """(LARGE FIRST?, chunk lengths) of an n-byte message with the extension in force."""
    if n <= MAX_CLASSIC_TOTAL:
        uses_large, first_cap = False, FIRST_CAP
    elif large and n <= MAX_LARGE_TOTAL:
        uses_large, first_cap = True, LARGE_FIRST_CAP
    else:
        raise Refused(n, MAX_LARGE_TOTAL if large else MAX_CLASSIC_TOTAL)
    chunks = [min(n, first_cap)]
    rest = n - chunks[0]
    while rest:
        chunks.append(min(rest, SUBSEQUENT_CAP))
        rest -= chunks[-1]
    # A classic transaction has seq 0..255 (it never gets near: 65,535 bytes take 5 containers).
    assert uses_large or len(chunks) <= 256
    return uses_large, chunks


def split(tid: int, message: bytes, large: bool) -> tuple[bool, list[bytes]]:
    uses_large, chunks = split_plan(len(message), large)
    out, offset = [], 0
    for i, n in enumerate(chunks):
        chunk = message[offset : offset + n]
        offset += n
        if i == 0:
            out.append(container("LARGE_FIRST" if uses_large else "FIRST", tid, 0, chunk, len(message)))
        else:
            out.append(container("SUBSEQUENT", tid, i, chunk))
    assert offset == len(message)
    for c in out:
        assert len(c) <= MAX_CONTAINER
    return uses_large, out


def header_len_of(c: bytes) -> int:
    """Header length of a container built above (from its flags byte)."""
    flags = c[2]
    kind = "SUBSEQUENT" if flags >> 6 == 1 else ("LARGE_FIRST" if flags & LARGE_FLAG else "FIRST")
    return HEADER[kind][bool(flags & LONG_FLAG)]


def container_desc(c: bytes, payload: dict) -> dict:
    """A container as header + payload pattern (and its full hex when short)."""
    h = header_len_of(c)
    desc = {"header_hex": c[:h].hex(), "payload": payload, "len": len(c), "sha256": sha(c)}
    if len(c) <= FULL_HEX_MAX:
        desc["hex"] = c.hex()
    return desc


# ----- cases --------------------------------------------------------------------------------------


def control_cases() -> list[dict]:
    cases = []
    for name, tid, flags, note in [
        ("caps_request_long_tid1", 1, LONG_BIT, "a central announces long containers: flags bit 2"),
        ("caps_request_long_and_large_tid1", 1, LONG_BIT | LARGE_BIT, "long containers and large messages"),
        ("caps_request_long_c_central_tid0", 0, LONG_BIT, "announcing needs the 6-byte request"),
    ]:
        cases.append(
            {
                "name": name,
                "kind": "control",
                "direction": "c2p",
                "container_hex": control(tid, CAPS_FLAGS, caps_request(flags)).hex(),
                "fields": {"max_request": 0, "max_response": 0, "flags": flags},
                "long": True,
                "note": note,
            }
        )
    for name, tid, req, resp, flags, large, note in [
        ("caps_reply_long_encrypted_tid1", 1, 0xFFFF, 0xFFFF, ENC_BIT | LONG_BIT, None, "6-byte reply, bit 2 added"),
        ("caps_reply_long_plaintext_tid1", 1, 0xFFFF, 0xFFFF, LONG_BIT, None, "6-byte reply, bit 2 alone"),
        ("caps_reply_long_nrf_limits_tid3", 3, 12_288, 0xFFFF, ENC_BIT | LONG_BIT, None, "the nRF limits with bit 2"),
        ("caps_reply_without_long_tid1", 1, 0xFFFF, 0xFFFF, ENC_BIT, None, "bit 2 clear: not in force"),
        (
            "caps_reply_long_and_large_16mib_tid1",
            1,
            0xFFFF,
            0xFFFF,
            ENC_BIT | LARGE_BIT | LONG_BIT,
            (16 << 20, 16 << 20),
            "the 14-byte large-message reply with bit 2 also set",
        ),
        (
            "caps_reply_long_and_large_plaintext_tid9",
            9,
            40_000,
            0xFFFF,
            LARGE_BIT | LONG_BIT,
            (40_000, 5_000_000),
            "the 14-byte reply, no encryption",
        ),
    ]:
        fields = {"max_request": req, "max_response": resp, "flags": flags | (LARGE_BIT if large else 0)}
        if large:
            fields["large_max_request"], fields["large_max_response"] = large
        cases.append(
            {
                "name": name,
                "kind": "control",
                "direction": "p2c",
                "container_hex": control(tid, CAPS_FLAGS, caps_reply(req, resp, flags, large)).hex(),
                "fields": fields,
                "long": bool(flags & LONG_BIT),
                "note": note,
            }
        )
    return cases


def single(name: str, kind: str, tid: int, seq: int, n: int, total: int = 0, note: str | None = None) -> dict:
    payload = pattern(n, 13, 5)
    c = container(kind, tid, seq, payload, total)
    case = {
        "name": name,
        "kind": "container",
        "fields": {
            "type": kind,
            "tid": tid,
            "seq": seq if kind == "SUBSEQUENT" else 0,
            "total_length": total,
            "payload_len": n,
        },
        "long": n > MAX_CHUNK,
        "header_len": HEADER[kind][n > MAX_CHUNK],
        "container": container_desc(c, pattern_desc(n, 13, 5)),
    }
    if note:
        case["note"] = note
    return case


def container_cases() -> list[dict]:
    cases = [
        single("long_first_256_tid07", "FIRST", 0x07, 0, 256, 1_000, "the shortest LONG FIRST"),
        single("long_first_16377_max_tid01", "FIRST", 0x01, 0, FIRST_CAP, 65_535, "16,384 bytes: the largest"),
        single("long_large_first_256_tid2a", "LARGE_FIRST", 0x2A, 0, 256, 100_000),
        single("long_large_first_16375_max_tidff", "LARGE_FIRST", 0xFF, 0, LARGE_FIRST_CAP, 5_000_000),
        single("long_subsequent_256_seq1_tid2a", "SUBSEQUENT", 0x2A, 1, 256),
        single("long_subsequent_16379_max_seqff_tid10", "SUBSEQUENT", 0x10, 0xFF, SUBSEQUENT_CAP),
        single("long_subsequent_1000_seq0_tid03", "SUBSEQUENT", 0x03, 0, 1_000, note="seq 0: after a wrap"),
        single("first_255_stays_classic_tid05", "FIRST", 0x05, 0, 255, 300, "255 bytes or fewer: the classic header"),
        single("subsequent_255_stays_classic_tid05", "SUBSEQUENT", 0x05, 1, 255),
        single("large_first_255_stays_classic_tid05", "LARGE_FIRST", 0x05, 0, 255, 70_000),
    ]
    # Bytes after payload_len are ignored, as for classic containers.
    c = container("SUBSEQUENT", 0x2A, 2, pattern(300, 13, 5)) + b"\xee\xee"
    cases.append(
        {
            "name": "long_subsequent_trailing_bytes_ignored",
            "kind": "container",
            "fields": {"type": "SUBSEQUENT", "tid": 0x2A, "seq": 2, "total_length": 0, "payload_len": 300},
            "long": True,
            "header_len": 5,
            "container": {
                "header_hex": c[:5].hex(),
                "payload": pattern_desc(300, 13, 5),
                "trailer_hex": "eeee",
                "len": len(c),
                "sha256": sha(c),
            },
            "emit_hex": c[:-2].hex(),
        }
    )
    # CONTROL has no LONG form: bit 1 is reserved there, ignored on parse and emitted as 0.
    for name, tid, flags, payload, cmd in [
        ("control_error_bit1_ignored", 0x05, ERROR_FLAGS | LONG_FLAG, b"\x02", "ERROR"),
        ("control_caps_bit1_ignored", 0x01, CAPS_FLAGS | LONG_FLAG, caps_request(LONG_BIT), "CAPABILITIES"),
    ]:
        cases.append(
            {
                "name": name,
                "kind": "control_container",
                "hex": control(tid, flags, payload).hex(),
                "fields": {"tid": tid, "control_cmd": cmd, "payload_hex": payload.hex()},
                "emit_hex": control(tid, flags & ~LONG_FLAG, payload).hex(),
                "note": "bit 1 is reserved on CONTROL: the 1-byte payload_len stays",
            }
        )
    return cases


def invalid_cases() -> list[dict]:
    cases = []

    def invalid(name: str, data: bytes, error: dict, note: str | None = None) -> None:
        case = {"name": name, "kind": "container_invalid", "hex": data.hex(), "error": error}
        if note:
            case["note"] = note
        cases.append(case)

    # Non-canonical: a LONG header announcing 255 bytes or fewer (the bytes are present).
    for name, prefix, offset, n in [
        ("long_subsequent_announces_255", bytes([0x2A, 0x01, 0x42]), 3, 255),
        ("long_subsequent_announces_0", bytes([0x2A, 0x01, 0x42]), 3, 0),
        ("long_first_announces_0", bytes([0x07, 0x00, 0x02, 0x00, 0x00]), 5, 0),
        ("long_first_announces_255", bytes([0x07, 0x00, 0x02, 0xFF, 0x00]), 5, 255),
        ("long_large_first_announces_255", bytes([0x07, 0x00, 0x03, 0x70, 0x11, 0x01, 0x00]), 7, 255),
        ("long_large_first_announces_1", bytes([0x07, 0x00, 0x03, 0x70, 0x11, 0x01, 0x00]), 7, 1),
    ]:
        invalid(
            name,
            prefix + struct.pack("<H", n) + pattern(n, 13, 5),
            {"kind": "invalid", "field": "payload_len", "offset": offset, "value": n},
            "payloads of 255 bytes or fewer use the 1-byte length: one encoding per container",
        )
    # Half a u16 length.
    for name, data, offset in [
        ("long_subsequent_payload_len_truncated", bytes([0x2A, 0x01, 0x42, 0x00]), 3),
        ("long_first_payload_len_truncated", bytes([0x07, 0x00, 0x02, 0xE8, 0x03, 0x2C]), 5),
        ("long_large_first_payload_len_truncated", bytes([0x07, 0x00, 0x03, 0xA0, 0x86, 0x01, 0x00, 0x00]), 7),
    ]:
        error = {"kind": "truncated", "field": "payload_len", "offset": offset, "needed": 2, "available": 1}
        invalid(name, data, error)
    # A payload shorter than announced.
    for name, kind, total, n, keep in [
        ("long_first_payload_short", "FIRST", 1_000, 300, 299),
        ("long_large_first_payload_short", "LARGE_FIRST", 100_000, 16_375, 10),
        ("long_subsequent_payload_short", "SUBSEQUENT", 0, 256, 1),
    ]:
        whole = container(kind, 0x2A, 1, pattern(n, 13, 5), total)
        h = HEADER[kind][1]
        error = {"kind": "truncated", "field": "payload", "offset": h, "needed": n, "available": keep}
        invalid(name, whole[: h + keep], error)
    # The classic reading of a LONG header would take the u16's low byte as the length: 0x2c here.
    invalid(
        "long_first_300_cut_to_classic_length",
        container("FIRST", 0x07, 0, pattern(300, 13, 5), 1_000)[: 6 + 0x2C],
        {"kind": "truncated", "field": "payload", "offset": 7, "needed": 300, "available": 0x2C - 1},
        "read as LONG (bit 1), never as a classic FIRST with payload_len 0x2c",
    )
    return cases


def assemble_case(
    name: str, config: dict, containers: list[tuple[bytes, dict]], results: list[dict], note: str
) -> dict:
    return {
        "name": name,
        "kind": "assemble",
        "config": config,
        "containers": [container_desc(c, p) for c, p in containers],
        "results": results,
        "note": note,
    }


def assemble_cases() -> list[dict]:
    def piece(kind: str, tid: int, seq: int, n: int, total: int = 0, add: int = 0) -> tuple[bytes, dict]:
        return container(kind, tid, seq, pattern(n, 17, add), total), pattern_desc(n, 17, add)

    without = {"long_containers": False, "large_messages": False, "max_message_len": 65_535}
    with_long = {"long_containers": True, "large_messages": False, "max_message_len": 65_535}
    both = {"long_containers": True, "large_messages": True, "max_message_len": 1 << 20}

    def complete(n: int, data: bytes) -> dict:
        return {"result": "complete", "len": n, "sha256": sha(data)}

    def too_long(tid: int, n: int, mx: int) -> dict:
        return {"result": "error", "error": "ContainerTooLong", "tid": tid, "payload_len": n, "max": mx}

    pending = {"result": "pending"}
    # First chunk pattern(n, 17, 0), second chunk pattern(m, 17, 17 * n mod 256): together
    # pattern(n + m, 17, 0).
    cases = [
        assemble_case(
            "long_first_without_extension",
            without,
            [piece("FIRST", 0x07, 0, 256, 256)],
            [too_long(0x07, 256, MAX_CHUNK)],
            "a LONG container while the extension is not in force: refused, never misread",
        ),
        assemble_case(
            "long_subsequent_without_extension_drops_transaction",
            without,
            [
                piece("FIRST", 0x07, 0, 255, 1_000),
                piece("SUBSEQUENT", 0x07, 1, 256, add=17 * 255 % 256),
                piece("SUBSEQUENT", 0x07, 2, 255),
            ],
            [
                pending,
                too_long(0x07, 256, MAX_CHUNK),
                {"result": "error", "error": "UnknownTransaction", "tid": 0x07, "seq": 2},
            ],
            "the refused SUBSEQUENT drops its transaction: the next one has nothing to continue",
        ),
        assemble_case(
            "long_first_max_with_extension",
            with_long,
            [piece("FIRST", 0x01, 0, FIRST_CAP, FIRST_CAP)],
            [complete(FIRST_CAP, pattern(FIRST_CAP, 17, 0))],
            "exactly 16,384 bytes: accepted",
        ),
        assemble_case(
            "long_first_then_long_subsequent",
            with_long,
            [piece("FIRST", 0x01, 0, 300, 600), piece("SUBSEQUENT", 0x01, 1, 300, add=17 * 300 % 256)],
            [pending, complete(600, pattern(600, 17, 0))],
            "two LONG containers make one message",
        ),
        assemble_case(
            "long_first_over_max",
            with_long,
            [piece("FIRST", 0x02, 0, FIRST_CAP + 1, 20_000)],
            [too_long(0x02, FIRST_CAP + 1, FIRST_CAP)],
            "16,385 bytes: max = 16,384 - 7",
        ),
        assemble_case(
            "long_subsequent_over_max",
            with_long,
            [
                piece("FIRST", 0x02, 0, FIRST_CAP, 40_000),
                piece("SUBSEQUENT", 0x02, 1, SUBSEQUENT_CAP + 1, add=17 * FIRST_CAP % 256),
            ],
            [pending, too_long(0x02, SUBSEQUENT_CAP + 1, SUBSEQUENT_CAP)],
            "16,385 bytes: max = 16,384 - 5",
        ),
        assemble_case(
            "long_large_first_over_max",
            both,
            [piece("LARGE_FIRST", 0x03, 0, LARGE_FIRST_CAP + 1, 100_000)],
            [too_long(0x03, LARGE_FIRST_CAP + 1, LARGE_FIRST_CAP)],
            "16,385 bytes: max = 16,384 - 9",
        ),
        assemble_case(
            "long_large_first_without_large_messages",
            with_long,
            [piece("LARGE_FIRST", 0x04, 0, 256, 100_000)],
            [{"result": "error", "error": "LargeNotNegotiated", "tid": 0x04, "total_length": 100_000}],
            "long containers alone do not admit a LARGE FIRST",
        ),
    ]
    return cases


def split_case(
    name: str,
    tid: int,
    n: int,
    large: bool,
    note: str | None = None,
    message: bytes | None = None,
    payload: dict | None = None,
    extra: dict | None = None,
) -> dict:
    case = {"name": name, "kind": "split", "tid": tid, "large_messages": large}
    if message is None and ((n > MAX_CLASSIC_TOTAL and not large) or n > MAX_LARGE_TOTAL):
        # Refused before any byte is looked at: only the length matters.
        try:
            split_plan(n, large)
        except Refused as r:
            case["payload"] = {"len": n}
            case["error"] = {"kind": "MessageTooLarge", "len": r.length, "max": r.maximum}
        else:
            raise AssertionError(name)
    else:
        if message is None:
            message = pattern(n, 31, 7)
            payload = pattern_desc(n, 31, 7)
        uses_large, containers = split(tid, message, large)
        case["payload"] = payload
        case["large_first"] = uses_large
        case["container_count"] = len(containers)
        case["container_lens"] = [len(c) for c in containers]
        case["headers"] = [c[: header_len_of(c)].hex() for c in containers]
        case["containers_sha256"] = sha(b"".join(containers))
        if sum(len(c) for c in containers) <= FULL_HEX_MAX:
            case["containers"] = [c.hex() for c in containers]
    if note:
        case["note"] = note
    if extra:
        case.update(extra)
    return case


def split_cases() -> list[dict]:
    cases = [
        split_case("split_0", 0x07, 0, False, "an empty message: one classic FIRST"),
        split_case("split_1", 0x07, 1, False),
        split_case("split_255", 0x07, 255, False, "255 bytes: one classic FIRST"),
        split_case("split_256", 0x07, 256, False, "256 bytes: one LONG FIRST"),
        split_case("split_16377", 0x08, FIRST_CAP, False, "one full 16,384-byte LONG FIRST"),
        split_case("split_16378", 0x08, FIRST_CAP + 1, False, "the last byte in a classic SUBSEQUENT"),
        split_case("split_16632_last_chunk_255", 0x08, FIRST_CAP + 255, False, "last chunk 255: classic header"),
        split_case("split_16633_last_chunk_256", 0x08, FIRST_CAP + 256, False, "last chunk 256: LONG header"),
        split_case("split_32756_two_full", 0x09, FIRST_CAP + SUBSEQUENT_CAP, False),
        split_case("split_60000", 0x0A, 60_000, False),
        split_case("split_65535_classic_total", 0x0B, 65_535, False, "the largest classic transaction: 5 containers"),
        split_case("split_65535_large_stays_classic", 0x0B, 65_535, True, "65,535 bytes stay classic"),
        split_case("split_300_large_stays_classic", 0x0C, 300, True),
        split_case("split_65536_refused_without_large", 0x0D, 65_536, False, "> 65,535 bytes needs large messages"),
        split_case("split_65536_large", 0x0D, 65_536, True, "LONG LARGE FIRST, chunk 16,375"),
        split_case("split_100000_large", 0x0E, 100_000, True),
        split_case("split_5000000_large_seq_wraps", 0x0F, 5_000_000, True, "306 containers, seq ..., 255, 0, 1, ..."),
        split_case("split_u32_max_plus1_refused", 0x10, MAX_LARGE_TOTAL + 1, True, "above the u32 total_length"),
    ]
    # Encrypted echo requests (central -> peripheral) under the KX session key, split into long
    # containers: a 60,000-byte data field (classic command, classic total) and a 100,000-byte one
    # (extended command, LARGE FIRST).
    for name, n, counter, large in [
        ("split_encrypted_echo_60000", 60_000, 5, False),
        ("split_encrypted_echo_100000_large", 100_000, 6, True),
    ]:
        plaintext = command(False, b"echo", pattern(n, 7, 0))
        frame = seal(SESSION_KEY, counter, 0x00, plaintext)
        cases.append(
            split_case(
                name,
                0x04,
                len(frame),
                large,
                message=frame,
                payload={"len": len(frame), "sha256": sha(frame), "sealed": True},
                extra={
                    "encrypted": {
                        "session_key": SESSION_KEY.hex(),
                        "counter": counter,
                        "direction": "c2p",
                        "cmd_type": "REQUEST",
                        "cmd_name": "echo",
                        "data": pattern_desc(n, 7, 0),
                        "plaintext_len": len(plaintext),
                        "plaintext_sha256": sha(plaintext),
                        "frame_tag_hex": frame[-16:].hex(),
                    }
                },
            )
        )
    return cases


def document() -> dict:
    return {
        "family": "long_containers",
        "schema_version": 1,
        "generator": "tools/vectors/long.py",
        "layout": "docs/protocol.md#long-containers-blerpc-rs-extension-negotiated",
        "reference": None,
        "note": "blerpc-rs extension; the reference cannot produce these bytes. "
        "Built from the documented layout, not from the Rust code.",
        "constants": {
            "max_container_len": MAX_CONTAINER,
            "first_chunk": FIRST_CAP,
            "large_first_chunk": LARGE_FIRST_CAP,
            "subsequent_chunk": SUBSEQUENT_CAP,
            "capability_flag": LONG_BIT,
        },
        "cases": control_cases() + container_cases() + invalid_cases() + assemble_cases() + split_cases(),
    }


def render() -> str:
    doc = document()
    names = [c["name"] for c in doc["cases"]]
    assert len(names) == len(set(names)), "duplicate case names"
    return json.dumps(doc, indent=1) + "\n"


if __name__ == "__main__":
    sys.exit(run(__doc__, FILE, "tools/vectors/long.py", render))
