"""The library's Python objects at the edges of an event loop's life: the callback UniFFI
calls when the library drops a Python future it awaited (``blerpc._futures``: from the
library's thread, it cancels the task at once, and a closed loop is left alone instead of
raising in a ctypes callback), and a loop's completion queue freed when the interpreter exits
with the loop still alive (``_Completions.release_all``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
import threading
import time
from typing import Any, List

import blerpc  # noqa: F401  (installs the callback)
from blerpc import _futures
from blerpc._ffi import blerpc_ffi as _ffi


def drop(loop: asyncio.AbstractEventLoop, future: "concurrent.futures.Future[Any]") -> None:
    """Drops `future` as the library does: its handle through the callback the generated
    module gives out."""
    handle = _ffi._UNIFFI_FOREIGN_FUTURE_HANDLE_MAP.insert((loop, future))
    _ffi._uniffi_future_dropped_callback(handle)


def test_the_library_is_given_the_safe_callback() -> None:
    assert _ffi._uniffi_future_dropped_callback is _futures.future_dropped


def test_a_future_dropped_from_another_thread_cancels_its_task_at_once() -> None:
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    cancelled = threading.Event()
    started = threading.Event()

    async def write() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    try:
        future = asyncio.run_coroutine_threadsafe(write(), loop)
        assert started.wait(5)
        # Let the loop go back to its selector with nothing else to do: a cancel that does not
        # wake it would wait an hour.
        time.sleep(0.1)
        drop(loop, future)
        assert cancelled.wait(5), "the task was not cancelled"
        assert future.cancelled()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()


def test_a_future_dropped_after_its_loop_closed_raises_nothing() -> None:
    raised: List[Any] = []
    hook = sys.unraisablehook
    sys.unraisablehook = raised.append
    try:
        loop = asyncio.new_event_loop()
        loop.close()
        drop(loop, concurrent.futures.Future())
        # A finished one, on an open loop, is left alone too.
        done: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        done.set_result(None)
        open_loop = asyncio.new_event_loop()
        try:
            drop(open_loop, done)
        finally:
            open_loop.close()
    finally:
        sys.unraisablehook = hook
    assert raised == []



def test_a_session_that_exits_with_loops_alive_frees_their_queues_quietly() -> None:
    # A pytest session (pytest-asyncio's loops are still referenced when the interpreter
    # exits) of one test that connects: each loop's completion queue is freed at exit while
    # the generated module can, not in the modules' teardown (an ignored AttributeError).
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            os.path.join(here, "test_calls.py"),
            "-k",
            "test_info_reports_what_setup_established",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.path.dirname(here),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout, out.stdout
    assert "Exception ignored" not in out.stdout + out.stderr, out.stdout + out.stderr
