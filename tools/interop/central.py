"""A bleRPC central built on the reference library (blerpc-protocol 0.8.0), calling a bleRPC
peripheral over TCP: the setup sequence of the reference centrals (TIMEOUT, CAPABILITIES, key
exchange with the identity pinned), then the five demo commands.

    python tools/interop/central.py --connect 127.0.0.1:9000 --identity-pub HEX

Prints one PASS/FAIL line per check; exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from blerpc_protocol import (
    CAPABILITY_FLAG_ENCRYPTION_SUPPORTED,
    CommandPacket,
    CommandType,
    ContainerAssembler,
    ContainerSplitter,
    ContainerType,
    ControlCmd,
    make_capabilities_request,
    make_key_exchange,
    make_stream_end_c2p,
    make_timeout_request,
)
from blerpc_protocol.crypto import central_perform_key_exchange

from refnet import ATT_MTU, int32, pb_bytes, pb_decode, pb_uint, read_container, write_containers

TIMEOUT_S = 5.0


class Central:
    def __init__(self, reader, writer, identity: bytes):
        self.reader, self.writer = reader, writer
        self.splitter = ContainerSplitter(mtu=ATT_MTU)
        self.identity = identity
        self.session = None

    async def control(self, container, want: ControlCmd) -> bytes:
        write_containers(self.writer, [container])
        await self.writer.drain()
        while True:
            c = await asyncio.wait_for(read_container(self.reader), TIMEOUT_S)
            if c.container_type == ContainerType.CONTROL and c.control_cmd == want:
                return c.payload
            if c.container_type == ContainerType.CONTROL and c.control_cmd == ControlCmd.ERROR:
                raise RuntimeError(f"peripheral ERROR 0x{c.payload[0]:02x}")

    async def setup(self) -> None:
        tid = self.splitter.next_transaction_id()
        p = await self.control(make_timeout_request(tid), ControlCmd.TIMEOUT)
        assert len(p) == 2, "TIMEOUT reply must be 2 bytes"
        tid = self.splitter.next_transaction_id()
        caps = await self.control(make_capabilities_request(tid), ControlCmd.CAPABILITIES)
        flags = int.from_bytes(caps[4:6], "little")
        # Kept for the checks of blerpc-rs extensions (e.g. DIAGNOSTICS, bit 7).
        self.capability_flags = flags
        if not flags & CAPABILITY_FLAG_ENCRYPTION_SUPPORTED:
            raise RuntimeError("peripheral does not offer encryption")

        async def send(payload: bytes) -> None:
            tid = self.splitter.next_transaction_id()
            write_containers(self.writer, [make_key_exchange(tid, payload)])
            await self.writer.drain()

        async def receive() -> bytes:
            while True:
                c = await asyncio.wait_for(read_container(self.reader), TIMEOUT_S)
                if c.container_type == ContainerType.CONTROL and c.control_cmd == ControlCmd.KEY_EXCHANGE:
                    return c.payload

        def verify(pub: bytes) -> bool:
            return pub == self.identity

        self.session = await central_perform_key_exchange(send, receive, verify_key_cb=verify)

    def send_request(self, name: str, data: bytes) -> None:
        pkt = CommandPacket(cmd_type=CommandType.REQUEST, cmd_name=name, data=data).serialize()
        write_containers(self.writer, self.splitter.split(self.session.encrypt(pkt)))

    async def read_message(self):
        """The next completed message (decrypted command) or a control container."""
        assembler = ContainerAssembler()
        while True:
            c = await asyncio.wait_for(read_container(self.reader), TIMEOUT_S)
            if c.container_type == ContainerType.CONTROL:
                if c.control_cmd == ControlCmd.ERROR:
                    raise RuntimeError(f"peripheral ERROR 0x{c.payload[0]:02x}")
                return c
            done = assembler.feed(c)
            if done is not None:
                return CommandPacket.deserialize(self.session.decrypt(done))

    async def call(self, name: str, data: bytes) -> bytes:
        self.send_request(name, data)
        await self.writer.drain()
        while True:
            m = await self.read_message()
            if isinstance(m, CommandPacket) and m.cmd_type == CommandType.RESPONSE and m.cmd_name == name:
                return m.data

    async def stream_receive(self, name: str, data: bytes) -> list[bytes]:
        self.send_request(name, data)
        await self.writer.drain()
        items = []
        while True:
            m = await self.read_message()
            if isinstance(m, CommandPacket):
                items.append(m.data)
            elif m.control_cmd == ControlCmd.STREAM_END_P2C:
                return items

    async def stream_send(self, name: str, items: list[bytes]) -> bytes:
        for item in items:
            self.send_request(name, item)
        write_containers(self.writer, [make_stream_end_c2p(self.splitter.next_transaction_id())])
        await self.writer.drain()
        return await self.call_response(name)

    async def call_response(self, name: str) -> bytes:
        while True:
            m = await self.read_message()
            if isinstance(m, CommandPacket) and m.cmd_name == name:
                return m.data


async def run(args) -> int:
    host, port = args.connect.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    c = Central(reader, writer, bytes.fromhex(args.identity_pub))
    failures = 0

    def check(name: str, ok: bool, detail: str = "") -> None:
        nonlocal failures
        print(f"{'PASS' if ok else 'FAIL'} {name}{' ' + detail if detail else ''}", flush=True)
        failures += 0 if ok else 1

    await c.setup()
    check("setup (TIMEOUT, CAPABILITIES, key exchange, pinned identity)", c.session is not None)
    r = pb_decode(await c.call("echo", pb_bytes(1, b"hello from python")))
    check("echo", r.get(1) == b"hello from python", repr(r))
    r = pb_decode(await c.call("echo", b""))
    check("echo_empty", r.get(1, b"") == b"", repr(r))
    r = pb_decode(await c.call("flash_read", pb_uint(1, 0) + pb_uint(2, 8192)))
    check("flash_read_8kb", len(r.get(2, b"")) == 8192, f"{len(r.get(2, b''))} bytes")
    payload = bytes(range(256)) * 4
    r = pb_decode(await c.call("data_write", pb_bytes(1, payload)))
    check("data_write_1kb", r.get(1) == 1024, repr(r))
    items = await c.stream_receive("counter_stream", pb_uint(1, 20))
    decoded = [pb_decode(i) for i in items]
    ok = len(decoded) == 20 and all(
        d.get(1, 0) == i and int32(d.get(2, 0)) == 10 * i for i, d in enumerate(decoded)
    )
    check("counter_stream_20", ok, f"{len(items)} items")
    ups = [pb_uint(1, i) + pb_uint(2, 10 * i) for i in range(20)]
    r = pb_decode(await c.stream_send("counter_upload", ups))
    check("counter_upload_20", r.get(1) == 20, repr(r))
    writer.close()
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connect", required=True, help="HOST:PORT")
    ap.add_argument("--identity-pub", required=True, help="the peripheral's Ed25519 public key, hex")
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
