"""Bad input gives a typed error with the core's code, never a crash or a hang."""

from __future__ import annotations

import socket

import pytest
from conftest import Server, bounded
from demo_pb import counter_stream_request, echo_request

import blerpc


@pytest.mark.asyncio
@bounded(20)
@pytest.mark.parametrize(
    "url",
    ["", "localhost:1", "foo://x", "tcp://127.0.0.1", "tcp://127.0.0.1:99999", "ble://x", "serial:///dev/null"],
)
async def test_a_bad_or_unsupported_url_is_an_invalid_argument(url: str) -> None:
    with pytest.raises(blerpc.BlerpcError.InvalidArgument) as e:
        await blerpc.connect(url, blerpc.ConnectOptions(allow_any_key=True))
    assert e.value.code == "INVALID_ARGUMENT"
    assert e.value.detail


@pytest.mark.asyncio
@bounded(20)
@pytest.mark.parametrize("key", ["", "zz" * 32, "ab" * 31, "0x" + "ab" * 32])
async def test_a_bad_hex_key_is_an_invalid_argument(server: Server, key: str) -> None:
    with pytest.raises(blerpc.BlerpcError.InvalidArgument) as e:
        await blerpc.connect(server.url, blerpc.ConnectOptions(trust_key=key))
    assert "64 hex digits" in e.value.detail


@pytest.mark.asyncio
@bounded(20)
async def test_conflicting_options_are_an_invalid_argument(server: Server) -> None:
    with pytest.raises(blerpc.BlerpcError.InvalidArgument):
        await blerpc.connect(server.url, blerpc.ConnectOptions(trust_key=server.key, allow_any_key=True))
    with pytest.raises(blerpc.BlerpcError.InvalidArgument):
        await blerpc.connect("tls://127.0.0.1:1", blerpc.ConnectOptions(allow_any_key=True, tls_ca_file="/nonexistent.pem"))


@pytest.mark.asyncio
@bounded(20)
async def test_nothing_listening_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(blerpc.BlerpcError.Connection) as e:
        await blerpc.connect(f"tcp://127.0.0.1:{port}", blerpc.ConnectOptions(allow_any_key=True))
    assert e.value.code == "LINK_FAILED"
    assert "refused" in e.value.detail


@pytest.mark.asyncio
@bounded(20)
async def test_a_server_that_does_not_answer_setup_times_out(server: Server) -> None:
    server.stop()
    options = blerpc.ConnectOptions(trust_key=server.key, connect_timeout_ms=300)
    with pytest.raises(blerpc.BlerpcError.Setup) as e:
        await blerpc.connect(server.url, options)
    assert e.value.code == "SETUP_TIMEOUT"
    server.resume()


@pytest.mark.asyncio
@bounded(30)
async def test_bad_calls_are_refused_and_the_connection_goes_on(server: Server) -> None:
    async with blerpc.connect(server.url, server.pinned()) as conn:
        # A command name over 255 bytes, or empty.
        for name in ["x" * 300, ""]:
            with pytest.raises(blerpc.BlerpcError) as e:
                await conn.call(name, b"")
            assert e.value.code == "INVALID_ARGUMENT"
        # More than the server accepts (its limit is in info()).
        limit = conn.info().max_request_len
        assert limit is not None
        with pytest.raises(blerpc.BlerpcError.Call) as e:
            await conn.call("data_write", bytes(limit + 1))
        assert e.value.code == "REQUEST_TOO_LARGE"
        # An unknown command and an echo over the demo's 256 bytes: the peripheral's ERROR.
        with pytest.raises(blerpc.BlerpcError.Call) as e:
            await conn.call("no_such_command", b"")
        assert e.value.code == "PEER_ERROR" and e.value.peer_code == 0x03  # UNKNOWN_COMMAND
        with pytest.raises(blerpc.BlerpcError.Call) as e:
            await conn.call("echo", echo_request("x" * 257))
        assert e.value.code == "PEER_ERROR" and e.value.peer_code == 0x04  # DECODE_FAILED
        # A stream the peripheral refuses (over the demo's 10,000 items) ends with its ERROR,
        # and stays ended.
        stream = conn.server_stream("counter_stream", counter_stream_request(10_001))
        with pytest.raises(blerpc.BlerpcError.Call) as e:
            async for _ in stream:
                pass
        assert e.value.code == "PEER_ERROR"
        assert [item async for item in stream] == []
        # A deadline out of range for the FFI's u32 is refused by the generated code.
        with pytest.raises((OverflowError, ValueError, TypeError)):
            await conn.call("echo", b"", deadline_ms=-1)
        assert conn.info().encrypted and not conn.is_closed()
        reply = await conn.call("echo", echo_request("still here"))
        assert reply == echo_request("still here")
