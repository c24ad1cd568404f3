#!/usr/bin/env python3
"""Reference side of the `codec` benchmark: the same work as crates/blerpc-bench/src/codec/, done
with the reference library (blerpc-protocol 0.8.0 on PyPI), timed with perf_counter_ns.

Prints one JSON object on stdout:
  {"library": ..., "python": ..., "cryptography": ...,
   "results": {"enc_8k": {"iters": N, "samples_ns_per_op": [...]}, ...}}
Progress goes to stderr. Run by `cargo run --release -p blerpc-bench -- codec`; standalone:
  python codec_ref.py --samples 5 --sample-ms 20
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from importlib import metadata

from blerpc_protocol import (
    BlerpcCryptoSession,
    CentralKeyExchange,
    CommandPacket,
    CommandType,
    Container,
    ContainerAssembler,
    ContainerSplitter,
    PeripheralKeyExchange,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

MTU = 247
FLASH_LEN = 8192
ECHO_DATA = b"\x0a\x05hello"
SESSION_KEY = b"blerpc-bench-key"
WORKLOADS = ("enc_8k", "enc_echo", "plain_8k", "kx")


def flash_read_response() -> bytes:
    """FlashReadResponse{address: 0 (omitted), data: 8192 B}: 0x12, varint 8192, data."""
    return b"\x12\x80\x40" + bytes((i * 31 + 7) & 0xFF for i in range(FLASH_LEN))


class CodecPath:
    """command -> (encrypt) -> split -> PDU bytes -> parse -> assemble -> (decrypt) -> parse."""

    def __init__(self, workload: str):
        if workload == "enc_echo":
            self.kind, self.name, self.data = CommandType.REQUEST, "echo", ECHO_DATA
        else:
            self.kind, self.name, self.data = (
                CommandType.RESPONSE,
                "flash_read",
                flash_read_response(),
            )
        encrypted = workload != "plain_8k"
        # Responses travel P->C, requests C->P; one session object per endpoint, built once.
        sender_is_central = self.kind == CommandType.REQUEST
        self.tx = BlerpcCryptoSession(SESSION_KEY, is_central=sender_is_central) if encrypted else None
        self.rx = BlerpcCryptoSession(SESSION_KEY, is_central=not sender_is_central) if encrypted else None
        self.splitter = ContainerSplitter(mtu=MTU)
        self.assembler = ContainerAssembler()

    def run_once(self) -> CommandPacket:
        wire = CommandPacket(self.kind, self.name, self.data).serialize()
        if self.tx is not None:
            wire = self.tx.encrypt(wire)
        msg = None
        for c in self.splitter.split(wire):
            pdu = c.serialize()
            done = self.assembler.feed(Container.deserialize(pdu))
            if done is not None:
                msg = done
        if msg is None:
            raise RuntimeError("message did not complete")
        if self.rx is not None:
            msg = self.rx.decrypt(msg)
        got = CommandPacket.deserialize(msg)
        if got.cmd_type != self.kind or got.cmd_name != self.name or len(got.data) != len(self.data):
            raise RuntimeError("received a different command")
        return got

    def verify(self) -> None:
        n = len(self.splitter.split(self._wire_for_count()))
        expected = 1 if self.name == "echo" else 35
        if n != expected:
            raise RuntimeError(f"{n} containers, expected {expected}")
        got = self.run_once()
        if got.data != self.data:
            raise RuntimeError("round trip changed the data")

    def _wire_for_count(self) -> bytes:
        wire = CommandPacket(self.kind, self.name, self.data).serialize()
        return wire + bytes(20) if self.tx is not None else wire


class KeyExchange:
    """Full handshake with fresh ephemeral keys (OpenSSL RNG via `cryptography`)."""

    def __init__(self) -> None:
        # The peripheral's long-term identity is loaded once, as a server does.
        self.identity = Ed25519PrivateKey.generate()

    def run_once(self):
        central = CentralKeyExchange()
        step1 = central.start()
        periph = PeripheralKeyExchange(self.identity)
        step2 = periph.process_step1(step1)
        step3 = central.process_step2(step2)  # no verify callback: any valid signature
        step4, periph_session = periph.process_step3(step3)
        central_session = central.finish(step4)
        return central_session, periph_session

    def verify(self) -> None:
        c, p = self.run_once()
        if p.decrypt(c.encrypt(b"hello")) != b"hello":
            raise RuntimeError("sessions disagree")


def make(workload: str):
    return KeyExchange() if workload == "kx" else CodecPath(workload)


def calibrate(fn, sample_ms: float) -> int:
    """Smallest power of two of iterations whose batch takes at least sample_ms."""
    iters = 1
    while True:
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            fn()
        if time.perf_counter_ns() - t0 >= sample_ms * 1e6 or iters >= 1 << 24:
            return iters
        iters *= 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--sample-ms", type=float, default=20.0)
    ap.add_argument("--iters", type=int, default=0, help="iterations per sample (0: calibrate)")
    args = ap.parse_args()

    results = {}
    for name in args.workloads.split(","):
        if name not in WORKLOADS:
            raise SystemExit(f"unknown workload {name!r}")
        w = make(name)
        w.verify()  # full equality, outside the timed region
        fn = w.run_once
        # Untimed warm-up, the same 300 ms as the Rust side.
        t_warm = time.perf_counter_ns()
        while time.perf_counter_ns() - t_warm < 300e6:
            fn()
        iters = args.iters or calibrate(fn, args.sample_ms)
        samples = []
        # Like timeit: no cyclic GC pauses inside a sample (this can only favour the reference).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(args.samples):
                t0 = time.perf_counter_ns()
                for _ in range(iters):
                    fn()
                samples.append((time.perf_counter_ns() - t0) / iters)
        finally:
            if gc_was_enabled:
                gc.enable()
        results[name] = {"iters": iters, "samples_ns_per_op": samples}
        print(f"  python {name}: {iters} iters x {args.samples} samples", file=sys.stderr)

    print(
        json.dumps(
            {
                "library": "blerpc-protocol " + metadata.version("blerpc-protocol"),
                "cryptography": metadata.version("cryptography"),
                "openssl": _openssl_version(),
                "python": platform.python_implementation() + " " + platform.python_version(),
                "results": results,
            }
        )
    )
    return 0


def _openssl_version() -> str:
    try:
        from cryptography.hazmat.backends.openssl.backend import backend

        return backend.openssl_version_text()
    except Exception:  # noqa: BLE001 - informational only
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
