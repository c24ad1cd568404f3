"""Real `blerpc serve` processes for the tests, and a time bound on every test.

The server is the workspace's `blerpc` binary ($BLERPC_BIN, default target/debug/blerpc). It
prints `listening URL identity HEX` once it listens: the tests read the URL and the key there.
"""

from __future__ import annotations

import asyncio
import functools
import os
import selectors
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, List, TypeVar

import pytest

import blerpc

REPO = Path(__file__).resolve().parents[3]
BIN = os.environ.get("BLERPC_BIN", str(REPO / "target" / "debug" / "blerpc"))

# The default known-keys file and identity live under $XDG_CONFIG_HOME: never the user's.
_config = tempfile.mkdtemp(prefix="blerpc-pytest-")
os.environ["XDG_CONFIG_HOME"] = _config


@dataclass
class Server:
    """A running `blerpc serve`."""

    proc: subprocess.Popen
    url: str
    key: str

    def pinned(self) -> blerpc.ConnectOptions:
        """Options that accept exactly this server's identity key."""
        return blerpc.ConnectOptions(trust_key=self.key)

    def stop(self) -> None:
        """SIGSTOP: the process keeps its socket and answers nothing. Returns once every
        thread has stopped (the signal alone only asks them to)."""
        self.proc.send_signal(signal.SIGSTOP)
        tasks = Path(f"/proc/{self.proc.pid}/task")
        deadline = time.monotonic() + 5
        while not all(_state(t) == "T" for t in tasks.iterdir()):
            if time.monotonic() > deadline:
                raise RuntimeError("blerpc serve did not stop within 5 s of SIGSTOP")
            time.sleep(0.001)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL (a stopped process too, without running it again first)."""
        self.proc.kill()
        self.proc.wait(5)


def _state(task: Path) -> str:
    """A thread's state letter from /proc (`T`: stopped)."""
    # pid (comm) STATE ...: comm may hold spaces, so split after its closing parenthesis.
    return (task / "stat").read_text().rsplit(")", 1)[1].split()[0]


def start_server(*args: str) -> Server:
    """Starts `blerpc serve ARGS` and waits (10 s at most) for its `listening` line."""
    proc = subprocess.Popen(
        [BIN, "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(10):
        proc.kill()
        raise RuntimeError(f"{BIN} serve {' '.join(args)}: no listening line within 10 s")
    line = proc.stdout.readline().split()
    # listening URL identity HEX
    if len(line) != 4 or line[0] != "listening":
        proc.kill()
        raise RuntimeError(f"unexpected first line from blerpc serve: {line}")
    return Server(proc, line[1], line[3])


@pytest.fixture
def servers() -> Iterator[Callable[..., Server]]:
    """Starts servers on demand (`servers("--listen", URL, ...)`); all are killed at the end."""
    started: List[Server] = []

    def start(*args: str) -> Server:
        s = start_server(*args)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.kill()


@pytest.fixture
def server(servers: Callable[..., Server]) -> Server:
    """An encrypted demo server on TCP."""
    return servers("--listen", "tcp://127.0.0.1:0")


T = TypeVar("T")


def bounded(seconds: float) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T]]]:
    """Fails the test (asyncio.TimeoutError) if it has not finished within `seconds`."""

    def wrap(test: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(test)
        async def run(*args: Any, **kwargs: Any) -> T:
            return await asyncio.wait_for(test(*args, **kwargs), seconds)

        return run

    return wrap
