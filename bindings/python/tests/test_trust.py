"""Pinning: a trusted key, trust on first use in a known-keys file, a wrong key refused,
encryption required unless the caller opts out."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import bounded
from demo_pb import decode, echo_request

import blerpc

OTHER_KEY = "ab" * 32


@pytest.mark.asyncio
@bounded(20)
async def test_a_wrong_pinned_key_is_refused(server) -> None:
    with pytest.raises(blerpc.BlerpcError.Setup) as e:
        await blerpc.connect(server.url, blerpc.ConnectOptions(trust_key=OTHER_KEY))
    assert e.value.code == "IDENTITY_REJECTED"
    assert "identity" in e.value.detail


@pytest.mark.asyncio
@bounded(20)
async def test_trust_on_first_use_pins_and_refuses_another_key(servers, tmp_path: Path) -> None:
    known = str(tmp_path / "known_keys.json")
    first = servers("--listen", "tcp://127.0.0.1:0")
    options = blerpc.ConnectOptions(known_keys_file=known, device_id="thermostat")
    async with blerpc.connect(first.url, options) as conn:
        assert conn.info().pinned == blerpc.Pinned.FIRST_USE
    assert first.key in Path(known).read_text()
    async with blerpc.connect(first.url, options) as conn:
        assert conn.info().pinned == blerpc.Pinned.MATCHED
        assert decode(await conn.call("echo", echo_request("x"))) == {1: b"x"}
    # Another server (a new key) under the same device name: refused.
    second = servers("--listen", "tcp://127.0.0.1:0")
    assert second.key != first.key
    with pytest.raises(blerpc.BlerpcError.Setup) as e:
        await blerpc.connect(second.url, options)
    assert e.value.code == "IDENTITY_CHANGED"


@pytest.mark.asyncio
@bounded(20)
async def test_the_default_pins_in_the_default_known_keys_file(server) -> None:
    # conftest points $XDG_CONFIG_HOME at a temporary directory.
    async with blerpc.connect(server.url) as conn:
        assert conn.info().pinned == blerpc.Pinned.FIRST_USE
    import os

    path = Path(os.environ["XDG_CONFIG_HOME"]) / "blerpc" / "known_keys.json"
    assert server.key in path.read_text()


@pytest.mark.asyncio
@bounded(20)
async def test_an_unencrypted_server_needs_both_opt_outs(servers) -> None:
    s = servers("--listen", "tcp://127.0.0.1:0", "--plaintext")
    assert s.key == "none"
    with pytest.raises(blerpc.BlerpcError.Setup) as e:
        await blerpc.connect(s.url, blerpc.ConnectOptions(allow_any_key=True))
    assert e.value.code == "ENCRYPTION_UNAVAILABLE"
    options = blerpc.ConnectOptions(allow_any_key=True, allow_plaintext=True)
    async with blerpc.connect(s.url, options) as conn:
        assert not conn.info().encrypted
        assert decode(await conn.call("echo", echo_request("clear"))) == {1: b"clear"}
