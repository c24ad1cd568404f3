"""A GATT link on Bumble: Bumble as the Python app's BLE stack (the central), on Bumble's
virtual controllers, against the Rust firmware's peripheral (``blerpc-fw-linux peripheral``),
started as tools/firmware/bumble_run.py starts them (its helpers, reused). The twelve
functional tests through ``blerpc.connect_gatt``, and a disconnection mid-call.

Needs the firmware's Linux build: ``BLERPC_FW_LINUX`` names it (tools/bindings/bumble.sh,
run by the bumble step of tools/firmware/check.sh, which builds it). Skipped without it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Iterator, Tuple

import pytest
from conftest import bounded
from demo_pb import echo_request
from functional import echo, the_twelve_functional_tests

import blerpc

FW = os.environ.get("BLERPC_FW_LINUX", "")
pytestmark = pytest.mark.skipif(
    not FW, reason="BLERPC_FW_LINUX is not set: run by tools/bindings/bumble.sh (tools/firmware/check.sh bumble)"
)

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools" / "firmware"))

if FW:
    import bumble_run
    from bumble.device import Device
    from bumble.hci import Address
    from bumble.transport import open_transport
    from bumble_link import CentralLink, connect_central


class BumbleGattLink(blerpc.GattLink):
    """The app's side: a Bumble central's connection to the bleRPC characteristic."""

    def __init__(self, link: "CentralLink") -> None:
        self._link = link

    def att_mtu(self) -> int:
        return self._link.mtu

    def peer_id(self) -> str:
        return f"ble://{self._link.connection.peer_address}"

    async def write_without_response(self, pdu: bytes) -> None:
        await self._link.characteristic.write_value(pdu, with_response=False)

    async def disconnect(self) -> None:
        await self._link.connection.disconnect()


@pytest.fixture
def peripheral(tmp_path: Path) -> Iterator[Tuple[int, str, subprocess.Popen]]:
    """Two linked virtual controllers and the firmware's peripheral on the first: yields the
    second controller's port, the peripheral's identity key and its process."""
    procs = bumble_run.Procs()
    try:
        a, b = bumble_run.controllers(procs, sys.executable)
        proc = procs.start(
            [FW, "peripheral", "--hci", f"127.0.0.1:{a}"],
            stdout=subprocess.PIPE,
            stderr=open(tmp_path / "peripheral.log", "wb"),
        )
        yield b, bumble_run.read_identity(proc, 30), proc
    finally:
        procs.stop()


@asynccontextmanager
async def open_gatt(port: int, key: str) -> AsyncIterator[Tuple[blerpc.Connection, "CentralLink"]]:
    """The app's connection: Bumble finds, connects and subscribes, the binding runs bleRPC."""
    async with await open_transport(f"tcp-client:127.0.0.1:{port}") as hci:
        device = Device.with_hci("bumble-app", Address("F0:F1:F2:F3:F4:F6"), hci.source, hci.sink)
        await device.power_on()
        link = await connect_central(device, 20)
        inbox = blerpc.GattInbox()
        link.connection.on("disconnection", lambda reason: inbox.disconnected(f"HCI reason {reason}"))
        await link.peer.subscribe(link.characteristic, lambda value: inbox.notification(bytes(value)))
        conn = await blerpc.connect_gatt(BumbleGattLink(link), inbox, blerpc.ConnectOptions(trust_key=key))
        try:
            yield conn, link
        finally:
            await conn.disconnect()


@pytest.mark.asyncio
@bounded(120)
async def test_the_twelve_functional_tests_over_bumble(peripheral) -> None:
    port, key, _ = peripheral
    async with open_gatt(port, key) as (conn, link):
        info = conn.info()
        assert info.encrypted and info.peer_identity == key
        assert info.att_mtu == link.mtu == 247
        await the_twelve_functional_tests(conn)


@pytest.mark.asyncio
@bounded(60)
async def test_a_disconnection_mid_call_fails_the_call_promptly(peripheral) -> None:
    port, key, proc = peripheral
    async with open_gatt(port, key) as (conn, link):
        assert await echo(conn, "before") == "before"
        # The peripheral's host paused: the call stays in flight (its controller keeps the link).
        proc.send_signal(signal.SIGSTOP)
        try:
            call = asyncio.create_task(conn.call("echo", echo_request("in flight")))
            await asyncio.sleep(0.3)
            assert not call.done()
            start = time.monotonic()
            await link.connection.disconnect()  # the app's stack drops the link
            with pytest.raises(blerpc.BlerpcError.Connection) as e:
                await call
            assert time.monotonic() - start < 2
            assert e.value.code == "LINK_CLOSED"
            await conn.wait_closed()
        finally:
            proc.send_signal(signal.SIGCONT)


@pytest.mark.asyncio
@bounded(180)
async def test_a_field_report_over_bumble_records_the_link_and_a_reconnect(peripheral, tmp_path: Path) -> None:
    """``blerpc report``'s run through the binding, over Bumble against the firmware: the link as
    the firmware's BLE stack (trouble-host) reports it, before and after; the app's stack drops
    the link once mid-run, and the report counts exactly that reconnect. With
    ``BLERPC_REPORT_OUT`` set, the report is written there (``docs/examples/report-bumble``)."""
    import bumble

    port, key, _ = peripheral
    out = Path(os.environ.get("BLERPC_REPORT_OUT") or tmp_path / "report")
    async with await open_transport(f"tcp-client:127.0.0.1:{port}") as hci:
        device = Device.with_hci("bumble-app", Address("F0:F1:F2:F3:F4:F7"), hci.source, hci.sink)
        await device.power_on()
        links: list = []

        async def connect() -> blerpc.Connection:
            link = await connect_central(device, 20)
            links.append(link)
            inbox = blerpc.GattInbox()
            link.connection.on("disconnection", lambda reason: inbox.disconnected(f"HCI reason {reason}"))
            await link.peer.subscribe(link.characteristic, lambda value: inbox.notification(bytes(value)))
            return await blerpc.connect_gatt(BumbleGattLink(link), inbox, blerpc.ConnectOptions(trust_key=key))

        async def drop_once() -> None:
            await asyncio.sleep(3)
            await links[-1].connection.disconnect()  # the app's stack drops the link mid-run

        dropper = asyncio.create_task(drop_once())
        options = blerpc.ReportOptions(
            url="ble://01:02:03:04:05:C1",
            kind="ble",
            duration_ms=8000,
            ble_adapter=f"Bumble {bumble.__version__}, link-relay virtual controller",
            board="blerpc-fw-linux (the firmware's peripheral on a Bumble virtual controller)",
            distance="none: virtual controllers",
            note="tests/test_bumble.py: the app's stack drops the link once, 3 s in",
            out_dir=str(out),
        )
        r = await blerpc.report(connect, options)
        await dropper
    assert r["schema"] == "blerpc-report/1"
    assert r["environment"]["ble_adapter"].startswith("Bumble ")
    assert r["link"]["kind"] == "ble" and r["link"]["encrypted"] is True
    assert r["link"]["peer_identity"] == key
    assert r["link"]["att_mtu"] == 247
    # The link as the firmware's stack reports it: Bumble's connection parameters.
    for side in ("before", "after"):
        d = r["device"][side]
        assert isinstance(d["conn_interval_us"], int) and d["conn_interval_us"] >= 7500, d
        assert isinstance(d["supervision_timeout_ms"], int), d
        assert d["att_mtu"] == 247, d
        assert d["version"] and d["build_id"], d
    before, after = r["device"]["before"], r["device"]["after"]
    assert after["connections"] == before["connections"] + 1
    assert after["calls"] > before["calls"]
    # Exactly the one drop: one reconnect with its reason, one failed call.
    assert len(r["reconnects"]) == 1, r["reconnects"]
    assert isinstance(r["reconnects"][0]["reconnected_after_ms"], (int, float)), r["reconnects"]
    assert sum(r["failures"].values()) == 1, r["failures"]
    assert r["run"]["calls"] > 20, r["run"]
    assert r["latency"]["echo"]["count"] > 0, r["latency"]
    for name in ("report.json", "report.md", "latency-over-time.svg", "latency-distribution.svg"):
        assert (out / name).stat().st_size > 0, name
    try:
        import jsonschema_rs
    except ImportError:  # tools/report/schema-check.sh checks the kept example
        return
    schema = json.loads((Path(__file__).resolve().parents[3] / "docs" / "report.schema.json").read_text())
    errors = [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(r)]
    assert not errors, errors
