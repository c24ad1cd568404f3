"""A bleRPC central on Bumble's host stack, built on the reference library (blerpc-protocol 0.8.0):
scans for the bleRPC service, connects, exchanges the ATT MTU (247), subscribes, runs the
reference setup (TIMEOUT, CAPABILITIES, key exchange with the peripheral's identity pinned),
then the reference's 12 functional tests; it also checks what the peripheral did on the link
(the connection-interval request 5 s after connect) and what it reports of the link when asked
(``blerpc.diagnostics``, announced by CAPABILITIES flag bit 7): the interval, latency and
supervision timeout Bumble's host applied, as trouble-host told the firmware.

    python tools/firmware/bumble_central.py --hci tcp-client:127.0.0.1:PORT --identity-pub HEX

The protocol side is tools/interop/central.py's ``Central`` unchanged, over bumble_link's
adapters. Prints a table and ``N passed, M failed``; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import bumble_link  # noqa: F401  (puts tools/interop on the path)
from bumble.device import Device
from bumble.hci import Address
from bumble.transport import open_transport
from bumble_link import ATT_MTU, PduWriter, connect_central, pdu_reader
from central import Central
from refnet import int32, pb_bytes, pb_decode, pb_uint

# The reference's functional tests (benchmarks.md §1, central_py/tests/test_integration.py), with
# its parameters: the same list as blerpc_demo::functional::TESTS.
PATTERN = bytes(i % 256 for i in range(8192))


async def echo(c: Central, message: bytes) -> str | None:
    r = pb_decode(await c.call("echo", pb_bytes(1, message)))
    got = r.get(1, b"")
    return None if got == message else f"echoed {len(got)} bytes, sent {len(message)}"


async def flash_read(c: Central, length: int) -> str | None:
    r = pb_decode(await c.call("flash_read", pb_uint(1, 0) + pb_uint(2, length)))
    data = r.get(2, b"")
    if len(data) != length:
        return f"got {len(data)} bytes, asked {length}"
    # The firmware's flash image (the Linux build's synthetic one): byte i = (i*31 + 7) mod 256.
    want = bytes((i * 31 + 7) % 256 for i in range(length))
    return None if data == want else "flash bytes differ from the image"


async def data_write(c: Central, n: int) -> str | None:
    r = pb_decode(await c.call("data_write", pb_bytes(1, PATTERN[:n])))
    return None if r.get(1, 0) == n else f"peripheral counted {r.get(1, 0)}, sent {n}"


async def counter_stream(c: Central, count: int) -> str | None:
    items = [pb_decode(i) for i in await c.stream_receive("counter_stream", pb_uint(1, count))]
    if len(items) != count:
        return f"{len(items)} items, expected {count}"
    for i, d in enumerate(items):
        if d.get(1, 0) != i or int32(d.get(2, 0)) != 10 * i:
            return f"item {i} is {d}"
    return None


async def counter_upload(c: Central, count: int) -> str | None:
    ups = [pb_uint(1, i) + pb_uint(2, 10 * i) for i in range(count)]
    r = pb_decode(await c.stream_send("counter_upload", ups))
    return None if r.get(1, 0) == count else f"received_count {r.get(1, 0)}, sent {count}"


DIAGNOSTICS_FLAG = 1 << 7


async def diagnostics(c: Central, connection, tests: int) -> tuple[str, str | None]:
    """Asks the firmware for its diagnostics and compares its link with Bumble's view."""
    if not c.capability_flags & DIAGNOSTICS_FLAG:
        return "diagnostics", "DIAGNOSTICS (flag bit 7) not announced"
    try:
        d = pb_decode(await c.call("blerpc.diagnostics", b""))
    except Exception as e:  # noqa: BLE001
        return "diagnostics", f"{type(e).__name__}: {e}"
    p = connection.parameters
    want = {
        1: round(p.connection_interval * 1000),  # conn_interval_us
        2: p.peripheral_latency,
        3: round(p.supervision_timeout),  # supervision_timeout_ms
        6: ATT_MTU,
        11: 1,  # connections since boot
    }
    wrong = [f"field {f}: {d.get(f)} (want {v})" for f, v in want.items() if d.get(f) != v]
    if d.get(12, 0) < tests:
        wrong.append(f"calls {d.get(12)} (want >= {tests})")
    name = (
        f"diagnostics: interval {d.get(1)} us, latency {d.get(2)}, supervision {d.get(3)} ms, "
        f"PHY {d.get(4)}, data length {d.get(5)}, RSSI {'given' if 7 in d else 'unavailable'}"
    )
    return name, "; ".join(wrong) or None


TESTS = [
    ("echo_basic", lambda c: echo(c, b"hello")),
    ("echo_empty", lambda c: echo(c, b"")),
    ("echo_max_length", lambda c: echo(c, b"A" * 256)),
    ("multi_container_echo", lambda c: echo(c, b"B" * 250)),
    ("flash_read_basic", lambda c: flash_read(c, 16)),
    ("flash_read_8kb", lambda c: flash_read(c, 8192)),
    ("data_write_basic", lambda c: data_write(c, 1024)),
    ("data_write_8kb", lambda c: data_write(c, 8192)),
    ("counter_stream", lambda c: counter_stream(c, 5)),
    ("counter_stream_large", lambda c: counter_stream(c, 20)),
    ("counter_upload", lambda c: counter_upload(c, 5)),
    ("counter_upload_large", lambda c: counter_upload(c, 20)),
]


async def run(args) -> int:
    rows: list[tuple[str, str, float]] = []

    def record(name: str, error: str | None, ms: float = 0.0) -> None:
        rows.append((name, "pass" if error is None else f"FAIL: {error}", ms))

    async with await open_transport(args.hci) as hci:
        device = Device.with_hci("bumble-central", Address("F0:F1:F2:F3:F4:F5"), hci.source, hci.sink)
        await device.power_on()

        try:
            link = await connect_central(device, args.timeout)
        except LookupError as e:
            record("GATT discovery", str(e))
            return report(rows)
        connection, peer, char = link.connection, link.peer, link.characteristic
        connected_at = time.monotonic()
        updates: list[tuple[float, float]] = []

        def on_update() -> None:
            updates.append((time.monotonic() - connected_at, connection.parameters.connection_interval))

        connection.on("connection_parameters_update", on_update)
        record("scan: the bleRPC service UUID advertised", None)
        record("ATT MTU exchange", None if link.mtu == ATT_MTU else f"ATT MTU {link.mtu}, want {ATT_MTU}")
        record("GATT discovery (service, characteristic)", None)

        reader = pdu_reader()
        await peer.subscribe(char, lambda value: reader.feed_data(bytes(value)))
        record("subscribe (CCC notifications)", None)

        async def send(pdu: bytes) -> None:
            await char.write_value(pdu, with_response=False)

        c = Central(reader, PduWriter(send), bytes.fromhex(args.identity_pub))
        try:
            await c.setup()
            record("setup: TIMEOUT, CAPABILITIES, key exchange (identity pinned)", None if c.session else "no session")
        except Exception as e:  # noqa: BLE001 - every failure is a reported row
            record("setup", f"{type(e).__name__}: {e}")
            return report(rows)

        for name, test in TESTS:
            start = time.monotonic()
            try:
                error = await asyncio.wait_for(test(c), args.timeout)
            except Exception as e:  # noqa: BLE001
                error = f"{type(e).__name__}: {e}"
            record(name, error, (time.monotonic() - start) * 1000)

        # The firmware asks for 15-30 ms five seconds after connect (Zephyr's
        # BT_CONN_PARAM_UPDATE_TIMEOUT); Bumble's central accepts and applies it.
        deadline = connected_at + 8.0
        while not updates and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if updates:
            at, interval = updates[0]
            ok = 4.5 <= at <= 7.5 and 15.0 <= interval <= 30.0
            record(
                f"connection interval request ({interval:g} ms at {at:.1f} s)",
                None if ok else "want 15-30 ms about 5 s after connect",
            )
        else:
            record("connection interval request", "none within 8 s of connect")
        record(*await diagnostics(c, connection, len(TESTS)))
        await connection.disconnect()
    return report(rows)


def report(rows) -> int:
    print("| check | result | ms |")
    print("|---|---|---:|")
    for name, result, ms in rows:
        print(f"| {name} | {result} | {ms:.0f} |")
    failed = sum(1 for _, r, _ in rows if r != "pass")
    print(f"{len(rows) - failed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hci", required=True, help="Bumble transport, e.g. tcp-client:127.0.0.1:PORT")
    ap.add_argument("--identity-pub", required=True, help="the peripheral's Ed25519 public key, hex")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per step")
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
