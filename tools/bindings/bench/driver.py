"""The Python side of tools/bindings/bench.sh: one run prints one JSON line per row.

    python driver.py latency URL KEY CALLS WARMUP
        echo calls through the `blerpc` package (wall time per call, median and 90th
        percentile: its completion queue), the same calls as UniFFI's own async method (its
        future polling), and the floors under them: the event loop woken by a socket (what
        any await of work done off the loop costs), an await of a Rust future that is ready
        at once (`next()` of an ended stream) and a synchronous FFI call (`is_closed()`).

    python driver.py cpu binding|reference URL KEY ECHO_CALLS FLASH_CALLS CONNECTS
        process CPU time (time.process_time: every thread, the binding's runtime thread too)
        per echo call, per 8 KB flash_read (encrypted: 35 PDUs at MTU 247) and per connect
        (setup and key exchange, then close), with the `blerpc` binding or with the reference
        library blerpc-protocol 0.8.0 (the interop central of tools/interop/central.py), on the
        same calls over the same link.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Awaitable, Callable, List

# EchoRequest { message: "hello" } (the codec workload's); the response is the same bytes.
ECHO = b"\x0a\x05hello"
FLASH_LEN = 8192


def row(name: str, times_ns: List[int]) -> None:
    times_ns.sort()
    at = lambda q: times_ns[round((len(times_ns) - 1) * q)] / 1000  # noqa: E731
    print(json.dumps({"row": name, "p50_us": round(at(0.5), 2), "p90_us": round(at(0.9), 2), "calls": len(times_ns)}), flush=True)


async def timed(op: Callable[[], Awaitable[object]], calls: int, warmup: int) -> List[int]:
    for _ in range(warmup):
        await op()
    times = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t = clock()
        await op()
        times.append(clock() - t)
    return times


async def latency(url: str, key: str, calls: int, warmup: int) -> None:
    import blerpc

    async with blerpc.connect(url, blerpc.ConnectOptions(trust_key=key)) as conn:

        async def echo() -> None:
            if await conn.call("echo", ECHO) != ECHO:
                raise RuntimeError("echo answered something else")

        row("python, await call", await timed(echo, calls, warmup))

        async def uniffi_echo() -> None:
            if await conn._raw.call("echo", ECHO, None) != ECHO:
                raise RuntimeError("echo answered something else")

        row("python, UniFFI await call", await timed(uniffi_echo, calls, warmup))
        row("python, loop woken by a socket", await timed(socket_wakeup(), calls, warmup))

        # An ended stream's next() is ready at the first poll: the cost of one UniFFI await.
        raw = await conn._raw.server_stream("counter_stream", b"")
        await raw.cancel()
        row("python, ready await", await timed(raw.next, calls, warmup))

        async def sync_ffi() -> None:
            conn.is_closed()

        row("python, sync FFI call", await timed(sync_ffi, calls, warmup))

    # What one more optional argument (given none) would add to each call: the generated code
    # lowers it into a RustBuffer (an allocation through the FFI), which Rust frees; here
    # freed by a second FFI call, so this is an upper bound. Why the CancelToken is taken by
    # separate `*_cancellable` methods, not by an optional argument of `call`.
    from blerpc._ffi import blerpc_ffi as gen

    converter = gen._UniffiFfiConverterOptionalUInt32

    async def lower_none() -> None:
        converter.check_lower(None)
        converter.lower(None).free()

    row("python, one optional argument (none)", await timed(lower_none, calls, warmup))


def socket_wakeup() -> Callable[[], Awaitable[object]]:
    """The floor of any asyncio await on work done off the loop: a byte written to a socket
    pair, the loop's reader callback resolving a future, the task resumed (no thread, no FFI)."""
    import socket

    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    waiting: List[asyncio.Future] = []

    def readable() -> None:
        ours.recv(64)
        while waiting:
            waiting.pop().set_result(None)

    loop.add_reader(ours.fileno(), readable)

    async def op() -> None:
        waiter = loop.create_future()
        waiting.append(waiter)
        theirs.send(b"\x01")
        await waiter

    return op


def flash_request() -> bytes:
    # FlashReadRequest { address: 0 (omitted), length: 8192 }
    return b"\x10\x80\x40"


async def cpu_binding(url: str, key: str, echo_calls: int, flash_calls: int, connects: int) -> dict:
    import blerpc

    options = blerpc.ConnectOptions(trust_key=key)
    out = {}
    async with blerpc.connect(url, options) as conn:

        async def echo() -> None:
            if await conn.call("echo", ECHO) != ECHO:
                raise RuntimeError("echo answered something else")

        async def flash() -> None:
            reply = await conn.call("flash_read", flash_request())
            if len(reply) != FLASH_LEN + 3:
                raise RuntimeError(f"flash_read answered {len(reply)} bytes")

        out["echo"] = await per_op(echo, echo_calls)
        out["flash_read_8k"] = await per_op(flash, flash_calls)

    async def connect() -> None:
        conn = await blerpc.connect(url, options)
        if not conn.info().encrypted:
            raise RuntimeError("not encrypted")
        await conn.disconnect()

    out["connect"] = await per_op(connect, connects)
    return out


async def cpu_reference(url: str, key: str, echo_calls: int, flash_calls: int, connects: int) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "interop"))
    import central  # the reference central of the interop tests
    from refnet import pb_decode

    # No per-read timer: wait_for(..., None) awaits the read directly (the leanest use of the
    # reference central).
    central.TIMEOUT_S = None
    host, port = url.removeprefix("tcp://").rsplit(":", 1)
    identity = bytes.fromhex(key)

    async def open_central():
        reader, writer = await asyncio.open_connection(host, int(port))
        c = central.Central(reader, writer, identity)
        await c.setup()
        return c, writer

    out = {}
    c, writer = await open_central()

    async def echo() -> None:
        if await c.call("echo", ECHO) != ECHO:
            raise RuntimeError("echo answered something else")

    async def flash() -> None:
        reply = pb_decode(await c.call("flash_read", flash_request()))
        if len(reply.get(2, b"")) != FLASH_LEN:
            raise RuntimeError("flash_read answered something else")

    out["echo"] = await per_op(echo, echo_calls)
    out["flash_read_8k"] = await per_op(flash, flash_calls)
    writer.close()
    await writer.wait_closed()

    async def connect() -> None:
        _, w = await open_central()
        w.close()
        await w.wait_closed()

    out["connect"] = await per_op(connect, connects)
    return out


def runtime_thread_cpu() -> float:
    """CPU seconds of the binding's runtime thread (named blerpc-ffi), from /proc's schedstat
    (nanoseconds on a CPU); 0 without /proc."""
    total = 0
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/comm") as f:
                if f.read().strip() != "blerpc-ffi":
                    continue
            with open(f"/proc/self/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
    except OSError:
        return 0.0
    return total / 1e9


async def per_op(op: Callable[[], Awaitable[None]], n: int) -> dict:
    """CPU and wall time per operation over n of them, after n // 10 (at least 1) not timed,
    and the part of the CPU time spent on the binding's runtime thread."""
    for _ in range(max(1, n // 10)):
        await op()
    cpu, wall, rt = time.process_time(), time.perf_counter(), runtime_thread_cpu()
    for _ in range(n):
        await op()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    rt = runtime_thread_cpu() - rt
    return {"cpu_us": round(cpu / n * 1e6, 2), "runtime_thread_cpu_us": round(rt / n * 1e6, 2), "wall_us": round(wall / n * 1e6, 2), "n": n}


def main() -> int:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "latency":
        url, key, calls, warmup = args[0], args[1], int(args[2]), int(args[3])
        asyncio.run(latency(url, key, calls, warmup))
    elif mode == "cpu":
        lib, url, key = args[0], args[1], args[2]
        counts = [int(a) for a in args[3:6]]
        run = {"binding": cpu_binding, "reference": cpu_reference}[lib]
        result = asyncio.run(run(url, key, *counts))
        for workload, m in result.items():
            print(json.dumps({"lib": lib, "workload": workload, **m}), flush=True)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
