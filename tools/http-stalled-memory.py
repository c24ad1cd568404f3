#!/usr/bin/env python3
"""Memory a gateway holds per stalled HTTP connection.

Starts `BINARY serve-gateway` (blerpc-bench) on a loopback port, opens N connections that each
stall (`head`: half a request head; `body`: a whole head announcing 1,000 bytes of body, then
one byte), and prints the gateway's RSS growth per connection, in KiB. Compare two builds by
running it with each:

    python3 tools/http-stalled-memory.py target/release/blerpc-bench --kind body --count 1000
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

TOKEN = "stalled-memory-token-0123456789"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("binary", help="a blerpc-bench executable")
    p.add_argument("--kind", choices=["head", "body"], default="body")
    p.add_argument("--count", type=int, default=1000, help="stalled connections (at most 5000)")
    args = p.parse_args()
    if not 1 <= args.count <= 5000:
        sys.exit("--count must be 1..5000")
    with tempfile.TemporaryDirectory() as home:
        tokens = os.path.join(home, "tokens")
        with open(tokens, "w") as f:
            f.write(TOKEN + "\n")
        gateway = subprocess.Popen(
            [args.binary, "serve-gateway", "--worker-subcommand", "serve-gateway",
             "--devices", "tcp://127.0.0.1:0", "--http", "127.0.0.1:0", "--enroll",
             "--known-devices", os.path.join(home, "enrolled.json"), "--tokens", tokens],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "XDG_CONFIG_HOME": home})
        try:
            port = None
            deadline = time.monotonic() + 20
            while port is None and time.monotonic() < deadline:
                line = gateway.stdout.readline()
                if not line:
                    sys.exit("the gateway exited before it listened")
                if line.startswith("http http://"):
                    port = int(line.strip().rsplit(":", 1)[1])
            if port is None:
                sys.exit("the gateway did not print its HTTP address within 20 s")
            time.sleep(0.5)
            before = rss_kib(gateway.pid)
            device = "ab" * 32
            if args.kind == "body":
                request = (f"POST /v1/devices/{device}/calls/echo HTTP/1.1\r\nHost: x\r\n"
                           f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                           "Content-Length: 1000\r\n\r\n{").encode()
            else:
                request = b"POST /v1/devices/x/calls/echo HTTP/1.1\r\nHost: x\r\n"
            sockets = []
            for _ in range(args.count):
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(request)
                sockets.append(s)
            time.sleep(2)
            grown = rss_kib(gateway.pid) - before
            print(f"{args.kind}: {args.count} stalled connections, "
                  f"{grown / args.count:.1f} KiB each (RSS {before} -> {before + grown} KiB)")
            for s in sockets:
                s.close()
        finally:
            gateway.send_signal(signal.SIGINT)
            try:
                gateway.wait(timeout=10)
            except subprocess.TimeoutExpired:
                gateway.kill()


if __name__ == "__main__":
    main()
