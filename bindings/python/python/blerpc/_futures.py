"""UniFFI's callback for a Python future the library stopped awaiting, made safe for the
library's thread.

When the Rust side drops a future it awaited from Python (a :class:`GattLink` write or
disconnect, a :class:`KeyStore` method, a report's ``connect``), UniFFI's generated callback
asks the event loop to cancel the Python task with ``loop.call_soon``: from the library's
runtime thread, where ``call_soon`` does not wake the loop (an abandoned write's task waited
for the loop's next wake-up to be cancelled) and raises once the loop is closed (an app or a
test whose loop ended just after a link failed printed "Exception ignored ... Event loop is
closed"). :func:`install` replaces it with :func:`future_dropped`, which cancels through the
thread-safe ``concurrent.futures.Future`` UniFFI keeps for the task, and leaves a finished
task or a closed loop alone.
"""

from __future__ import annotations

from ._ffi import blerpc_ffi as _ffi


@_ffi._UNIFFI_FOREIGN_FUTURE_DROPPED_CALLBACK
def future_dropped(handle: int) -> None:
    """The callback UniFFI calls (on any thread) with the handle of a dropped future."""
    loop, future = _ffi._UNIFFI_FOREIGN_FUTURE_HANDLE_MAP.remove(handle)
    if future.done() or loop.is_closed():
        return
    try:
        # Thread-safe: marks it cancelled here and cancels the task on its loop, waking it.
        future.cancel()
    except RuntimeError:
        # The loop closed between the check and the cancel: its tasks never run again.
        pass


def install() -> None:
    """Makes the generated module hand :func:`future_dropped` to the library (it looks the
    callback up each time it gives one out)."""
    if not hasattr(_ffi, "_uniffi_future_dropped_callback"):
        raise ImportError(
            "blerpc._ffi has no _uniffi_future_dropped_callback: the UniFFI version the wheel "
            "was generated with changed how dropped futures are reported; update blerpc._futures"
        )
    _ffi._uniffi_future_dropped_callback = future_dropped
