"""Helpers shared by the generators of blerpc-rs's own extension vectors (large.py, long.py).

Both build their bytes from the layouts documented in docs/protocol.md, independently of the Rust
code; this module holds the pieces whose layout the two extensions share (CONTROL containers,
the CAPABILITIES request, command packets, the session seal) and the --out / --check driver.
Only the standard library is used, plus AES-GCM from ``cryptography`` for ``seal``.
"""

from __future__ import annotations

import argparse
import hashlib
import struct
import sys
from pathlib import Path
from typing import Callable

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "testdata" / "vectors"

# The session key of the encrypted cases: the key-exchange vectors' session key (wire.md 6.5).
SESSION_KEY = bytes.fromhex("12e68d830b3802896b9f0948a4f5fe5a")


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def pattern(n: int, mul: int, add: int) -> bytes:
    """``n`` bytes, byte i = (i * mul + add) mod 256 (period 256, so built from one period)."""
    period = bytes((i * mul + add) & 0xFF for i in range(256))
    return (period * (n // 256 + 1))[:n]


def control(tid: int, flags: int, payload: bytes) -> bytes:
    """A CONTROL container: [tid][seq 0][flags][payload_len u8][payload]."""
    return bytes([tid, 0, flags, len(payload)]) + payload


def caps_request(flags: int) -> bytes:
    """The 6-byte CAPABILITIES request payload announcing ``flags``."""
    return struct.pack("<HHH", 0, 0, flags)


def command(response: bool, name: bytes, data: bytes) -> bytes:
    """A command packet; the extended form (type bit 0, u32 data_len) only beyond 65,535 bytes."""
    kind = 0x80 if response else 0x00
    if len(data) > 0xFFFF:
        return bytes([kind | 0x01, len(name)]) + name + struct.pack("<I", len(data)) + data
    return bytes([kind, len(name)]) + name + struct.pack("<H", len(data)) + data


def seal(key: bytes, counter: int, direction: int, plaintext: bytes) -> bytes:
    """counter u32 LE || AES-128-GCM(plaintext) || tag; nonce = counter || direction || 7 zeros."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = struct.pack("<I", counter) + bytes([direction]) + bytes(7)
    return struct.pack("<I", counter) + AESGCM(key).encrypt(nonce, plaintext, None)


def run(doc: str, file: str, script: str, render: Callable[[], str]) -> int:
    """The generators' command line: write ``file`` under --out, or --check it."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="compare with the committed file")
    args = parser.parse_args()
    path = args.out / file
    text = render()
    if args.check:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            print(f"{path} is out of date; run: python {script} --out {args.out}", file=sys.stderr)
            return 1
        print(f"ok: {path} matches the documented layout")
        return 0
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0
