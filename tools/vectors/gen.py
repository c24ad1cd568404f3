#!/usr/bin/env python3
"""Generate bleRPC wire vectors from the reference implementation.

The reference is the PyPI package ``blerpc-protocol`` (pinned in requirements.txt). Every byte in the
output comes from the reference's own objects (ContainerSplitter, ContainerAssembler, Container,
CommandPacket, CentralKeyExchange, PeripheralKeyExchange, BlerpcCryptoSession, make_* helpers). The
only things this script computes itself are

* inputs (payload patterns, hand-encoded protobuf messages, raw malformed frames),
* the C-style splitter that caps each chunk at 255 bytes (it slices the payload and serializes the
  chunks with the reference ``Container``), and
* the ``expect`` blocks, which state what blerpc-rs does (wire.md §5), not what the reference does.

Randomness is replaced by fixed values (``_FixedRandomness``): the library's ``os.urandom`` (the
key-confirmation nonces) and the X25519 / Ed25519 ``generate`` functions it calls. Any draw that a
scenario did not plan for raises, so a library change that adds a random source fails loudly.

Usage::

    python tools/vectors/gen.py --out testdata/vectors   # write the files
    python tools/vectors/gen.py --check                  # regenerate into a temp dir and compare

See tools/vectors/README.md for the JSON schema.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import hashlib
import importlib.metadata
import json
import os
import struct
import sys
import tempfile
from pathlib import Path

REFERENCE_PACKAGE = "blerpc-protocol"
REFERENCE_VERSION = "0.8.0"
CRYPTOGRAPHY_VERSION = "50.0.2"
GENERATOR = "tools/vectors/gen.py"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "testdata" / "vectors"


def _require_reference() -> None:
    try:
        version = importlib.metadata.version(REFERENCE_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"{REFERENCE_PACKAGE} is not installed: pip install -r tools/vectors/requirements.txt")
    if version != REFERENCE_VERSION:
        sys.exit(f"{REFERENCE_PACKAGE} {version} is installed, the vectors need {REFERENCE_VERSION}")
    crypto_version = importlib.metadata.version("cryptography")
    if crypto_version != CRYPTOGRAPHY_VERSION:
        # The primitives are deterministic, but exception messages could change; warn only.
        print(
            f"warning: cryptography {crypto_version} installed, requirements.txt pins "
            f"{CRYPTOGRAPHY_VERSION}",
            file=sys.stderr,
        )


_require_reference()

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey  # noqa: E402

import blerpc_protocol.crypto as ref_crypto  # noqa: E402
from blerpc_protocol import (  # noqa: E402
    BlerpcCrypto,
    BlerpcCryptoSession,
    CentralKeyExchange,
    CommandPacket,
    CommandType,
    Container,
    ContainerAssembler,
    ContainerSplitter,
    ContainerType,
    ControlCmd,
    PeripheralKeyExchange,
    make_capabilities_request,
    make_capabilities_response,
    make_error_response,
    make_key_exchange,
    make_stream_end_c2p,
    make_stream_end_p2c,
    make_timeout_request,
    make_timeout_response,
)

# --------------------------------------------------------------------------------------------------
# Fixed inputs (RFC 7748 §6.1 Alice/Bob, RFC 8032 §7.1 TEST 1)
# --------------------------------------------------------------------------------------------------

CENTRAL_X25519_PRIVATE = bytes.fromhex(
    "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
)
PERIPHERAL_X25519_PRIVATE = bytes.fromhex(
    "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"
)
IDENTITY_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
CENTRAL_CONFIRM_NONCE = bytes(range(0x00, 0x0C))
PERIPHERAL_CONFIRM_NONCE = bytes(range(0x0C, 0x18))

# --------------------------------------------------------------------------------------------------
# Randomness patch
# --------------------------------------------------------------------------------------------------


class _FixedRandomness:
    """Queues of fixed values served to the reference instead of real randomness."""

    def __init__(self) -> None:
        self.x25519: list[bytes] = []
        self.ed25519: list[bytes] = []
        self.urandom: list[bytes] = []

    def take(self, queue: list[bytes], what: str, size: int | None = None) -> bytes:
        if not queue:
            raise AssertionError(f"unplanned randomness draw: {what}")
        value = queue.pop(0)
        if size is not None and len(value) != size:
            raise AssertionError(f"{what}: planned {len(value)} bytes, library asked for {size}")
        return value

    @contextlib.contextmanager
    def fixed(self, x25519=(), ed25519=(), urandom=()):
        assert not (self.x25519 or self.ed25519 or self.urandom), "nested randomness scope"
        self.x25519, self.ed25519, self.urandom = list(x25519), list(ed25519), list(urandom)
        ok = False
        try:
            yield self
            ok = True
        finally:
            left = (len(self.x25519), len(self.ed25519), len(self.urandom))
            self.x25519, self.ed25519, self.urandom = [], [], []
            if ok and any(left):
                raise AssertionError(f"planned randomness not consumed (x25519, ed25519, urandom) = {left}")


RANDOM = _FixedRandomness()


class _FixedX25519PrivateKey:
    """Stands in for ``X25519PrivateKey`` inside blerpc_protocol.crypto."""

    @staticmethod
    def generate():
        return X25519PrivateKey.from_private_bytes(RANDOM.take(RANDOM.x25519, "X25519 generate"))

    from_private_bytes = staticmethod(X25519PrivateKey.from_private_bytes)


class _FixedEd25519PrivateKey:
    """Stands in for ``Ed25519PrivateKey`` inside blerpc_protocol.crypto."""

    @staticmethod
    def generate():
        return Ed25519PrivateKey.from_private_bytes(RANDOM.take(RANDOM.ed25519, "Ed25519 generate"))

    from_private_bytes = staticmethod(Ed25519PrivateKey.from_private_bytes)


class _FixedOs:
    """Stands in for the ``os`` module as seen by blerpc_protocol.crypto."""

    @staticmethod
    def urandom(n: int) -> bytes:
        return RANDOM.take(RANDOM.urandom, f"os.urandom({n})", n)

    def __getattr__(self, name):
        return getattr(os, name)


def _install_randomness_patch() -> None:
    # The library resolves these names in its module globals at call time.
    assert ref_crypto.os is os and ref_crypto.X25519PrivateKey is X25519PrivateKey
    assert ref_crypto.Ed25519PrivateKey is Ed25519PrivateKey
    ref_crypto.os = _FixedOs()
    ref_crypto.X25519PrivateKey = _FixedX25519PrivateKey
    ref_crypto.Ed25519PrivateKey = _FixedEd25519PrivateKey


_install_randomness_patch()

# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pattern_bytes(pattern: str, length: int) -> bytes:
    if pattern == "mod251":
        return bytes(i % 251 for i in range(length))
    if pattern == "mod256":
        return bytes(i % 256 for i in range(length))
    raise ValueError(pattern)


def payload_desc(data: bytes, pattern: str = "hex") -> dict:
    """Describe a payload: a recipe (mod251/mod256) or literal hex, always with len and sha256."""
    desc = {"pattern": pattern, "len": len(data), "sha256": sha256(data)}
    if pattern == "hex":
        desc["hex"] = data.hex()
    else:
        assert pattern_bytes(pattern, len(data)) == data
    return desc


def error_desc(exc: BaseException) -> dict:
    cls = type(exc)
    module = cls.__module__
    name = cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
    return {"type": name, "message": str(exc)}


def attempt(fn, *args, **kwargs):
    """Run fn; return ("ok", value) or ("error", error_desc)."""
    try:
        return "ok", fn(*args, **kwargs)
    except AssertionError:
        raise  # our own checks (e.g. an unplanned randomness draw), never a reference behaviour
    except Exception as exc:  # noqa: BLE001 - recording the reference's behaviour
        return "error", error_desc(exc)


def container_fields(c: Container) -> dict:
    """The reference's view of a parsed container."""
    return {
        "tid": c.transaction_id,
        "seq": c.sequence_number,
        "type": c.container_type.name,
        "control_cmd": c.control_cmd.name,
        "total_length": c.total_length,
        "payload_hex": bytes(c.payload).hex(),
    }


def tid_for(name: str) -> int:
    """A stable per-case tid, so inserting a case does not renumber the others."""
    return hashlib.sha256(name.encode()).digest()[0]


# Hand-written protobuf (proto3) encoding for the demo schema (wire.md §1.7).


def pb_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int32 negatives are sign-extended to 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def pb_uint(field: int, value: int) -> bytes:
    return b"" if value == 0 else pb_varint(field << 3) + pb_varint(value)


def pb_bytes(field: int, value: bytes) -> bytes:
    return b"" if not value else pb_varint(field << 3 | 2) + pb_varint(len(value)) + value


def pb_string(field: int, value: str) -> bytes:
    return pb_bytes(field, value.encode("utf-8"))


def ascii_name(length: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(letters[i % 26] for i in range(length))


def serialize_all(containers) -> list[str]:
    return [c.serialize().hex() for c in containers]


# --------------------------------------------------------------------------------------------------
# Shared fixtures: the demo commands and the key exchange
# --------------------------------------------------------------------------------------------------

FLASH_DATA = pattern_bytes("mod251", 8192)


def cmd(cmd_type: CommandType, name: str, data: bytes) -> bytes:
    return CommandPacket(cmd_type=cmd_type, cmd_name=name, data=data).serialize()


ECHO_HELLO_REQ = cmd(CommandType.REQUEST, "echo", pb_string(1, "hello"))
ECHO_HELLO_RESP = cmd(CommandType.RESPONSE, "echo", pb_string(1, "hello"))
ECHO_EMPTY_REQ = cmd(CommandType.REQUEST, "echo", b"")
FLASH_READ_RESP_8K = cmd(
    CommandType.RESPONSE, "flash_read", pb_uint(1, 0) + pb_bytes(2, FLASH_DATA)
)


def run_key_exchange() -> dict:
    """Run the reference central and peripheral against each other with fixed randomness."""
    identity = BlerpcCrypto.ed25519_private_from_bytes(IDENTITY_SEED)
    with RANDOM.fixed(
        x25519=[CENTRAL_X25519_PRIVATE, PERIPHERAL_X25519_PRIVATE],
        urandom=[CENTRAL_CONFIRM_NONCE, PERIPHERAL_CONFIRM_NONCE],
    ):
        central = CentralKeyExchange()
        peripheral = PeripheralKeyExchange(identity)
        step1 = central.start()
        step2, none_session = peripheral.handle_step(step1)
        assert none_session is None
        seen_keys = []
        step3 = central.process_step2(step2, verify_key_cb=lambda k: seen_keys.append(k) or True)
        step4, peripheral_session = peripheral.handle_step(step3)
        central_session = central.finish(step4)
    assert central._session_key == peripheral._session_key
    return {
        "identity": identity,
        "step1": step1,
        "step2": step2,
        "step3": step3,
        "step4": step4,
        "session_key": central._session_key,
        "central_session": central_session,
        "peripheral_session": peripheral_session,
        "verify_cb_key": seen_keys[0],
    }


KX = run_key_exchange()
SESSION_KEY = KX["session_key"]

# --------------------------------------------------------------------------------------------------
# 1. splits.json
# --------------------------------------------------------------------------------------------------

SPLIT_MTUS = [23, 27, 185, 247, 262, 263, 512]
CAP = 255  # payload_len is a u8


def chunk_caps(mtu: int, capped: bool) -> tuple[int, int]:
    eff = mtu - 3
    first, sub = eff - 6, eff - 4
    if capped:
        first, sub = min(first, CAP), min(sub, CAP)
    return first, sub


def capped_max(mtu: int) -> int:
    first, sub = chunk_caps(mtu, True)
    return min(65535, first + 255 * sub)


def split_boundaries(mtu: int) -> list[tuple[str, int]]:
    first, sub = chunk_caps(mtu, True)
    top = capped_max(mtu)
    items = [("empty", 0), ("one", 1)]
    items += [("first_minus1", first - 1), ("first_exact", first), ("first_plus1", first + 1)]
    for k in (1, 2):
        base = first + k * sub
        items += [
            (f"first_{k}sub_minus1", base - 1),
            (f"first_{k}sub_exact", base),
            (f"first_{k}sub_plus1", base + 1),
        ]
    items += [
        ("containers255_max", first + 254 * sub),
        ("containers256_min", first + 254 * sub + 1),
        ("max", top),
        ("max_plus1", top + 1),
    ]
    if mtu > 262:
        ref_first, _ = chunk_caps(mtu, False)
        items += [("ref_first_exact", ref_first), ("u16_max", 65535), ("u16_max_plus1", 65536)]
    seen, out = set(), []
    for label, length in items:
        if length not in seen and 0 <= length <= 65536:
            seen.add(length)
            out.append((label, length))
    return out


def reference_split(mtu: int, payload: bytes, tid: int) -> dict:
    status, value = attempt(ContainerSplitter(mtu).split, payload, transaction_id=tid)
    if status == "error":
        return {"error": dict(value, stage="split")}
    chunk_lens = [len(c.payload) for c in value]
    status, blobs = attempt(serialize_all, value)
    if status == "error":
        return {"error": dict(blobs, stage="serialize"), "chunk_lens": chunk_lens}
    if mtu >= 10:  # below that the reference misbehaves (see invalid.json split_mtu8_len10)
        for blob in blobs:
            assert len(blob) // 2 <= mtu - 3, "reference container exceeds the effective MTU"
    return {"chunk_lens": chunk_lens, "containers": blobs}


def capped_split(mtu: int, payload: bytes, tid: int) -> dict:
    """C-style splitter (chunks capped at 255), serialized by the reference Container."""
    first, sub = chunk_caps(mtu, True)
    chunks = [payload[:first]]
    offset = len(chunks[0])
    while offset < len(payload):
        chunks.append(payload[offset : offset + sub])
        offset += len(chunks[-1])
    if len(chunks) > 256 or len(payload) > 65535:
        return {"containers_needed": len(chunks)}
    containers = [
        Container(
            transaction_id=tid,
            sequence_number=0,
            container_type=ContainerType.FIRST,
            total_length=len(payload),
            payload=chunks[0],
        )
    ] + [
        Container(
            transaction_id=tid,
            sequence_number=seq,
            container_type=ContainerType.SUBSEQUENT,
            payload=chunk,
        )
        for seq, chunk in enumerate(chunks[1:], start=1)
    ]
    return {"chunk_lens": [len(c) for c in chunks], "containers": serialize_all(containers)}


def split_case(name, mtu, tid, payload, pattern, splitter, boundary) -> dict:
    outcome = (reference_split if splitter == "reference" else capped_split)(mtu, payload, tid)
    if len(payload) > capped_max(mtu):
        expect = {"error": "TooLong", "field": "payload", "max": capped_max(mtu)}
    elif splitter == "reference" and "containers" not in outcome:
        expect = {"see_case": name.replace("_reference", "_capped")}
    else:
        expect = {"match": True}
    if splitter == "reference" and mtu <= 262 and "containers" in outcome:
        # Below MTU 263 the cap never bites: the capped splitter must agree with the reference.
        assert capped_split(mtu, payload, tid) == outcome, name
    return {
        "name": name,
        "boundary": boundary,
        "mtu": mtu,
        "tid": tid,
        "payload": payload_desc(payload, pattern),
        "splitter": splitter,
        "capped": splitter == "capped",
        "outcome": outcome,
        "expect": expect,
    }


def gen_splits() -> list[dict]:
    cases = []
    # wire.md §6.3 and §6.4 first.
    echo_b30 = cmd(CommandType.REQUEST, "echo", pb_string(1, "B" * 30))
    cases.append(split_case("spec_6_3_mtu23_echo_b30_reference", 23, 0x2A, echo_b30, "hex", "reference", "spec"))
    cases.append(
        split_case("spec_6_4_mtu247_len500_reference", 247, 0x2A, pattern_bytes("mod256", 500), "mod256", "reference", "spec")
    )
    cases.append(split_case("spec_6_4_mtu247_empty_tid7_reference", 247, 7, b"", "mod251", "reference", "spec"))
    for mtu in (262, 263):
        for splitter in ("reference", "capped") if mtu > 262 else ("reference",):
            cases.append(
                split_case(
                    f"spec_6_6_mtu{mtu}_len600_{splitter}", mtu, 0x2A, pattern_bytes("mod251", 600), "mod251", splitter, "spec"
                )
            )
    for mtu in SPLIT_MTUS:
        splitters = ("reference", "capped") if mtu > 262 else ("reference",)
        for label, length in split_boundaries(mtu):
            payload = pattern_bytes("mod251", length)
            for splitter in splitters:
                base = f"mtu{mtu}_len{length}_{label}"
                cases.append(split_case(f"{base}_{splitter}", mtu, tid_for(base), payload, "mod251", splitter, label))
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names))
    for case in cases:
        if "see_case" in case["expect"]:
            assert case["expect"]["see_case"] in names, case["name"]
    return cases


# --------------------------------------------------------------------------------------------------
# 2. tid_wrap.json
# --------------------------------------------------------------------------------------------------


def op_split(splitter: ContainerSplitter, payload: bytes, pattern: str = "hex") -> dict:
    containers = splitter.split(payload)
    tids = {c.transaction_id for c in containers}
    assert len(tids) == 1
    return {
        "op": "split",
        "tid": containers[0].transaction_id,
        "payload": payload_desc(payload, pattern),
        "containers": serialize_all(containers),
    }


def gen_tid_wrap() -> list[dict]:
    cases = []
    splitter = ContainerSplitter(247)
    ops = [op_split(splitter, bytes([i & 0xFF])) for i in range(258)]
    assert [o["tid"] for o in ops[254:258]] == [254, 255, 0, 1]
    cases.append(
        {
            "name": "split_counter_wraps_255_to_0",
            "mtu": 247,
            "description": "258 consecutive split() calls on one fresh ContainerSplitter; call i carries the byte i & 0xff",
            "ops": ops,
            "expect": {"match": True},
        }
    )

    splitter = ContainerSplitter(247)
    ops = [{"op": "next_transaction_id", "tid": splitter.next_transaction_id()} for _ in range(254)]
    ops.append(op_split(splitter, pattern_bytes("mod256", 500), "mod256"))  # tid 254, 3 containers
    ops.append(op_split(splitter, b""))  # tid 255
    ops.append({"op": "next_transaction_id", "tid": splitter.next_transaction_id()})  # 0
    ops.append(op_split(splitter, b"hi"))  # tid 1
    assert [o["tid"] for o in ops[-4:]] == [254, 255, 0, 1]
    cases.append(
        {
            "name": "mixed_next_tid_and_split_wrap",
            "mtu": 247,
            "description": "next_transaction_id() and split() share one counter; a multi-container split consumes one tid",
            "ops": ops,
            "expect": {"match": True},
        }
    )
    return cases


# --------------------------------------------------------------------------------------------------
# 3. control.json
# --------------------------------------------------------------------------------------------------


def control_case(name, direction, message, fields, builder, blob, expect, emit=True) -> dict:
    parsed = Container.deserialize(blob)
    return {
        "name": name,
        "direction": direction,
        "message": message,
        "fields": fields,
        "builder": builder,
        "container_hex": blob.hex(),
        "parsed": container_fields(parsed),
        "emit": emit,
        "expect": expect,
    }


def gen_control() -> list[dict]:
    ok = {"match": True}
    cases = []
    cases.append(
        control_case("timeout_request_tid0", "c2p", "TIMEOUT_REQUEST", {}, "make_timeout_request(0)",
                     make_timeout_request(0).serialize(), ok)
    )
    cases.append(
        control_case("timeout_request_tid200", "c2p", "TIMEOUT_REQUEST", {}, "make_timeout_request(200)",
                     make_timeout_request(200).serialize(), ok)
    )
    for ms in (0, 1, 100, 1000, 2000, 65535):
        cases.append(
            control_case(f"timeout_response_tid0_{ms}ms", "p2c", "TIMEOUT_RESPONSE", {"timeout_ms": ms},
                         f"make_timeout_response(0, {ms})", make_timeout_response(0, ms).serialize(), ok)
        )
    for tid in (0, 9, 255):
        cases.append(
            control_case(f"stream_end_c2p_tid{tid}", "c2p", "STREAM_END_C2P", {}, f"make_stream_end_c2p({tid})",
                         make_stream_end_c2p(tid).serialize(), ok)
        )
        cases.append(
            control_case(f"stream_end_p2c_tid{tid}", "p2c", "STREAM_END_P2C", {}, f"make_stream_end_p2c({tid})",
                         make_stream_end_p2c(tid).serialize(), ok)
        )
    cases.append(
        control_case("capabilities_request_tid1", "c2p", "CAPABILITIES_REQUEST",
                     {"max_request_payload_size": 0, "max_response_payload_size": 0, "flags": 0},
                     "make_capabilities_request(1)", make_capabilities_request(1).serialize(), ok)
    )
    cases.append(
        control_case("capabilities_request_c_central_empty_tid0", "c2p", "CAPABILITIES_REQUEST", {},
                     "raw (C central sends payload_len 0)", bytes.fromhex("0000d000"), ok)
    )
    for name, mreq, mresp, flags in (
        ("nrf_12288_65535_enc", 12288, 65535, 1),
        ("py_65535_65535_enc", 65535, 65535, 1),
        ("noenc_256_256", 256, 256, 0),
        ("zero_limits", 0, 0, 0),
    ):
        cases.append(
            control_case(f"capabilities_response_tid1_{name}", "p2c", "CAPABILITIES_RESPONSE",
                         {"max_request_payload_size": mreq, "max_response_payload_size": mresp, "flags": flags},
                         f"make_capabilities_response(1, {mreq}, {mresp}, {flags})",
                         make_capabilities_response(1, mreq, mresp, flags).serialize(), ok)
        )
    for code in (1, 2, 3, 255):
        cases.append(
            control_case(f"error_tid5_code{code}", "p2c", "ERROR", {"error_code": code},
                         f"make_error_response(5, {code})", make_error_response(5, code).serialize(), ok)
        )
    for step, tid, direction in ((1, 2, "c2p"), (2, 2, "p2c"), (3, 3, "c2p"), (4, 3, "p2c")):
        payload = KX[f"step{step}"]
        cases.append(
            control_case(f"key_exchange_step{step}_tid{tid}", direction, "KEY_EXCHANGE",
                         {"step": step, "payload_hex": payload.hex()},
                         f"make_key_exchange({tid}, step{step})", make_key_exchange(tid, payload).serialize(), ok)
        )
    # Frames the reference never emits.
    raw = [
        ("reserved_bits_timeout_request", "c2p", "TIMEOUT_REQUEST", {}, "0000c700", {"match": True},
         "reserved bits 1-0 set; decoders ignore them"),
        ("control_cmd0_none", "any", "UNKNOWN", {"control_cmd": 0}, "0000c000",
         {"ignore": "UnknownControlCmd"}, "CONTROL with cmd 0x0 (ControlCmd.NONE in the reference)"),
        ("control_cmd7", "any", "UNKNOWN", {"control_cmd": 7}, "0300dc020102",
         {"ignore": "UnknownControlCmd"}, "cmd 0x7 parses as ControlCmd.UNKNOWN"),
        ("control_cmd15", "any", "UNKNOWN", {"control_cmd": 15}, "0300fc00",
         {"ignore": "UnknownControlCmd"}, "cmd 0xF parses as ControlCmd.UNKNOWN"),
        ("type2_cmd0", "any", "UNKNOWN_TYPE", {"type": 2}, "0101800263646566",
         {"ignore": "UnknownType"}, "type 0b10 (trailing bytes after payload_len 2)"),
        ("type2_cmd1", "any", "UNKNOWN_TYPE", {"type": 2}, "00008400", {"ignore": "UnknownType"},
         "type 0b10 with command bits 0x1"),
        ("timeout_response_short_payload", "p2c", "TIMEOUT_RESPONSE", {}, "0000c40164",
         {"ignore": "BadControlPayload"}, "centrals accept a TIMEOUT response only with payload_len 2"),
        ("timeout_response_long_payload", "p2c", "TIMEOUT_RESPONSE", {"timeout_ms": 100}, "0000c403640000",
         {"match": True}, "reference centrals accept a TIMEOUT response only with payload_len 2; blerpc-rs "
         "reads the first 2 bytes and ignores trailing ones (wire.md §5: tolerate trailing bytes)"),
        ("capabilities_response_short_payload", "p2c", "CAPABILITIES_RESPONSE",
         {"max_request_payload_size": 12288, "max_response_payload_size": 65535, "flags": 0}, "0100d0050030ffff01",
         {"match": True}, "5 bytes: Python centrals require 6; blerpc-rs follows the C central (>= 4 bytes, flags "
         "read as 0 below 6), so the encryption bit is lost and a central requiring encryption closes"),
        ("error_empty_payload", "p2c", "ERROR", {}, "0500d400", {"ignore": "BadControlPayload"},
         "ERROR must carry one code byte"),
    ]
    for name, direction, message, fields, hexstr, expect, note in raw:
        case = control_case(name, direction, message, fields, "raw", bytes.fromhex(hexstr), expect, emit=False)
        case["note"] = note
        cases.append(case)
    return cases


# --------------------------------------------------------------------------------------------------
# 4. commands.json
# --------------------------------------------------------------------------------------------------


def command_case(name, cmd_type, cmd_name, data, proto=None, data_pattern="hex") -> dict:
    packet = CommandPacket(cmd_type=cmd_type, cmd_name=cmd_name, data=data).serialize()
    parsed = CommandPacket.deserialize(packet)
    assert (parsed.cmd_type, parsed.cmd_name, parsed.data) == (cmd_type, cmd_name, data), name
    return {
        "name": name,
        "cmd_type": cmd_type.name,
        "cmd_name": cmd_name,
        "data_hex": data.hex(),
        "data_sha256": sha256(data),
        "packet_hex": packet.hex(),
        "proto": proto,
        "expect": {"match": True},
    }


def gen_commands() -> list[dict]:
    req, resp = CommandType.REQUEST, CommandType.RESPONSE
    cases = []

    def proto(message_type, **fields):
        return {"message": message_type, "fields": fields}

    cases.append(command_case("echo_request_hello", req, "echo", pb_string(1, "hello"), proto("EchoRequest", message="hello")))
    cases.append(command_case("echo_response_hello", resp, "echo", pb_string(1, "hello"), proto("EchoResponse", message="hello")))
    cases.append(command_case("echo_request_empty", req, "echo", b"", proto("EchoRequest")))
    cases.append(command_case("echo_response_empty", resp, "echo", b"", proto("EchoResponse")))
    cases.append(command_case("echo_request_b30", req, "echo", pb_string(1, "B" * 30), proto("EchoRequest", message="B" * 30)))
    cases.append(
        command_case("echo_request_256_chars", req, "echo", pb_string(1, ascii_name(256)),
                     proto("EchoRequest", message=ascii_name(256)))
    )
    cases.append(
        command_case("flash_read_request_0_8192", req, "flash_read", pb_uint(1, 0) + pb_uint(2, 8192),
                     proto("FlashReadRequest", address=0, length=8192))
    )
    cases.append(
        command_case("flash_read_request_4096_256", req, "flash_read", pb_uint(1, 4096) + pb_uint(2, 256),
                     proto("FlashReadRequest", address=4096, length=256))
    )
    cases.append(
        command_case("flash_read_response_0_8192", resp, "flash_read", pb_uint(1, 0) + pb_bytes(2, FLASH_DATA),
                     proto("FlashReadResponse", address=0, data={"pattern": "mod251", "len": 8192}))
    )
    cases.append(
        command_case("data_write_request_100", req, "data_write", pb_bytes(1, pattern_bytes("mod251", 100)),
                     proto("DataWriteRequest", data={"pattern": "mod251", "len": 100}))
    )
    cases.append(command_case("data_write_response_100", resp, "data_write", pb_uint(1, 100), proto("DataWriteResponse", length=100)))
    cases.append(
        command_case("counter_stream_request_20", req, "counter_stream", pb_uint(1, 20), proto("CounterStreamRequest", count=20))
    )
    for seq in (0, 1, 200):
        cases.append(
            command_case(f"counter_stream_response_seq{seq}", resp, "counter_stream",
                         pb_uint(1, seq) + pb_uint(2, seq * 10), proto("CounterStreamResponse", seq=seq, value=seq * 10))
        )
    cases.append(
        command_case("counter_upload_request_seq3", req, "counter_upload", pb_uint(1, 3) + pb_uint(2, 30),
                     proto("CounterUploadRequest", seq=3, value=30))
    )
    cases.append(
        command_case("counter_upload_request_negative_value", req, "counter_upload", pb_uint(1, 1) + pb_uint(2, -1),
                     proto("CounterUploadRequest", seq=1, value=-1))
    )
    cases.append(
        command_case("counter_upload_response_20", resp, "counter_upload", pb_uint(1, 20),
                     proto("CounterUploadResponse", received_count=20))
    )
    for length in (1, 16, 17, 255):
        cases.append(command_case(f"name_len{length}_request_empty", req, ascii_name(length), b""))
        cases.append(command_case(f"name_len{length}_response_2bytes", resp, ascii_name(length), b"\x08\x01"))
    cases.append(command_case("name_len0_request", req, "", b"\x01"))
    for length in (0, 1, 255, 256, 65535):
        cases.append(command_case(f"data_len{length}_request", req, "data_write", pattern_bytes("mod251", length)))
    return cases


# --------------------------------------------------------------------------------------------------
# 5. key_exchange.json
# --------------------------------------------------------------------------------------------------


def gen_key_exchange() -> list[dict]:
    central_pub = BlerpcCrypto.x25519_public_bytes(BlerpcCrypto.x25519_private_from_bytes(CENTRAL_X25519_PRIVATE))
    periph_priv = BlerpcCrypto.x25519_private_from_bytes(PERIPHERAL_X25519_PRIVATE)
    periph_pub = BlerpcCrypto.x25519_public_bytes(periph_priv)
    central_priv = BlerpcCrypto.x25519_private_from_bytes(CENTRAL_X25519_PRIVATE)
    identity_pub = BlerpcCrypto.ed25519_public_bytes(KX["identity"])
    shared_c = BlerpcCrypto.x25519_shared_secret(central_priv, periph_pub)
    shared_p = BlerpcCrypto.x25519_shared_secret(periph_priv, central_pub)
    assert shared_c == shared_p
    session_key = BlerpcCrypto.derive_session_key(shared_c, central_pub, periph_pub)
    assert session_key == SESSION_KEY
    swapped = BlerpcCrypto.derive_session_key(shared_c, periph_pub, central_pub)
    signed = central_pub + periph_pub
    signature = BlerpcCrypto.ed25519_sign(KX["identity"], signed)
    # What the reference state machines produced must agree with the primitives.
    assert BlerpcCrypto.parse_step1_payload(KX["step1"]) == central_pub
    assert BlerpcCrypto.parse_step2_payload(KX["step2"]) == (periph_pub, signature, identity_pub)
    assert KX["verify_cb_key"] == identity_pub
    confirm_c = BlerpcCrypto.parse_step3_payload(KX["step3"])
    confirm_p = BlerpcCrypto.parse_step4_payload(KX["step4"])
    assert confirm_c[:12] == CENTRAL_CONFIRM_NONCE and confirm_p[:12] == PERIPHERAL_CONFIRM_NONCE
    assert BlerpcCrypto.decrypt_confirmation(SESSION_KEY, confirm_c) == ref_crypto.CONFIRM_CENTRAL
    assert BlerpcCrypto.decrypt_confirmation(SESSION_KEY, confirm_p) == ref_crypto.CONFIRM_PERIPHERAL

    steps = []
    for step, tid, sender in ((1, 2, "central"), (2, 2, "peripheral"), (3, 3, "central"), (4, 3, "peripheral")):
        payload = KX[f"step{step}"]
        steps.append(
            {
                "step": step,
                "sender": sender,
                "payload_hex": payload.hex(),
                "payload_len": len(payload),
                "container_tid": tid,
                "container_hex": make_key_exchange(tid, payload).serialize().hex(),
            }
        )
    exchange = {
        "name": "rfc_keys_exchange",
        "kind": "exchange",
        "inputs": {
            "central_x25519_private": CENTRAL_X25519_PRIVATE.hex(),
            "peripheral_x25519_private": PERIPHERAL_X25519_PRIVATE.hex(),
            "peripheral_ed25519_seed": IDENTITY_SEED.hex(),
            "central_confirm_nonce": CENTRAL_CONFIRM_NONCE.hex(),
            "peripheral_confirm_nonce": PERIPHERAL_CONFIRM_NONCE.hex(),
        },
        "values": {
            "central_x25519_public": central_pub.hex(),
            "peripheral_x25519_public": periph_pub.hex(),
            "peripheral_ed25519_public": identity_pub.hex(),
            "shared_secret": shared_c.hex(),
            "hkdf_salt": (central_pub + periph_pub).hex(),
            "hkdf_info_hex": b"blerpc-session-key".hex(),
            "hkdf_length": 16,
            "session_key": SESSION_KEY.hex(),
            "session_key_with_swapped_salt": swapped.hex(),
            "signed_message": signed.hex(),
            "signature": signature.hex(),
            "confirm_central_plaintext_hex": ref_crypto.CONFIRM_CENTRAL.hex(),
            "confirm_peripheral_plaintext_hex": ref_crypto.CONFIRM_PERIPHERAL.hex(),
        },
        "steps": steps,
        "expect": {"match": True},
    }
    return [exchange, transcript_python_central(), transcript_c_central()]


def frame(direction: str, what: str, blob: bytes) -> dict:
    c = Container.deserialize(blob)
    return {"dir": direction, "what": what, "tid": c.transaction_id, "container_hex": blob.hex()}


def transcript_python_central() -> dict:
    """Connection setup as a reference Python central does it (wire.md §2.1), then one echo call."""
    mtu = 247
    splitter = ContainerSplitter(mtu)  # the central's tid source
    frames = []
    tid = splitter.next_transaction_id()
    frames.append(frame("c2p", "TIMEOUT request", make_timeout_request(tid).serialize()))
    frames.append(frame("p2c", "TIMEOUT response 100 ms", make_timeout_response(tid, 100).serialize()))
    tid = splitter.next_transaction_id()
    frames.append(frame("c2p", "CAPABILITIES request", make_capabilities_request(tid).serialize()))
    frames.append(frame("p2c", "CAPABILITIES response 12288/65535/enc",
                        make_capabilities_response(tid, 12288, 65535, 1).serialize()))
    for step in (1, 3):
        tid = splitter.next_transaction_id()
        frames.append(frame("c2p", f"KEY_EXCHANGE step {step}", make_key_exchange(tid, KX[f"step{step}"]).serialize()))
        frames.append(frame("p2c", f"KEY_EXCHANGE step {step + 1}",
                            make_key_exchange(tid, KX[f"step{step + 1}"]).serialize()))
    central = BlerpcCryptoSession(SESSION_KEY, is_central=True)
    peripheral = BlerpcCryptoSession(SESSION_KEY, is_central=False)
    request = central.encrypt(ECHO_HELLO_REQ)
    for c in splitter.split(request):
        frames.append(frame("c2p", "echo request (encrypted, counter 0)", c.serialize()))
    rpc_tid = frames[-1]["tid"]
    assert peripheral.decrypt(request) == ECHO_HELLO_REQ
    response = peripheral.encrypt(ECHO_HELLO_RESP)
    for c in ContainerSplitter(mtu).split(response, transaction_id=rpc_tid):
        frames.append(frame("p2c", "echo response (encrypted, counter 0), request tid echoed", c.serialize()))
    assert central.decrypt(response) == ECHO_HELLO_RESP
    assert [f["tid"] for f in frames] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    return {
        "name": "transcript_python_central",
        "kind": "transcript",
        "mtu": mtu,
        "session_key": SESSION_KEY.hex(),
        "frames": frames,
        "expect": {"match": True, "roles": ["central", "peripheral"]},
    }


def transcript_c_central() -> dict:
    """The C central: empty CAPABILITIES request and KEY_EXCHANGE, all with tid 0 (wire.md §2.1)."""
    frames = [
        frame("c2p", "CAPABILITIES request (empty payload)", bytes.fromhex("0000d000")),
        frame("p2c", "CAPABILITIES response 12288/65535/enc", make_capabilities_response(0, 12288, 65535, 1).serialize()),
    ]
    for step in (1, 3):
        frames.append(frame("c2p", f"KEY_EXCHANGE step {step}", make_key_exchange(0, KX[f"step{step}"]).serialize()))
        frames.append(frame("p2c", f"KEY_EXCHANGE step {step + 1}", make_key_exchange(0, KX[f"step{step + 1}"]).serialize()))
    return {
        "name": "transcript_c_central",
        "kind": "transcript",
        "mtu": 247,
        "session_key": SESSION_KEY.hex(),
        "frames": frames,
        # Our central draws a fresh tid for every control request (like the Python central), so
        # only our peripheral can reproduce the C central's all-tid-0 conversation.
        "expect": {"match": True, "roles": ["peripheral"]},
    }


# --------------------------------------------------------------------------------------------------
# 6. session.json
# --------------------------------------------------------------------------------------------------

DIRECTION_NAME = {ref_crypto.DIRECTION_C2P: "c2p", ref_crypto.DIRECTION_P2C: "p2c"}


def session_at(is_central: bool, counter: int) -> BlerpcCryptoSession:
    session = BlerpcCryptoSession(SESSION_KEY, is_central=is_central)
    # The only way to reach a high counter without 2^32 calls: set the private field.
    session._tx_counter = counter
    return session


def gen_session() -> list[dict]:
    cases = []
    plaintexts = [
        ("echo_hello", {"central": ECHO_HELLO_REQ, "peripheral": ECHO_HELLO_RESP}),
        ("echo_empty", {"central": ECHO_EMPTY_REQ, "peripheral": cmd(CommandType.RESPONSE, "echo", b"")}),
        ("empty_plaintext", {"central": b"", "peripheral": b""}),
        ("flash_read_8k", {"central": cmd(CommandType.REQUEST, "flash_read", pb_uint(2, 8192)),
                           "peripheral": FLASH_READ_RESP_8K}),
    ]
    for label, by_role in plaintexts:
        for role in ("central", "peripheral"):
            plaintext = by_role[role]
            # Counters 0 and 1: one fresh session, encrypt twice (the natural path).
            fresh = BlerpcCryptoSession(SESSION_KEY, is_central=role == "central")
            frames = [(0, fresh.encrypt(plaintext)), (1, fresh.encrypt(plaintext))]
            high = 0xFFFFFFFE
            frames.append((high, session_at(role == "central", high).encrypt(plaintext)))
            for counter, blob in frames:
                direction = fresh._tx_direction
                receiver = BlerpcCryptoSession(SESSION_KEY, is_central=role != "central")
                assert receiver.decrypt(blob) == plaintext
                cases.append(
                    {
                        "name": f"encrypt_{label}_{role}_ctr{counter}",
                        "op": "encrypt",
                        "role": role,
                        "direction": DIRECTION_NAME[direction],
                        "session_key": SESSION_KEY.hex(),
                        "counter": counter,
                        "nonce_hex": BlerpcCrypto._build_nonce(counter, direction).hex(),
                        "plaintext_hex": plaintext.hex(),
                        "frame_hex": blob.hex(),
                        "expect": {"match": True},
                    }
                )
    # The spec's FIRST container for the counter-0 echo request, tid 3.
    spec_frame = bytes.fromhex(next(c for c in cases if c["name"] == "encrypt_echo_hello_central_ctr0")["frame_hex"])
    cases.append(
        {
            "name": "encrypted_echo_request_as_container_tid3",
            "op": "split",
            "mtu": 247,
            "tid": 3,
            "frame_hex": spec_frame.hex(),
            "containers": serialize_all(ContainerSplitter(247).split(spec_frame, transaction_id=3)),
            "expect": {"match": True},
        }
    )
    for counter, direction in ((0, 0), (0x01020304, 1), (0xFFFFFFFE, 0), (0xFFFFFFFF, 1)):
        cases.append(
            {
                "name": f"nonce_ctr{counter:08x}_{DIRECTION_NAME[direction]}",
                "op": "nonce",
                "counter": counter,
                "direction": DIRECTION_NAME[direction],
                "nonce_hex": BlerpcCrypto._build_nonce(counter, direction).hex(),
                "expect": {"match": True},
            }
        )
    # Encrypt refuses counter 0xFFFFFFFF.
    for role in ("central", "peripheral"):
        session = session_at(role == "central", 0xFFFFFFFE)
        last = session.encrypt(ECHO_HELLO_REQ)
        status, err = attempt(session.encrypt, ECHO_HELLO_REQ)
        assert status == "error"
        cases.append(
            {
                "name": f"encrypt_refuses_ctr_ffffffff_{role}",
                "op": "encrypt_exhaust",
                "role": role,
                "session_key": SESSION_KEY.hex(),
                "start_counter": 0xFFFFFFFE,
                "plaintext_hex": ECHO_HELLO_REQ.hex(),
                "last_frame_hex": last.hex(),
                "reference_error": err,
                "expect": {"error": "CounterExhausted"},
            }
        )
    cases += decrypt_sequences()
    return cases


def decrypt_step(session: BlerpcCryptoSession, blob: bytes, what: str, expect: dict) -> dict:
    status, value = attempt(session.decrypt, blob)
    reference = {"plaintext_hex": value.hex()} if status == "ok" else {"error": value}
    if "plaintext_hex" in expect:
        assert reference == expect, (what, reference)
    else:
        assert status == "error", what
    return {"what": what, "frame_hex": blob.hex(), "reference": reference, "expect": expect}


def decrypt_sequences() -> list[dict]:
    def c2p(counter, plaintext=ECHO_HELLO_REQ):
        return BlerpcCrypto.encrypt_command(SESSION_KEY, counter, ref_crypto.DIRECTION_C2P, plaintext)

    def p2c(counter, plaintext=ECHO_HELLO_RESP):
        return BlerpcCrypto.encrypt_command(SESSION_KEY, counter, ref_crypto.DIRECTION_P2C, plaintext)

    def ok(plaintext):
        return {"plaintext_hex": plaintext.hex()}

    cases = []
    s = BlerpcCryptoSession(SESSION_KEY, is_central=False)
    tampered = bytearray(c2p(6))
    tampered[-1] ^= 0x01
    flipped_ct = bytearray(c2p(6))
    flipped_ct[4] ^= 0x80
    steps = [
        decrypt_step(s, c2p(1), "counter 1 accepted first", ok(ECHO_HELLO_REQ)),
        decrypt_step(s, c2p(0), "counter 0 after 1: replay", {"error": "Replay"}),
        decrypt_step(s, c2p(1), "counter 1 again: replay", {"error": "Replay"}),
        decrypt_step(s, c2p(5), "counter 5: gaps are allowed", ok(ECHO_HELLO_REQ)),
        decrypt_step(s, bytes(tampered), "counter 6 with the last tag byte flipped", {"error": "BadTag"}),
        decrypt_step(s, bytes(flipped_ct), "counter 6 with a ciphertext bit flipped", {"error": "BadTag"}),
        decrypt_step(s, c2p(6), "counter 6 intact: failed frames did not advance the counter", ok(ECHO_HELLO_REQ)),
        decrypt_step(s, c2p(7)[:19], "19 bytes: shorter than counter + tag", {"error": "FrameTooShort", "min": 20}),
        decrypt_step(s, c2p(7, b""), "20 bytes: empty plaintext", ok(b"")),
        decrypt_step(s, p2c(8, ECHO_HELLO_REQ), "counter 8 sealed for the other direction", {"error": "BadTag"}),
        decrypt_step(s, c2p(0xFFFFFFFF), "counter 0xffffffff is a valid receive counter", ok(ECHO_HELLO_REQ)),
        decrypt_step(s, c2p(0xFFFFFFFF), "counter 0xffffffff again: replay", {"error": "Replay"}),
    ]
    cases.append({"name": "decrypt_peripheral_replay_and_tamper", "op": "decrypt_sequence", "role": "peripheral",
                  "direction": "c2p", "session_key": SESSION_KEY.hex(), "steps": steps})

    s = BlerpcCryptoSession(SESSION_KEY, is_central=True)
    steps = [
        decrypt_step(s, p2c(0), "counter 0 accepted first", ok(ECHO_HELLO_RESP)),
        decrypt_step(s, p2c(0), "counter 0 again: replay", {"error": "Replay"}),
        decrypt_step(s, p2c(2), "counter 2", ok(ECHO_HELLO_RESP)),
        decrypt_step(s, c2p(3), "counter 3 sealed c2p, fed to the central", {"error": "BadTag"}),
    ]
    cases.append({"name": "decrypt_central_basic", "op": "decrypt_sequence", "role": "central",
                  "direction": "p2c", "session_key": SESSION_KEY.hex(), "steps": steps})

    s = BlerpcCryptoSession(SESSION_KEY, is_central=False)
    steps = [
        decrypt_step(s, c2p(1000), "any first counter is accepted", ok(ECHO_HELLO_REQ)),
        decrypt_step(s, c2p(999), "lower counter: replay", {"error": "Replay"}),
        decrypt_step(s, c2p(1001), "next counter", ok(ECHO_HELLO_REQ)),
    ]
    cases.append({"name": "decrypt_first_counter_arbitrary", "op": "decrypt_sequence", "role": "peripheral",
                  "direction": "c2p", "session_key": SESSION_KEY.hex(), "steps": steps})
    return cases


# --------------------------------------------------------------------------------------------------
# 8. assembly.json (before invalid.json, which reuses assemble_case)
# --------------------------------------------------------------------------------------------------


def assemble_case(name: str, blobs: list[bytes], expect: list[dict], note: str = "") -> dict:
    assembler = ContainerAssembler()
    reference = []
    for blob in blobs:
        out = assembler.feed(Container.deserialize(blob))
        reference.append(None if out is None else out.hex())
    assert len(expect) == len(blobs), name
    ours = [e["payload_hex"] if e["result"] == "complete" else None for e in expect]
    case = {
        "name": name,
        "containers": [b.hex() for b in blobs],
        "reference": reference,
        "expect": expect,
        "diverges": ours != reference,
    }
    if note:
        case["note"] = note
    return case


def first(tid, total, payload, seq=0) -> bytes:
    return Container(tid, seq, ContainerType.FIRST, total_length=total, payload=payload).serialize()


def sub(tid, seq, payload) -> bytes:
    return Container(tid, seq, ContainerType.SUBSEQUENT, payload=payload).serialize()


def unknown_type(tid, seq, payload) -> bytes:
    return bytes([tid, seq, 0x80, len(payload)]) + payload


PENDING = {"result": "pending"}


def complete(data: bytes) -> dict:
    return {"result": "complete", "payload_hex": data.hex()}


def ignored(reason: str) -> dict:
    return {"result": "ignored", "reason": reason}


def dropped(reason: str) -> dict:
    return {"result": "dropped", "reason": reason}


def gen_assembly() -> list[dict]:
    cases = []
    cases.append(assemble_case("single_first_complete", [first(1, 4, b"abcd")], [complete(b"abcd")]))
    cases.append(assemble_case("empty_payload", [bytes.fromhex("070000000000")], [complete(b"")]))
    cases.append(
        assemble_case("first_then_subsequent", [first(1, 6, b"ab"), sub(1, 1, b"cd"), sub(1, 2, b"ef")],
                      [PENDING, PENDING, complete(b"abcdef")])
    )
    cases.append(
        assemble_case(
            "interleaved_tids",
            [first(1, 4, b"ab"), first(2, 4, b"wx"), sub(2, 1, b"yz"), sub(1, 1, b"cd")],
            [PENDING, PENDING, complete(b"wxyz"), complete(b"abcd")],
            "needs at least 2 transactions in flight",
        )
    )
    cases.append(
        assemble_case(
            "seq_gap_drops_transaction",
            [first(1, 6, b"ab"), sub(1, 2, b"ef"), sub(1, 1, b"cd")],
            [PENDING, dropped("SeqGap"), ignored("UnknownTid")],
        )
    )
    cases.append(
        assemble_case(
            "duplicate_seq_drops_transaction",
            [first(1, 6, b"ab"), sub(1, 1, b"cd"), sub(1, 1, b"cd"), sub(1, 2, b"ef")],
            [PENDING, PENDING, dropped("SeqGap"), ignored("UnknownTid")],
        )
    )
    cases.append(assemble_case("subsequent_unknown_tid_ignored", [sub(9, 1, b"cd")], [ignored("UnknownTid")]))
    cases.append(
        assemble_case(
            "restart_by_first",
            [first(1, 6, b"ab"), first(1, 4, b"wx"), sub(1, 1, b"yz")],
            [PENDING, PENDING, complete(b"wxyz")],
        )
    )
    cases.append(
        assemble_case(
            "control_in_the_middle",
            [first(1, 4, b"ab"), make_timeout_request(1).serialize(), sub(1, 1, b"cd")],
            [PENDING, ignored("Control"), complete(b"abcd")],
            "the assembler returns None for CONTROL; the connection handles it",
        )
    )
    cases.append(
        assemble_case(
            "unknown_type_after_first",
            [first(1, 4, b"ab"), unknown_type(1, 1, b"cd"), sub(1, 1, b"cd")],
            [PENDING, ignored("UnknownType"), complete(b"abcd")],
            "wire.md §6.6: the reference treats type 0b10 with a tracked tid like SUBSEQUENT and completes "
            "on it; blerpc-rs ignores unknown types, so the real SUBSEQUENT completes the message",
        )
    )
    cases.append(
        assemble_case("unknown_type_idle", [unknown_type(1, 0, b"")], [ignored("UnknownType")],
                      "the C assembler reports an empty complete message here (wire.md §1.2)")
    )
    cases.append(
        assemble_case(
            "first_payload_exceeds_total",
            [first(1, 2, b"abcd")],
            [complete(b"ab")],
            "bytes beyond total_length are cut off, as the reference does",
        )
    )
    cases.append(
        assemble_case(
            "subsequent_overshoots_total",
            [first(1, 5, b"abc"), sub(1, 1, b"defg")],
            [PENDING, complete(b"abcde")],
            "bytes beyond total_length are cut off, as the reference does",
        )
    )
    cases.append(
        assemble_case("first_total0_with_payload", [first(1, 0, b"abc")], [complete(b"")],
                      "truncated to total_length 0, as the reference does")
    )
    # A full 256-container message at MTU 23 (the C assembler cannot take seq 255; the reference can).
    splitter = ContainerSplitter(23)
    max_payload = pattern_bytes("mod251", 14 + 255 * 16)
    blobs = [c.serialize() for c in splitter.split(max_payload, transaction_id=0xFE)]
    assert len(blobs) == 256
    cases.append(
        assemble_case("mtu23_256_containers", blobs, [PENDING] * 255 + [complete(max_payload)],
                      "every container of the largest MTU-23 message, seq 0..255")
    )
    # Sanity: outside the cases where blerpc-rs deliberately differs, the reference agrees with us.
    for case in cases:
        assert case["diverges"] == (case["name"] in ASSEMBLY_DIVERGES), case["name"]
        if not case["diverges"]:
            for ref, exp in zip(case["reference"], case["expect"]):
                if exp["result"] == "complete":
                    assert ref == exp["payload_hex"], case["name"]
                else:
                    assert ref is None, case["name"]
    return cases


ASSEMBLY_DIVERGES = {
    "unknown_type_after_first",
}


# --------------------------------------------------------------------------------------------------
# 7. invalid.json
# --------------------------------------------------------------------------------------------------


def invalid_case(name, op, inputs, status_value, expect, note="") -> dict:
    status, value = status_value
    case = {"name": name, "op": op, "input": inputs, "expect": expect}
    case["reference"] = {"error": value} if status == "error" else {"result": value}
    if note:
        case["note"] = note
    return case


def ref_parse_container(blob: bytes):
    status, value = attempt(Container.deserialize, blob)
    return status, container_fields(value) if status == "ok" else value


def ref_parse_command(blob: bytes):
    status, value = attempt(CommandPacket.deserialize, blob)
    if status == "ok":
        value = {"cmd_type": value.cmd_type.name, "cmd_name": value.cmd_name, "data_hex": value.data.hex()}
    return status, value


def ref_emit_command(cmd_type, name, data):
    status, value = attempt(CommandPacket(cmd_type=cmd_type, cmd_name=name, data=data).serialize)
    return status, value.hex() if status == "ok" else value


def gen_invalid() -> list[dict]:
    cases = []

    # container.parse
    for name, hexstr, expect, note in [
        ("container_empty", "", {"error": "Truncated", "field": "tid"}, ""),
        ("container_3_bytes", "000040", {"error": "Truncated", "field": "payload_len"}, ""),
        ("first_4_bytes", "00000005", {"error": "Truncated", "field": "total_length"}, ""),
        ("first_5_bytes", "0000000500", {"error": "Truncated", "field": "payload_len"}, ""),
        ("first_payload_truncated", "0000000a000a61626364", {"error": "Truncated", "field": "payload"},
         "payload_len 10, 4 bytes present: the reference silently slices"),
        ("subsequent_payload_truncated", "0001400a6162", {"error": "Truncated", "field": "payload"},
         "payload_len 10, 2 bytes present: the reference silently slices"),
        ("control_payload_truncated", "0000c40264", {"error": "Truncated", "field": "payload"},
         "TIMEOUT response with payload_len 2, 1 byte present"),
        ("first_trailing_bytes", "00000004000261627a7a", {"match": True},
         "trailing bytes after payload_len are ignored (wire.md §5: tolerate trailing bytes)"),
        ("subsequent_trailing_bytes", "00014002616263", {"match": True}, "trailing bytes ignored"),
        ("type2_parses_unknown", "01018002636465", {"match": True, "ignore": "UnknownType"},
         "parses (type UNKNOWN in the reference); blerpc-rs parses and the connection ignores it"),
        ("control_cmd7_parses_unknown", "0000dc00", {"match": True, "ignore": "UnknownControlCmd"},
         "cmd 0x7 parses as ControlCmd.UNKNOWN"),
    ]:
        cases.append(invalid_case(name, "container.parse", {"hex": hexstr}, ref_parse_container(bytes.fromhex(hexstr)),
                                  expect, note))

    # command.parse
    for name, hexstr, expect, note in [
        ("command_empty", "", {"error": "Truncated", "field": "type"}, ""),
        ("command_1_byte", "00", {"error": "Truncated", "field": "name_len"}, ""),
        ("command_name_truncated", "0005656368", {"error": "Truncated", "field": "name"}, ""),
        ("command_data_len_missing", "00046563686f", {"error": "Truncated", "field": "data_len"}, ""),
        ("command_data_len_half", "00046563686f05", {"error": "Truncated", "field": "data_len"}, ""),
        ("command_data_truncated", "00046563686f05007879", {"error": "Truncated", "field": "data"},
         "data_len 5, 2 bytes present: the reference returns data b'xy'"),
        ("command_trailing_bytes", "00046563686f01007879", {"match": True},
         "bytes after data are ignored, as in the reference"),
        ("command_reserved_bits_request", "7f046563686f0000", {"match": True},
         "byte 0 = 0x7f: type bit 7 = 0, reserved bits ignored"),
        ("command_reserved_bits_response", "ff046563686f0000", {"match": True}, "byte 0 = 0xff is a RESPONSE"),
        ("command_name_not_ascii", "0002c3a90000",
         {"result": {"cmd_type": "REQUEST", "cmd_name_hex": "c3a9", "data_hex": ""}},
         "the reference raises UnicodeDecodeError (ASCII); blerpc-rs accepts any UTF-8 name, as the TS library"),
        ("command_name_invalid_utf8", "0002c3280000", {"error": "InvalidValue", "field": "name"},
         "c3 28 is not UTF-8"),
        ("command_name_byte_ff", "0001ff0000", {"error": "InvalidValue", "field": "name"},
         "0xff never occurs in UTF-8"),
        ("command_name_empty", "00000000", {"match": True}, "an empty name parses; dispatch fails later"),
    ]:
        cases.append(invalid_case(name, "command.parse", {"hex": hexstr}, ref_parse_command(bytes.fromhex(hexstr)),
                                  expect, note))

    # command.emit
    req = CommandType.REQUEST
    for name, cmd_name, data, expect, note in [
        ("emit_name_256", ascii_name(256), b"", {"error": "TooLong", "field": "name", "max": 255}, ""),
        ("emit_data_65536", "data_write", pattern_bytes("mod251", 65536),
         {"error": "TooLong", "field": "data", "max": 65535}, ""),
        ("emit_name_not_ascii", "\u00e9cho", b"", {"packet_hex": "0005c3a963686f0000"},
         "the reference raises UnicodeEncodeError (ASCII); blerpc-rs emits the UTF-8 bytes"),
    ]:
        inputs = {"cmd_type": "REQUEST", "cmd_name_hex": cmd_name.encode("utf-8").hex(),
                  "data": payload_desc(data, "mod251" if len(data) > 64 else "hex")}
        cases.append(invalid_case(name, "command.emit", inputs, ref_emit_command(req, cmd_name, data), expect, note))

    # split
    def split_inputs(mtu, length, pattern="mod251", tid=0x2A):
        return {"mtu": mtu, "tid": tid, "payload": payload_desc(pattern_bytes(pattern, length), pattern)}

    def ref_split(mtu, length, tid=0x2A):
        outcome = reference_split(mtu, pattern_bytes("mod251", length), tid)
        if "error" in outcome:
            return "error", outcome["error"] | ({"chunk_lens": outcome["chunk_lens"]} if "chunk_lens" in outcome else {})
        return "ok", outcome

    for name, mtu, length, expect, note in [
        ("split_mtu263_len600", 263, 600, {"containers": capped_split(263, pattern_bytes("mod251", 600), 0x2A)["containers"]},
         "reference: chunks [254, 256, 90], serialize raises struct.error; blerpc-rs caps at 255"),
        ("split_mtu247_len61439", 247, 61439, {"error": "TooLong", "field": "payload", "max": 61438},
         "one byte more than 256 containers"),
        ("split_mtu247_len65536", 247, 65536, {"error": "TooLong", "field": "payload", "max": 61438},
         "over the u16 total_length"),
        ("split_mtu512_len65536", 512, 65536, {"error": "TooLong", "field": "payload", "max": 65280},
         "the reference reports the u16 limit first"),
        ("split_mtu9_len1", 9, 1, {"error": "InvalidValue", "field": "mtu"},
         "eff 6: the reference emits an empty FIRST then a SUBSEQUENT; C refuses eff < 7, so do we"),
        ("split_mtu8_len10", 8, 10, {"error": "InvalidValue", "field": "mtu"},
         "eff 5: the reference slices payload[:-1] and emits a FIRST bigger than the MTU"),
        ("split_mtu7_len1", 7, 1, {"error": "InvalidValue", "field": "mtu"},
         "eff 4: SUBSEQUENT capacity 0, the reference loops to seq 256 and raises"),
    ]:
        cases.append(invalid_case(name, "split", split_inputs(mtu, length), ref_split(mtu, length), expect, note))

    # key exchange
    identity = BlerpcCrypto.ed25519_private_from_bytes(IDENTITY_SEED)
    central_pub = BlerpcCrypto.parse_step1_payload(KX["step1"])

    def central_step2(step2: bytes):
        with RANDOM.fixed(x25519=[CENTRAL_X25519_PRIVATE]):
            kx = CentralKeyExchange()
            kx.start()
        return attempt(kx.process_step2, step2)

    def forged_step2(periph_x25519_pub: bytes) -> bytes:
        sig = BlerpcCrypto.ed25519_sign(identity, central_pub + periph_x25519_pub)
        return BlerpcCrypto.build_step2_payload(periph_x25519_pub, sig, BlerpcCrypto.ed25519_public_bytes(identity))

    def peripheral_step(payload: bytes, planned_x25519=()):
        kx = PeripheralKeyExchange(identity)
        with RANDOM.fixed(x25519=planned_x25519):
            result = attempt(kx.handle_step, payload)
        if result[0] == "ok":
            return "ok", {"response_hex": result[1][0].hex()}
        return result

    zero = bytes(32)
    low_order_one = b"\x01" + bytes(31)
    for name, pub, note in [
        ("kx_central_peer_key_all_zero", zero, "signed validly; the all-zero X25519 result is refused"),
        ("kx_central_peer_key_low_order_1", low_order_one, "u = 1 is a low-order point: the shared secret is zero"),
    ]:
        step2 = forged_step2(pub)
        cases.append(invalid_case(name, "kx.central.process_step2",
                                  {"central_x25519_private": CENTRAL_X25519_PRIVATE.hex(), "step2_hex": step2.hex()},
                                  central_step2(step2), {"error": "AllZeroSharedSecret"}, note))
    for name, pub in [("kx_peripheral_central_key_all_zero", zero), ("kx_peripheral_central_key_low_order_1", low_order_one)]:
        step1 = BlerpcCrypto.build_step1_payload(pub)
        status, value = peripheral_step(step1, [PERIPHERAL_X25519_PRIVATE])
        cases.append(invalid_case(name, "kx.peripheral.handle_step",
                                  {"peripheral_x25519_private": PERIPHERAL_X25519_PRIVATE.hex(),
                                   "identity_seed": IDENTITY_SEED.hex(), "payload_hex": step1.hex()},
                                  (status, value), {"error": "AllZeroSharedSecret"}))
    bad_sig = bytearray(KX["step2"])
    bad_sig[40] ^= 0x01
    wrong_identity = bytearray(KX["step2"])
    wrong_identity[100] ^= 0x01
    for name, step2, expect, note in [
        ("kx_central_bad_signature", bytes(bad_sig), {"error": "BadSignature"}, "one signature bit flipped"),
        ("kx_central_identity_key_changed", bytes(wrong_identity), {"error": "BadSignature"},
         "one identity-key bit flipped"),
        ("kx_central_step2_short", KX["step2"][:128], {"error": "Truncated", "field": "identity"},
         "128 of 129 bytes"),
        ("kx_central_step2_wrong_step_byte", b"\x04" + KX["step2"][1:], {"error": "UnexpectedStep", "step": 4}, ""),
    ]:
        cases.append(invalid_case(name, "kx.central.process_step2",
                                  {"central_x25519_private": CENTRAL_X25519_PRIVATE.hex(), "step2_hex": step2.hex()},
                                  central_step2(step2), expect, note))
    bad_confirm = bytearray(KX["step3"])
    bad_confirm[20] ^= 0x01
    for name, payload, planned, expect, note in [
        ("kx_peripheral_empty_payload", b"", [], {"error": "Truncated", "field": "step"}, ""),
        ("kx_peripheral_step2_byte", KX["step2"], [], {"error": "UnexpectedStep", "step": 2}, ""),
        ("kx_peripheral_step3_before_step1", KX["step3"], [], {"error": "UnexpectedStep", "step": 3},
         "the reference raises RuntimeError('Invalid state for step 3')"),
        ("kx_peripheral_step1_short", KX["step1"][:32], [], {"error": "Truncated", "field": "central_public"}, ""),
    ]:
        cases.append(invalid_case(name, "kx.peripheral.handle_step",
                                  {"peripheral_x25519_private": PERIPHERAL_X25519_PRIVATE.hex(),
                                   "identity_seed": IDENTITY_SEED.hex(), "payload_hex": payload.hex()},
                                  peripheral_step(payload, planned), expect, note))
    # Step 3 with a tampered confirmation, after a correct step 1.
    kx = PeripheralKeyExchange(identity)
    with RANDOM.fixed(x25519=[PERIPHERAL_X25519_PRIVATE]):
        assert kx.handle_step(KX["step1"])[0] == KX["step2"]
    status, value = attempt(kx.handle_step, bytes(bad_confirm))
    cases.append(invalid_case("kx_peripheral_step3_tampered", "kx.peripheral.handle_step_after_step1",
                              {"peripheral_x25519_private": PERIPHERAL_X25519_PRIVATE.hex(),
                               "identity_seed": IDENTITY_SEED.hex(), "step1_hex": KX["step1"].hex(),
                               "payload_hex": bytes(bad_confirm).hex()},
                              (status, value), {"error": "BadConfirmation"}, "one ciphertext bit flipped"))

    # assembler behaviours the issue lists as invalid (same schema as assembly.json)
    for case in (
        assemble_case("assemble_seq_gap", [first(1, 6, b"ab"), sub(1, 2, b"ef")], [PENDING, dropped("SeqGap")]),
        assemble_case("assemble_unknown_tid_subsequent", [sub(7, 1, b"zz")], [ignored("UnknownTid")]),
        assemble_case("assemble_first_total_below_payload", [first(1, 2, b"abcd")], [complete(b"ab")],
                      "truncated to total_length, as the reference does"),
    ):
        cases.append({"name": case["name"], "op": "assemble", "input": {"containers": case["containers"]},
                      "reference": {"result": case["reference"]}, "expect": {"results": case["expect"]},
                      **({"note": case["note"]} if "note" in case else {})})
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names))
    return cases


# --------------------------------------------------------------------------------------------------
# wire.md §6 cross-checks
# --------------------------------------------------------------------------------------------------


def by_name(cases: list[dict], name: str) -> dict:
    found = [c for c in cases if c["name"] == name]
    assert len(found) == 1, name
    return found[0]


def check_spec(families: dict[str, list[dict]]) -> None:
    control = families["control"]
    for name, hexstr in [
        ("timeout_request_tid0", "0000c400"),
        ("timeout_response_tid0_100ms", "0000c4026400"),
        ("capabilities_request_tid1", "0100d006000000000000"),
        ("capabilities_request_c_central_empty_tid0", "0000d000"),
        ("capabilities_response_tid1_nrf_12288_65535_enc", "0100d0060030ffff0100"),
        ("capabilities_response_tid1_py_65535_65535_enc", "0100d006ffffffff0100"),
        ("error_tid5_code2", "0500d40102"),
        ("error_tid5_code1", "0500d40101"),
        ("stream_end_c2p_tid9", "0900c800"),
        ("stream_end_p2c_tid9", "0900cc00"),
    ]:
        assert by_name(control, name)["container_hex"] == hexstr, name
    assert by_name(control, "control_cmd7")["parsed"]["control_cmd"] == "UNKNOWN"
    assert by_name(control, "control_cmd15")["parsed"]["control_cmd"] == "UNKNOWN"
    assert by_name(control, "type2_cmd0")["parsed"]["type"] == "UNKNOWN"

    commands = families["commands"]
    for name, hexstr in [
        ("echo_request_hello", "00046563686f07000a0568656c6c6f"),
        ("echo_response_hello", "80046563686f07000a0568656c6c6f"),
        ("echo_request_empty", "00046563686f0000"),
        ("flash_read_request_0_8192", "000a666c6173685f726561640300108040"),
        ("counter_stream_request_20", "000e636f756e7465725f73747265616d02000814"),
        ("counter_stream_response_seq1", "800e636f756e7465725f73747265616d04000801100a"),
        ("counter_stream_response_seq0", "800e636f756e7465725f73747265616d0000"),
        ("counter_upload_response_20", "800e636f756e7465725f75706c6f616402000814"),
    ]:
        assert by_name(commands, name)["packet_hex"] == hexstr, name
    flash = bytes.fromhex(by_name(commands, "flash_read_request_0_8192")["packet_hex"])
    assert ContainerSplitter(247).split(flash, transaction_id=0)[0].serialize().hex() == (
        "000000110011000a666c6173685f726561640300108040"
    )

    splits = families["splits"]
    assert by_name(splits, "spec_6_3_mtu23_echo_b30_reference")["outcome"]["containers"] == [
        "2a000028000e00046563686f20000a1e42424242",
        "2a01401042424242424242424242424242424242",
        "2a02400a42424242424242424242",
    ]
    c500 = by_name(splits, "spec_6_4_mtu247_len500_reference")["outcome"]
    assert c500["chunk_lens"] == [238, 240, 22]
    assert [h[:12] for h in c500["containers"]][0] == "2a0000f401ee"
    assert [h[:8] for h in c500["containers"]][1:] == ["2a0140f0", "2a024016"]
    assert [sha256(bytes.fromhex(h))[:16] for h in c500["containers"]] == [
        "6718bf9c3c0e78c5", "9add5021066b992f", "55e689fe66789438"
    ]
    assert by_name(splits, "spec_6_4_mtu247_empty_tid7_reference")["outcome"]["containers"] == ["070000000000"]
    e263 = by_name(splits, "spec_6_6_mtu263_len600_reference")["outcome"]
    assert e263["chunk_lens"] == [254, 256, 90] and e263["error"]["type"] == "struct.error"
    assert e263["error"]["message"] == "ubyte format requires 0 <= number <= 255"
    assert by_name(splits, "spec_6_6_mtu262_len600_reference")["outcome"]["chunk_lens"] == [253, 255, 92]
    m247 = by_name(splits, "mtu247_len61438_max_reference")
    assert len(m247["outcome"]["containers"]) == 256
    assert by_name(splits, "mtu247_len61439_max_plus1_reference")["outcome"]["error"]["type"] == "ValueError"

    kx = by_name(families["key_exchange"], "rfc_keys_exchange")
    v = kx["values"]
    assert v["central_x25519_public"] == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
    assert v["peripheral_x25519_public"] == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"
    assert v["shared_secret"] == "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
    assert v["session_key"] == "12e68d830b3802896b9f0948a4f5fe5a"
    assert v["session_key_with_swapped_salt"] == "6b23601f4c3e9ce28269cd11f3cf0b09"
    assert v["peripheral_ed25519_public"] == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    sig = (
        "21e1fd6899395fcddad2e8c47c1559d360962fd6aea958a705e887a3063acf94"
        "507d3b284813b1a8a2b5e7e570dd44686941f768604fa72ea6b10d5c369a6703"
    )
    assert v["signature"] == sig
    steps = {s["step"]: s for s in kx["steps"]}
    assert steps[1]["payload_hex"] == "01" + v["central_x25519_public"]
    assert steps[1]["container_hex"] == "0200d821" + steps[1]["payload_hex"]
    assert steps[2]["payload_hex"] == "02" + v["peripheral_x25519_public"] + sig + v["peripheral_ed25519_public"]
    assert steps[2]["container_hex"].startswith("0200d881")
    assert steps[3]["payload_hex"] == (
        "03000102030405060708090a0bdeab3e3f1abac538d48c34b53f5dfbf9a10f3b100a97271990fc4feb34984228"
    )
    assert steps[4]["payload_hex"] == (
        "040c0d0e0f1011121314151617a8c38de0e9e241a418051789fa9f9a99c149db82f3c0bf86d68efc3c97d396a3"
    )

    session = families["session"]
    assert by_name(session, "nonce_ctr00000000_c2p")["nonce_hex"] == "000000000000000000000000"
    assert by_name(session, "nonce_ctr01020304_p2c")["nonce_hex"] == "040302010100000000000000"
    e0 = "000000009cf7d7150c42a6bf48b246912998ab4473c7ea2df3ba26f3bc8c6fa37d7401"
    assert by_name(session, "encrypt_echo_hello_central_ctr0")["frame_hex"] == e0
    assert by_name(session, "encrypted_echo_request_as_container_tid3")["containers"] == ["030000230023" + e0]
    assert by_name(session, "encrypt_echo_hello_central_ctr1")["frame_hex"] == (
        "0100000031494c30e582ce26f3500e51ecdc429b8ed06b11730bff9e3c0b96f22db879"
    )
    assert by_name(session, "encrypt_echo_hello_peripheral_ctr0")["frame_hex"] == (
        "0000000094b9b99b969c57df80be879f2458ccc9bc2474331c8760b2b702d566ec7be0"
    )
    replay = by_name(session, "decrypt_peripheral_replay_and_tamper")["steps"][1]["reference"]
    assert replay == {"error": {"type": "RuntimeError", "message": "Replay detected: counter=0"}}

    assembly = families["assembly"]
    assert by_name(assembly, "unknown_type_after_first")["reference"] == [None, b"abcd".hex(), None]
    assert by_name(assembly, "first_payload_exceeds_total")["reference"] == [b"ab".hex()]
    assert by_name(assembly, "empty_payload")["reference"] == [""]

    invalid = families["invalid"]
    assert by_name(invalid, "command_data_truncated")["reference"]["result"]["data_hex"] == b"xy".hex()
    assert by_name(invalid, "command_reserved_bits_request")["reference"]["result"]["cmd_type"] == "REQUEST"
    zero = by_name(invalid, "kx_central_peer_key_all_zero")["reference"]["error"]
    assert zero["type"] == "ValueError" and zero["message"].startswith("Error computing shared key")


# --------------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------------

FAMILIES = {
    "splits": gen_splits,
    "tid_wrap": gen_tid_wrap,
    "control": gen_control,
    "commands": gen_commands,
    "key_exchange": gen_key_exchange,
    "session": gen_session,
    "invalid": gen_invalid,
    "assembly": gen_assembly,
}


def render(family: str, cases: list[dict]) -> str:
    doc = {
        "generator": GENERATOR,
        "reference": f"{REFERENCE_PACKAGE} {REFERENCE_VERSION}",
        "family": family,
        "schema_version": 1,
        "cases": cases,
    }
    return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n"


def generate(out_dir: Path) -> list[Path]:
    families = {name: fn() for name, fn in FAMILIES.items()}
    check_spec(families)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, cases in families.items():
        path = out_dir / f"{name}.json"
        path.write_text(render(name, cases), encoding="utf-8", newline="\n")
        written.append(path)
    return written


# Vector files in testdata/vectors/ that do not come from the reference: blerpc-rs extensions,
# generated and checked by their own scripts (see tools/vectors/check.sh).
OWN_VECTOR_FILES = {"large_messages.json", "long_containers.json"}


def check(committed: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        problems = []
        expected = {p.name for p in fresh.glob("*.json")}
        present = {p.name for p in committed.glob("*.json")} if committed.is_dir() else set()
        # Our own extension's vectors have their own generator (tools/vectors/large.py).
        present -= OWN_VECTOR_FILES
        for name in sorted(expected - present):
            problems.append(f"missing: {committed / name}")
        for name in sorted(present - expected):
            problems.append(f"unexpected (not generated): {committed / name}")
        for name in sorted(expected & present):
            new = (fresh / name).read_text(encoding="utf-8")
            old = (committed / name).read_text(encoding="utf-8")
            if new != old:
                diff = list(
                    difflib.unified_diff(old.splitlines(), new.splitlines(), f"committed/{name}", f"generated/{name}", n=1, lineterm="")
                )
                changed = sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
                problems.append(f"differs: {name} ({changed} changed lines)\n" + "\n".join(diff[:40]))
        if problems:
            print("vectors are out of date; run: python tools/vectors/gen.py --out testdata/vectors", file=sys.stderr)
            for problem in problems:
                print(problem, file=sys.stderr)
            return 1
    print(f"ok: {len(expected)} vector files in {committed} match the reference")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: testdata/vectors)")
    parser.add_argument("--check", action="store_true", help="regenerate into a temp dir and compare with --out")
    args = parser.parse_args()
    if args.check:
        return check(args.out)
    for path in generate(args.out):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
