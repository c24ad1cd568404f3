"""Runs the bindings' figures (tools/bindings/bench.sh builds what it runs): per-call overhead
of each binding against the Rust client, and the Python binding against the reference Python
library, on one `blerpc serve` over loopback TCP. Progress goes to stderr; the table to stdout
and, with --out, to OUT.txt and OUT.json.

Latency: each round runs the Rust baseline, the Python driver and the Kotlin driver once each
(the order turns every round), each a fresh process and connection timing CALLS echo calls
after WARMUP. A row's figure is the median over the rounds of its per-round median; "vs rust"
is that over the `rust` row's, with the range of the per-round ratios.

CPU: each round runs the binding and the reference once each (alternating first), in a fresh
Python process; a figure is process CPU time per operation (every thread of the process), the
median over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List


def progress(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def start_server(binary: str):
    """`blerpc serve` on a free loopback port, as the Python binding's tests start it."""
    os.environ["BLERPC_BIN"] = binary
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bindings" / "python" / "tests"))
    from conftest import start_server as start  # noqa: E402 (needs BLERPC_BIN set first)

    # No connection-rate guard: the connect workload reconnects as fast as it can.
    return start("--listen", "tcp://127.0.0.1:0", "--max-connection-rate", "0")


def run_json(cmd: List[str], timeout: float = 600) -> List[dict]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="the blerpc binary (release)")
    ap.add_argument("--rust", required=True, help="the call_latency example (release)")
    ap.add_argument("--python", required=True, help="a Python that imports blerpc (release wheel) and blerpc_protocol")
    ap.add_argument("--kotlin", help="the java command line of the Kotlin driver, up to its arguments")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--cpu-rounds", type=int, default=3)
    ap.add_argument("--cpu-calls", type=int, default=2000, help="echo calls; 8 KB reads: a quarter")
    ap.add_argument("--cpu-connects", type=int, default=100)
    ap.add_argument("--out", type=Path, help="write OUT.txt and OUT.json")
    ap.add_argument("--command", default="bash tools/bindings/bench.sh", help="the command line to record")
    args = ap.parse_args()
    driver = str(Path(__file__).with_name("driver.py"))

    server = start_server(args.server)
    url, key = server.url, server.key
    progress(f"blerpc serve at {url}")
    try:
        drivers = {
            "rust": [args.rust, url, key, str(args.calls), str(args.warmup)],
            "python": [args.python, driver, "latency", url, key, str(args.calls), str(args.warmup)],
        }
        if args.kotlin:
            drivers["kotlin"] = [*shlex.split(args.kotlin), url, key, str(args.calls), str(args.warmup)]
        per_round: List[Dict[str, dict]] = []
        names = list(drivers)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            rows: Dict[str, dict] = {}
            for name in order:
                t = time.monotonic()
                for row in run_json(drivers[name]):
                    rows[row["row"]] = row
                progress(f"latency round {r + 1}/{args.rounds}: {name} ({time.monotonic() - t:.1f} s)")
            per_round.append(rows)

        cpu_rounds: List[Dict[str, dict]] = []
        counts = [str(args.cpu_calls), str(max(1, args.cpu_calls // 4)), str(args.cpu_connects)]
        for r in range(args.cpu_rounds):
            libs = ["binding", "reference"] if r % 2 == 0 else ["reference", "binding"]
            got: Dict[str, dict] = {}
            for lib in libs:
                t = time.monotonic()
                for m in run_json([args.python, driver, "cpu", lib, url, key, *counts]):
                    got[f"{m['lib']}/{m['workload']}"] = m
                progress(f"cpu round {r + 1}/{args.cpu_rounds}: {lib} ({time.monotonic() - t:.1f} s)")
            cpu_rounds.append(got)
    finally:
        server.kill()

    result = summarize(per_round, cpu_rounds, args)
    text = render(result)
    print(text)
    if args.out:
        args.out.with_suffix(".txt").write_text(text + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
        progress(f"wrote {args.out.with_suffix('.txt')} and {args.out.with_suffix('.json')}")
    return 0


def summarize(per_round: List[Dict[str, dict]], cpu_rounds: List[Dict[str, dict]], args) -> dict:
    rows = []
    order = list(per_round[0])
    for name in order:
        p50s = [r[name]["p50_us"] for r in per_round]
        p90s = [r[name]["p90_us"] for r in per_round]
        ratios = [r[name]["p50_us"] / r["rust"]["p50_us"] for r in per_round]
        rows.append(
            {
                "row": name,
                "p50_us": round(statistics.median(p50s), 2),
                "p90_us": round(statistics.median(p90s), 2),
                "vs_rust": round(statistics.median(ratios), 2),
                "vs_rust_min": round(min(ratios), 2),
                "vs_rust_max": round(max(ratios), 2),
                "p50_us_per_round": p50s,
            }
        )
    cpu = []
    for workload in ("echo", "flash_read_8k", "connect"):
        b = [r[f"binding/{workload}"]["cpu_us"] for r in cpu_rounds]
        ref = [r[f"reference/{workload}"]["cpu_us"] for r in cpu_rounds]
        brt = [r[f"binding/{workload}"]["runtime_thread_cpu_us"] for r in cpu_rounds]
        bw = [r[f"binding/{workload}"]["wall_us"] for r in cpu_rounds]
        rw = [r[f"reference/{workload}"]["wall_us"] for r in cpu_rounds]
        ratios = [x / y for x, y in zip(ref, b)]
        cpu.append(
            {
                "workload": workload,
                "binding_cpu_us": round(statistics.median(b), 2),
                "binding_runtime_thread_cpu_us": round(statistics.median(brt), 2),
                "reference_cpu_us": round(statistics.median(ref), 2),
                "speedup": round(statistics.median(ratios), 1),
                "speedup_min": round(min(ratios), 1),
                "speedup_max": round(max(ratios), 1),
                "binding_wall_us": round(statistics.median(bw), 2),
                "reference_wall_us": round(statistics.median(rw), 2),
                "n": cpu_rounds[0][f"binding/{workload}"]["n"],
            }
        )
    return {
        "command": args.command,
        "machine": f"{platform.machine()}, {platform.system()} {platform.release()}, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "rounds": args.rounds,
        "calls": args.calls,
        "warmup": args.warmup,
        "cpu_rounds": args.cpu_rounds,
        "latency": rows,
        "cpu": cpu,
    }


def render(result: dict) -> str:
    lines = [
        f"bleRPC bindings: per-call overhead, echo over loopback TCP to one `blerpc serve` (release builds)",
        f"{result['rounds']} rounds x {result['calls']} calls per row (after {result['warmup']}), "
        f"median of the rounds' p50; {result['machine']}; {result['date']}",
        f"command: {result['command']}",
        "",
        f"{'caller':<40} {'p50 us':>9} {'p90 us':>9} {'vs rust':>8}  {'(rounds)':<12}",
    ]
    for r in result["latency"]:
        lines.append(
            f"{r['row']:<40} {r['p50_us']:>9.1f} {r['p90_us']:>9.1f} {r['vs_rust']:>7.2f}x  "
            f"({r['vs_rust_min']:.2f}-{r['vs_rust_max']:.2f})"
        )
    lines += [
        "",
        "Python binding against the reference Python library (blerpc-protocol 0.8.0, the interop central),",
        f"same calls on the same server: client process CPU per operation, median of {result['cpu_rounds']} rounds;",
        "(Rust thread): the part on the binding's runtime thread (the connection's task), the rest on the loop's",
        "",
        f"{'workload':<38} {'binding CPU us':>15} {'(Rust thread)':>14} {'reference CPU us':>17} {'faster':>8}  {'(rounds)':<12} {'wall us b / ref':>16}",
    ]
    names = {
        "echo": "echo call (encrypted, 7 B)",
        "flash_read_8k": "flash_read 8 KB (encrypted, 35 PDUs)",
        "connect": "connect: setup + key exchange",
    }
    for c in result["cpu"]:
        lines.append(
            f"{names[c['workload']]:<38} {c['binding_cpu_us']:>15.1f} {c['binding_runtime_thread_cpu_us']:>14.1f} {c['reference_cpu_us']:>17.1f} "
            f"{c['speedup']:>7.1f}x  ({c['speedup_min']:.1f}-{c['speedup_max']:.1f})"
            f"{c['binding_wall_us']:>10.0f} / {c['reference_wall_us']:.0f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
