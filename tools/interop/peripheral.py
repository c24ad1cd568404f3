"""A bleRPC peripheral built on the reference library (blerpc-protocol 0.8.0), serving the demo
service over TCP to a bleRPC central (e.g. the blerpc-rs client), one connection at a time, as
the reference Python peripheral does (65535/65535 capabilities, encryption required).

    python tools/interop/peripheral.py --listen 127.0.0.1:0 --seed HEX

Prints `LISTENING <port> <identity public key hex>` once ready, then serves until killed.
With `--dial HOST:PORT` it connects out instead (to a device gateway) and serves over that
connection, dialling again 0.5 s after it closes: prints `DIALLING HOST:PORT <key hex>`.
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
    make_capabilities_response,
    make_error_response,
    make_key_exchange,
    make_stream_end_p2c,
    make_timeout_response,
)
from blerpc_protocol.crypto import BlerpcCrypto, PeripheralKeyExchange

from refnet import ATT_MTU, pb_bytes, pb_decode, pb_uint, read_container, write_containers


class Connection:
    def __init__(self, reader, writer, identity):
        self.reader, self.writer = reader, writer
        self.splitter = ContainerSplitter(mtu=ATT_MTU)
        self.assembler = ContainerAssembler()
        self.kx = PeripheralKeyExchange(identity)
        self.session = None
        self.uploads = 0

    def respond(self, tid: int | None, name: str, data: bytes) -> None:
        pkt = CommandPacket(cmd_type=CommandType.RESPONSE, cmd_name=name, data=data).serialize()
        write_containers(self.writer, self.splitter.split(self.session.encrypt(pkt), transaction_id=tid))

    async def serve(self) -> None:
        while True:
            try:
                c = await read_container(self.reader)
            except asyncio.IncompleteReadError:
                return
            if c.container_type == ContainerType.CONTROL:
                self.on_control(c)
            else:
                done = self.assembler.feed(c)
                if done is not None:
                    self.on_request(c.transaction_id, done)
            await self.writer.drain()

    def on_control(self, c) -> None:
        tid = c.transaction_id
        if c.control_cmd == ControlCmd.TIMEOUT:
            write_containers(self.writer, [make_timeout_response(tid, 100)])
        elif c.control_cmd == ControlCmd.CAPABILITIES:
            write_containers(
                self.writer,
                [make_capabilities_response(tid, 65535, 65535, CAPABILITY_FLAG_ENCRYPTION_SUPPORTED)],
            )
        elif c.control_cmd == ControlCmd.KEY_EXCHANGE:
            reply, session = self.kx.handle_step(c.payload)
            write_containers(self.writer, [make_key_exchange(tid, reply)])
            if session is not None:
                self.session = session
        elif c.control_cmd == ControlCmd.STREAM_END_C2P:
            count, self.uploads = self.uploads, 0
            self.respond(None, "counter_upload", pb_uint(1, count))

    def on_request(self, tid: int, wire: bytes) -> None:
        if self.session is None:
            return  # plaintext while encryption is required: rejected (silently, as the reference)
        cmd = CommandPacket.deserialize(self.session.decrypt(wire))
        req = pb_decode(cmd.data)
        if cmd.cmd_name == "echo":
            self.respond(tid, "echo", pb_bytes(1, req.get(1, b"")))
        elif cmd.cmd_name == "flash_read":
            addr, length = req.get(1, 0), req.get(2, 0)
            if length > 8192:
                write_containers(self.writer, [make_error_response(tid, 0x0A)])
                return
            data = bytes((addr + i) & 0xFF for i in range(length))
            self.respond(tid, "flash_read", pb_uint(1, addr) + pb_bytes(2, data))
        elif cmd.cmd_name == "data_write":
            self.respond(tid, "data_write", pb_uint(1, len(req.get(1, b""))))
        elif cmd.cmd_name == "counter_stream":
            for i in range(req.get(1, 0)):
                self.respond(None, "counter_stream", pb_uint(1, i) + pb_uint(2, 10 * i))
            write_containers(self.writer, [make_stream_end_p2c(self.splitter.next_transaction_id())])
        elif cmd.cmd_name == "counter_upload":
            self.uploads += 1


async def run(args) -> int:
    identity = BlerpcCrypto.ed25519_private_from_bytes(bytes.fromhex(args.seed))
    public = BlerpcCrypto.ed25519_public_bytes(identity)

    async def handle(reader, writer):
        try:
            await Connection(reader, writer, identity).serve()
        finally:
            writer.close()

    if args.dial:
        host, port = args.dial.rsplit(":", 1)
        print(f"DIALLING {args.dial} {public.hex()}", flush=True)
        while True:
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
            except OSError:
                await asyncio.sleep(0.5)
                continue
            try:
                await handle(reader, writer)
            except (OSError, asyncio.IncompleteReadError):
                pass
            await asyncio.sleep(0.5)

    host, port = args.listen.rsplit(":", 1)
    server = await asyncio.start_server(handle, host, int(port))
    bound = server.sockets[0].getsockname()[1]
    print(f"LISTENING {bound} {public.hex()}", flush=True)
    async with server:
        await server.serve_forever()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any)")
    ap.add_argument("--dial", help="HOST:PORT: connect out (to a device gateway) instead of listening")
    ap.add_argument("--seed", required=True, help="the Ed25519 identity seed, 32 bytes hex")
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
