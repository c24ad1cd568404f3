"""bleRPC central for Python: the blerpc-rs core (Rust) through UniFFI, with asyncio.

    import blerpc

    options = blerpc.ConnectOptions(trust_key="3b6a27bc…")      # 64 hex digits
    async with blerpc.connect("tcp://127.0.0.1:40731", options) as conn:
        reply = await conn.call("echo", EchoRequest(message="hi").SerializeToString())
        async with conn.server_stream("counter_stream", request) as items:
            async for item in items:
                ...

Requests and responses are protobuf bytes: encode your service's messages with your protobuf
runtime. Every failure is a ``BlerpcError`` (``BlerpcError.Setup``, ``.Call``,
``.Connection``, ``.InvalidArgument``) with ``code`` (the core's stable code, e.g.
``"TIMEOUT"``) and ``detail``.

This module is a thin idiomatic layer over the generated one (``blerpc._ffi``): async
iterators for server streams, ``async with`` for connections, streams and uploads. Cancelling
the task that awaits a call cancels the call; the connection stays usable.

A GATT link the app's own BLE stack provides (Bumble, bleak: see ``blerpc.bleak``) connects
with :func:`connect_gatt`: implement :class:`GattLink`, feed a :class:`GattInbox` from the
stack's callbacks. Pins can be kept in the app's own :class:`KeyStore`
(``ConnectOptions(key_store=...)``).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Dict, Generator, Optional, Type, TypeVar

from ._ffi.blerpc_ffi import (
    Completion,
    CompletionQueue,
    ConnectionInfo,
    ConnectOptions,
    GattInbox,
    GattLink,
    KeyStore,
    Pinned,
    ReportConnector,
    ReportOptions,
    container_len,
    uniffi_set_event_loop,
)
from ._ffi.blerpc_ffi import BidiStream as _BidiStream
from ._ffi.blerpc_ffi import Connection as _Connection
from ._ffi.blerpc_ffi import ResponseStream as _ResponseStream
from ._ffi.blerpc_ffi import Upload as _Upload
from ._ffi.blerpc_ffi import connect as _connect
from ._ffi.blerpc_ffi import connect_gatt as _connect_gatt
from ._ffi.blerpc_ffi import run_report as _run_report
from ._futures import install as _install_future_dropped

_install_future_dropped()

if TYPE_CHECKING:
    # What type checkers see of the generated error (which builds its subclasses at run time,
    # hidden from them): `except blerpc.BlerpcError.Call as e` gives `e.code`, `e.peer_code`.

    class BlerpcError(Exception):
        """Why a bleRPC operation failed: ``code`` (the core's stable code) and ``detail``."""

        code: str
        detail: str
        Setup: ClassVar[Type["_SetupError"]]
        Call: ClassVar[Type["_CallError"]]
        Connection: ClassVar[Type["_ConnectionError"]]
        InvalidArgument: ClassVar[Type["_InvalidArgumentError"]]

    class _SetupError(BlerpcError):
        """Setup failed or the peripheral's identity was refused."""

    class _CallError(BlerpcError):
        """The call failed; the connection goes on."""

        peer_code: Optional[int]

    class _ConnectionError(BlerpcError):
        """The connection is closed or its link was lost."""

    class _InvalidArgumentError(BlerpcError):
        """An argument was refused before anything was sent."""

else:
    from ._ffi.blerpc_ffi import BlerpcError

__all__ = [
    "BidiStream",
    "BlerpcError",
    "ConnectOptions",
    "Connection",
    "ConnectionInfo",
    "GattInbox",
    "GattLink",
    "KeyStore",
    "Pinned",
    "ReportOptions",
    "ServerStream",
    "Upload",
    "connect",
    "connect_gatt",
    "container_len",
    "report",
]


_S = TypeVar("_S", bound="_Scoped")


class _Scoped:
    """``async with`` for the objects below: the block gives the object itself, and its end
    calls ``_leave`` (told whether the block raised)."""

    async def _leave(self, failed: bool) -> None:
        raise NotImplementedError

    async def __aenter__(self: _S) -> _S:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self._leave(exc is not None)


class Connection(_Scoped):
    """A connection to one peripheral (from :func:`connect`).

    Calls may run concurrently: up to four in flight (a fifth at once fails with code
    ``TOO_MANY_CALLS``), one stream at a time (``STREAM_ACTIVE``). ``async with``
    disconnects at the end of the block.
    """

    def __init__(self, raw: _Connection) -> None:
        self._raw = raw

    async def call(self, command: str, request: bytes, deadline_ms: Optional[int] = None) -> bytes:
        """Calls ``command`` (the rpc's wire name, e.g. ``"echo"``) with the request message's
        protobuf bytes and returns the response's. With ``deadline_ms`` the call fails with
        code ``TIMEOUT`` if no answer came that many milliseconds from now (without it, the
        protocol's 5 s call timeout applies)."""
        completions = _Completions.of(asyncio.get_running_loop())
        if completions is None:
            return await self._raw.call(command, request, deadline_ms)
        if deadline_ms is None:
            return await completions.call(lambda q, t: self._raw.start_call(q, t, command, request))
        return await completions.call(
            lambda q, t: self._raw.start_call_until(q, t, command, request, deadline_ms)
        )

    def server_stream(self, command: str, request: bytes) -> "ServerStream":
        """A peripheral→central stream: ``async for item in conn.server_stream(...)``. The
        call starts on the first iteration; ``async with`` (or :meth:`ServerStream.aclose`)
        cancels it if it has not ended."""
        return ServerStream(self._raw, command, request)

    async def client_stream(self, command: str) -> "Upload":
        """A central→peripheral stream: ``await upload.send(item)`` for each item, then
        ``await upload.finish()`` for the response."""
        return Upload(await self._raw.client_stream(command))

    async def bidi_stream(self, command: str) -> "BidiStream":
        """A stream both ways (the streams extension): ``await stream.send(item)`` and
        ``await stream.finish()`` from one task while another reads the peripheral's items
        with ``async for``. ``async with`` cancels it at the end of the block unless it
        ended."""
        return BidiStream(await self._raw.bidi_stream(command))

    def info(self) -> ConnectionInfo:
        """What setup established: encryption, the peer's identity key, MTU and limits."""
        return self._raw.info()

    async def diagnostics(self) -> Dict[str, Any]:
        """The peripheral's diagnostics: the link as it sees it (interval, latency, supervision
        timeout, PHY, data length, ATT MTU, RSSI), uptime, build and version, counters and
        memory marks. Each field is its value or ``{"unavailable": "why"}``; a peripheral that
        does not announce the extension is not asked, and every field says so."""
        return json.loads(await self._raw.diagnostics())

    def is_closed(self) -> bool:
        """``True`` once the connection has closed (either side, or the link was lost)."""
        return self._raw.is_closed()

    async def disconnect(self) -> None:
        """Closes the connection; calls in flight and later ones fail with code ``CLOSED``."""
        await self._raw.disconnect()

    async def wait_closed(self) -> None:
        """Returns once the connection has closed (either side closed it, or the link was
        lost)."""
        await self._raw.wait_closed()

    async def _leave(self, failed: bool) -> None:
        await self.disconnect()


class _Completions:
    """The outcomes of this event loop's calls: one :class:`CompletionQueue` per loop, whose
    signal socket the loop watches (``add_reader``). A call crosses into Rust twice (started,
    then its outcome taken with the others waiting) instead of UniFFI's future polling, whose
    waker calls back into Python from the library's thread (both measured side by side in
    docs/benchmarks/bindings.txt)."""

    _per_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Optional[_Completions]]" = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: CompletionQueue, fd: int) -> None:
        # No reference to the loop: the loop (through its reader) holds this, not the reverse,
        # so a loop no longer used is freed with its queue.
        self._queue: Optional[CompletionQueue] = queue
        self._waiting: "dict[int, asyncio.Future[bytes]]" = {}
        self._tickets = itertools.count()
        loop.add_reader(fd, self._deliver)

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "Optional[_Completions]":
        """The loop's queue, made on first use; ``None`` where there is no signal socket to
        watch (not Unix, or a loop without ``add_reader``): calls then await UniFFI's
        futures."""
        try:
            return cls._per_loop[loop]
        except KeyError:
            pass
        made: Optional[_Completions] = None
        queue = CompletionQueue()
        fd = queue.signal_fd()
        if fd is not None:
            try:
                made = cls(loop, queue, fd)
            except NotImplementedError:
                made = None
        cls._per_loop[loop] = made
        return made

    @classmethod
    def release_all(cls) -> None:
        """At the interpreter's exit, frees the queues of the loops still alive (a loop left
        open, or closed but still referenced) while the generated module can: freed later,
        during the modules' teardown, a queue's finalizer found the library gone and printed
        an ignored ``AttributeError``."""
        for completions in list(cls._per_loop.values()):
            if completions is not None:
                completions._queue = None

    def _deliver(self) -> None:
        if self._queue is None:
            return
        for done in self._queue.take():
            waiter = self._waiting.pop(done.ticket, None)
            if waiter is None or waiter.done():
                continue
            if isinstance(done, Completion.RESPONSE):
                waiter.set_result(done.response)
            else:
                waiter.set_exception(done.error)

    async def call(self, start: Callable[[CompletionQueue, int], None]) -> bytes:
        if self._queue is None:
            raise RuntimeError("the interpreter is exiting: no more calls")
        queue = self._queue
        ticket = next(self._tickets)
        start(queue, ticket)
        waiter: "asyncio.Future[bytes]" = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = waiter
        try:
            return await waiter
        except asyncio.CancelledError:
            # The call is dropped in the core (its slot and any late answer released).
            self._waiting.pop(ticket, None)
            queue.cancel(ticket)
            raise


atexit.register(_Completions.release_all)


class _Connecting:
    """What :func:`connect` and :func:`connect_gatt` return: await it for a
    :class:`Connection`, or use it with ``async with`` to disconnect at the end of the block."""

    def __init__(self, open: Callable[[], Awaitable[_Connection]]) -> None:
        self._open_raw = open
        self._conn: Optional[Connection] = None

    async def _open(self) -> Connection:
        # UniFFI runs every await, and a GATT link's async methods (called from the library's
        # thread), on the event loop set here: the one that opens the connection.
        uniffi_set_event_loop(asyncio.get_running_loop())
        return Connection(await self._open_raw())

    def __await__(self) -> Generator[object, None, Connection]:
        return self._open().__await__()

    async def __aenter__(self) -> Connection:
        self._conn = await self._open()
        return self._conn

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._conn is not None:
            await self._conn.disconnect()


def connect(url: str, options: Optional[ConnectOptions] = None) -> _Connecting:
    """Connects to ``url`` (``tcp://HOST:PORT``, ``tls://HOST:PORT``, ``ws://HOST:PORT/PATH``,
    ``wss://…``) and runs setup and the key exchange. Without ``options`` the peripheral's
    key is pinned on first use in the default known-keys file
    (``$XDG_CONFIG_HOME/blerpc/known_keys.json``) and encryption is required."""
    chosen = options if options is not None else ConnectOptions()
    return _Connecting(lambda: _connect(url, chosen))


def connect_gatt(link: GattLink, inbox: GattInbox, options: Optional[ConnectOptions] = None) -> _Connecting:
    """Connects over a GATT link the app's BLE stack provides, already connected to a bleRPC
    peripheral with the MTU negotiated and notifications subscribed: ``link`` (a
    :class:`GattLink` subclass: ``att_mtu()``, ``peer_id()``, ``async
    write_without_response(pdu)``, ``async disconnect()``) and ``inbox`` (a
    :class:`GattInbox` the stack's callbacks feed: ``inbox.notification(value)`` for each
    notification, ``inbox.disconnected(reason)``). Then setup and the key exchange, as
    :func:`connect` (pinning on first use by default, under ``link.peer_id()``).

    The link's ``async`` methods run on the event loop that opened the connection (the
    library calls them from its own thread): UniFFI keeps one such loop per process, set by
    each :func:`connect` and :func:`connect_gatt`, so keep the connections of a process on
    one event loop."""
    return _Connecting(lambda: _open_gatt(link, inbox, options))


async def _open_gatt(link: GattLink, inbox: GattInbox, options: Optional[ConnectOptions]) -> _Connection:
    """:func:`connect_gatt`'s connection (also ``blerpc.bleak``'s)."""
    return await _connect_gatt(link, inbox, options if options is not None else ConnectOptions())


class _Connector(ReportConnector):
    """The app's connect function as the library's :class:`ReportConnector`."""

    def __init__(self, connect: Callable[[], Awaitable[Connection]]) -> None:
        self._connect = connect

    async def connect(self) -> _Connection:
        return (await self._connect())._raw


async def report(connect: Callable[[], Awaitable[Connection]], options: ReportOptions) -> Dict[str, Any]:
    """Runs a field report (what ``blerpc report`` runs: ``docs/field-reports.md``) against the
    device ``connect`` reaches: ``await connect()`` opens a connection (:func:`connect` or
    :func:`connect_gatt`), first and after each loss. A payload mix for
    ``options.duration_ms``, every call timed and checked, the device's diagnostics before and
    after, reconnects with their reasons. Returns the report (``blerpc-report/1``,
    ``docs/report.schema.json``) and, with ``options.out_dir``, writes ``report.json``,
    ``report.md`` and two plots there. The run goes on the library's thread: this event loop
    stays free for the app's BLE stack, which ``connect`` and the GATT link run on."""
    uniffi_set_event_loop(asyncio.get_running_loop())
    return json.loads(await _run_report(_Connector(connect), options))


class ServerStream(_Scoped):
    """The responses of a peripheral→central stream, as an async iterator of protobuf bytes.

    Cancelling a task that waits for an item leaves the stream open; :meth:`aclose`, the end
    of an ``async with`` block, or dropping the object cancels it in the core (the peripheral
    is told and the next stream can start)."""

    def __init__(self, conn: _Connection, command: str, request: bytes) -> None:
        self._conn = conn
        self._command = command
        self._request = request
        self._raw: Optional[_ResponseStream] = None
        self._closed = False

    def __aiter__(self) -> "ServerStream":
        return self

    async def __anext__(self) -> bytes:
        if self._closed:
            raise StopAsyncIteration
        try:
            if self._raw is None:
                self._raw = await self._conn.server_stream(self._command, self._request)
            item = await self._raw.next()
        except BlerpcError:
            # The stream failed to start or ended with an error: it is over.
            self._closed = True
            raise
        if item is None:
            self._closed = True
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        """Cancels the stream unless it has ended."""
        self._closed = True
        if self._raw is not None:
            await self._raw.cancel()

    async def _leave(self, failed: bool) -> None:
        await self.aclose()


class Upload(_Scoped):
    """An open central→peripheral stream (from :meth:`Connection.client_stream`). Leaving an
    ``async with`` block on an exception cancels it."""

    def __init__(self, raw: _Upload) -> None:
        self._raw = raw

    async def send(self, item: bytes) -> None:
        """Sends one item (its protobuf bytes); waits while the link is congested."""
        await self._raw.send(item)

    async def finish(self) -> bytes:
        """Ends the stream and returns the peripheral's response (protobuf bytes)."""
        return await self._raw.finish()

    async def cancel(self) -> None:
        """Abandons the upload; the peripheral is told."""
        await self._raw.cancel()

    async def _leave(self, failed: bool) -> None:
        if failed:
            await self.cancel()


class BidiStream(_Scoped):
    """An open stream both ways (from :meth:`Connection.bidi_stream`): :meth:`send` and
    :meth:`finish` this side's half while ``async for`` reads the peripheral's items, from two
    tasks at once. A send waits while the peripheral has no room for another item; the
    peripheral waits while this side has not read. :meth:`cancel`, or leaving an ``async
    with`` block before the stream ended, cancels it both ways (the peripheral is told)."""

    def __init__(self, raw: _BidiStream) -> None:
        self._raw = raw
        self._ended = False

    async def send(self, item: bytes) -> None:
        """Sends one item (its protobuf bytes)."""
        await self._raw.send(item)

    async def finish(self) -> None:
        """Ends this side's half; the peripheral's items keep coming until it ends the call."""
        await self._raw.finish()

    def __aiter__(self) -> "BidiStream":
        return self

    async def __anext__(self) -> bytes:
        if self._ended:
            raise StopAsyncIteration
        try:
            item = await self._raw.next()
        except BlerpcError:
            self._ended = True
            raise
        if item is None:
            self._ended = True
            raise StopAsyncIteration
        return item

    async def cancel(self) -> None:
        """Stops the stream both ways; the peripheral is told."""
        self._ended = True
        await self._raw.cancel()

    async def _leave(self, failed: bool) -> None:
        if not self._ended:
            await self.cancel()
