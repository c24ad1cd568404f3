"""Runs the Bumble functional tests both ways, each on its own pair of linked virtual
controllers (``python -m bumble.apps.controllers``, H4 over TCP on free loopback ports picked at
run time):

1. our peripheral (the firmware's application on trouble-host, ``blerpc-fw-linux peripheral``)
   against a Bumble central on the reference library (``bumble_central.py``);
2. a Bumble GATT server carrying the reference peripheral (``bumble_peripheral.py``) against our
   central (``blerpc-fw-linux central``: the blerpc runtime's BLE link on trouble-host).

    python tools/firmware/bumble_run.py --linux-bin firmware/target/release/blerpc-fw-linux

Every process is bounded in time and stopped at the end. Prints each side's table, then a
summary, and exits 1 if either direction failed.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# A fixed, public test seed for the reference peripheral (never a real identity).
REFERENCE_SEED = "42" * 32


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """True once something listens on 127.0.0.1:port (read from /proc: no probe connection,
    which a single-client H4 server would take as its host)."""
    want = f":{port:04X}"
    try:
        with open("/proc/net/tcp") as f:
            return any(line.split()[1].endswith(want) and line.split()[3] == "0A" for line in f.readlines()[1:])
    except OSError:
        return False


class Procs:
    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, argv, **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, **kw)
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()


def controllers(procs: Procs, python: str) -> tuple[int, int]:
    for _ in range(5):
        a, b = free_port(), free_port()
        if a == b:
            continue
        procs.start(
            [python, "-m", "bumble.apps.controllers", f"tcp-server:127.0.0.1:{a}", f"tcp-server:127.0.0.1:{b}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if listening(a) and listening(b):
                return a, b
            time.sleep(0.1)
        procs.stop()
    raise RuntimeError("the Bumble virtual controllers did not start")


def read_identity(p: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            if p.poll() is not None:
                break
            continue
        line = line.decode().strip()
        print(f"  peripheral: {line}", flush=True)
        if line.startswith("IDENTITY "):
            return line.split()[1]
    raise RuntimeError("the peripheral did not print its identity")


def ours_vs_bumble_central(args, python: str) -> int:
    print("## our peripheral (trouble-host) <- Bumble central (reference library)", flush=True)
    procs = Procs()
    try:
        p1, p2 = controllers(procs, python)
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        peripheral = procs.start(
            [args.linux_bin, "peripheral", "--hci", f"127.0.0.1:{p1}"],
            stdout=subprocess.PIPE,
            stderr=open(os.path.join(args.logs, "ours-peripheral.log"), "wb"),
            env=env,
        )
        identity = read_identity(peripheral, 30)
        central = procs.start(
            [python, os.path.join(HERE, "bumble_central.py"), "--hci", f"tcp-client:127.0.0.1:{p2}", "--identity-pub", identity],
        )
        try:
            return central.wait(args.timeout)
        except subprocess.TimeoutExpired:
            print(f"FAIL: the Bumble central did not finish within {args.timeout} s", flush=True)
            return 1
    finally:
        procs.stop()


def bumble_peripheral_vs_ours(args, python: str) -> int:
    print("## Bumble peripheral (reference library) <- our central (blerpc runtime on trouble-host)", flush=True)
    procs = Procs()
    try:
        p1, p2 = controllers(procs, python)
        peripheral = procs.start(
            [python, os.path.join(HERE, "bumble_peripheral.py"), "--hci", f"tcp-client:127.0.0.1:{p1}", "--seed", REFERENCE_SEED],
            stdout=subprocess.PIPE,
            stderr=open(os.path.join(args.logs, "bumble-peripheral.log"), "wb"),
        )
        identity = read_identity(peripheral, 30)
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        central = procs.start(
            [args.linux_bin, "central", "--hci", f"127.0.0.1:{p2}", "--trust-key", identity, "--timeout", "30"],
            stderr=open(os.path.join(args.logs, "ours-central.log"), "wb"),
            env=env,
        )
        try:
            return central.wait(args.timeout)
        except subprocess.TimeoutExpired:
            print(f"FAIL: our central did not finish within {args.timeout} s", flush=True)
            return 1
    finally:
        procs.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--linux-bin", required=True, help="the blerpc-fw-linux binary")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per direction")
    ap.add_argument("--logs", default=os.environ.get("TMPDIR", "/tmp"), help="where the peers' logs go")
    args = ap.parse_args()
    python = sys.executable
    a = ours_vs_bumble_central(args, python)
    b = bumble_peripheral_vs_ours(args, python)
    print("| direction | result |")
    print("|---|---|")
    print(f"| our peripheral <- Bumble central | {'pass' if a == 0 else 'FAIL'} |")
    print(f"| Bumble peripheral <- our central | {'pass' if b == 0 else 'FAIL'} |")
    print(f"logs: {args.logs}/ours-peripheral.log, bumble-peripheral.log, ours-central.log")
    return 0 if a == 0 and b == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
