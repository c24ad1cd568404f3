"""Flash and RAM of firmware ELF images, from their sections (llvm-size) and their symbols
(llvm-nm), split into BLE stack, executor + HAL, bleRPC core, application and the rest.

    python tools/firmware/sizes.py [--json FILE] [--markdown] NAME=ELF ...

Flash = .vector_table + .text + .rodata + .data (its load image); RAM = .data + .bss + .uninit
(static RAM; the stack takes what is left). The split attributes each symbol to the crate that
defines it (the first path segment of its demangled Rust name; after LTO, code inlined into a
function counts where it was inlined), and each C symbol of Nordic's SoftDevice Controller and
MPSL libraries (listed from their static archives) to the BLE stack. Symbols with no size
(padding, alignment, linker-made veneers) make the "unattributed" row, so every column adds up
to the section totals.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

CATEGORIES = ["BLE stack", "executor + HAL", "bleRPC core", "application", "Rust runtime", "unattributed"]

CRATES = {
    "BLE stack": {"trouble_host", "bt_hci", "bt_hci_transport", "nrf_sdc", "nrf_mpsl", "nrf_sdc_sys", "nrf_mpsl_sys", "heapless"},
    "executor + HAL": {
        "embassy_executor", "embassy_time", "embassy_time_driver", "embassy_time_queue_utils", "embassy_sync",
        "embassy_futures", "embassy_nrf", "embassy_hal_internal", "embassy_embedded_hal", "cortex_m", "cortex_m_rt",
        "critical_section", "nrf_pac", "static_cell", "portable_atomic", "futures_util", "futures_core",
    },
    "bleRPC core": {
        "blerpc_proto", "aes", "aes_gcm", "ghash", "polyval", "universal_hash", "ctr", "cipher", "ed25519_dalek",
        "ed25519", "curve25519_dalek", "x25519_dalek", "sha2", "hkdf", "hmac", "digest", "subtle", "zeroize",
        "signature", "block_buffer", "crypto_common", "rand_core", "rand_chacha", "ppv_lite86", "generic_array",
    },
    "application": {"blerpc_fw_app", "blerpc_fw_service", "blerpc_demo", "blerpc_fw_nrf52840", "blerpc_fw_nrf54l15"},
    "Rust runtime": {"core", "compiler_builtins", "alloc"},
}
C_RUNTIME = {"memcpy", "memset", "memmove", "memcmp", "__aeabi_memcpy", "__aeabi_memset", "__aeabi_memclr"}


def tool(name: str) -> str:
    for cand in [name] + sorted(glob.glob(f"/usr/lib/llvm-*/bin/{name}"), reverse=True):
        if shutil.which(cand):
            return cand
    sys.exit(f"{name} not found: install Debian's llvm (tools/firmware/install.sh)")


def sections(elf: str) -> dict[str, int]:
    out = subprocess.run([tool("llvm-size"), "-A", elf], capture_output=True, text=True, check=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].startswith(".") and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def nordic_symbols() -> set[str]:
    """The C symbols of the SoftDevice Controller and MPSL archives cargo unpacked."""
    names: set[str] = set()
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    for lib in glob.glob(f"{home}/registry/src/*/nrf-*-sys-*/**/*.a", recursive=True):
        out = subprocess.run([tool("llvm-nm"), "--defined-only", lib], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3:
                names.add(parts[2])
    return names


LEGACY = [("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$RF$", "&"), ("$C$", ","), ("$u7b$", "{"),
          ("$u7d$", "}"), ("$u5b$", "["), ("$u5d$", "]"), ("$u3b$", ";"), ("$BP$", "*"), ("$u27$", "'"),
          ("$u2b$", "+"), ("$LP$", "("), ("$RP$", ")"), ("..", "::")]


def readable(name: str) -> str:
    """Undoes the legacy mangling escapes llvm-nm 14 leaves in demangled names."""
    if name.startswith("_$"):
        name = name[1:]
    for esc, ch in LEGACY:
        name = name.replace(esc, ch)
    return name


def crate_of(name: str) -> str | None:
    # Demangled Rust paths: `crate::path`, `<crate::Type as other::Trait>::f`, `<&T as ...>`:
    # the crate of the first path (the type's, for a trait impl).
    m = re.match(r"^[<&\s*]*(?:mut\s+)?(?:dyn\s+)?(?:const\s+)?([A-Za-z_][A-Za-z0-9_]*)::", readable(name))
    return m.group(1) if m else None


def category(name: str, nordic: set[str]) -> str:
    if name in nordic or name.startswith(("sdc_", "mpsl_", "MPSL_", "SDC_")):
        return "BLE stack"
    if "::SDC_MEMORY" in name:
        # The SoftDevice Controller's memory, in a static of the board's main.
        return "BLE stack"
    crate = crate_of(name)
    if crate:
        for cat, crates in CRATES.items():
            if crate in crates:
                return cat
        if crate.startswith("embassy_"):
            return "executor + HAL"
        if crate.startswith("trouble_"):
            return "BLE stack"
        return "application" if crate.startswith("blerpc_fw") else "Rust runtime"
    if name in C_RUNTIME or name.startswith("__"):
        return "Rust runtime"
    return "unattributed"


MAIN_POOL = "::__embassy_main::POOL"


def split(elf: str, nordic: set[str], connection: int | None) -> dict[str, dict[str, int]]:
    out = subprocess.run(
        [tool("llvm-nm"), "--print-size", "--size-sort", "--demangle", "--defined-only", elf],
        capture_output=True, text=True, check=True,
    ).stdout
    flash = {c: 0 for c in CATEGORIES}
    ram = {c: 0 for c in CATEGORIES}
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) < 4:
            continue
        size, kind, name = int(parts[1], 16), parts[2], parts[3]
        cat = category(name, nordic)
        k = kind.lower()
        if MAIN_POOL in name and k == "b" and connection:
            # The main task's future holds the bleRPC connection (its size_of on the same
            # 32-bit ARM ABI, measured by the QEMU image) and the application's own state
            # (trouble's host resources and GATT server, the futures).
            ram["bleRPC core"] += min(connection, size)
            ram["application"] += size - min(connection, size)
            continue
        if k in "tr":
            flash[cat] += size
        elif k == "d":
            flash[cat] += size
            ram[cat] += size
        elif k == "b":
            ram[cat] += size
    return {"flash": flash, "ram": ram}


def measure(name: str, elf: str, nordic: set[str], connection: int | None) -> dict:
    s = sections(elf)
    flash_total = sum(s.get(x, 0) for x in (".vector_table", ".text", ".rodata", ".data"))
    ram_total = sum(s.get(x, 0) for x in (".data", ".bss", ".uninit"))
    parts = split(elf, nordic, connection)
    # What the symbols do not cover (alignment, veneers, unnamed data) is unattributed.
    for key, total in (("flash", flash_total), ("ram", ram_total)):
        known = sum(v for c, v in parts[key].items() if c != "unattributed")
        parts[key]["unattributed"] = max(0, total - known)
    return {"name": name, "elf": elf, "sections": s, "flash": flash_total, "ram": ram_total, **{"split": parts}}


def table(results: list[dict]) -> str:
    names = [r["name"] for r in results]
    lines = ["| bytes | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for key, label in (("flash", "flash"), ("ram", "static RAM")):
        lines.append(f"| **{label}** | " + " | ".join(f"**{r[key]:,}**" for r in results) + " |")
        for c in CATEGORIES:
            lines.append(f"| {label}: {c} | " + " | ".join(f"{r['split'][key][c]:,}" for r in results) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("images", nargs="+", help="NAME=ELF")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument(
        "--connection-bytes",
        type=int,
        help="size_of the firmware connection on this ABI (the QEMU image prints it): counted as the "
        "core's share of the main task's static future",
    )
    ap.add_argument(
        "--connection-bytes-plaintext",
        type=int,
        help="the same for the plaintext build (images whose name contains 'plaintext')",
    )
    args = ap.parse_args()
    nordic = nordic_symbols()
    results = []
    for spec in args.images:
        name, _, elf = spec.partition("=")
        if not os.path.exists(elf):
            sys.exit(f"{elf}: no such image (build it first)")
        conn = args.connection_bytes_plaintext if "plaintext" in name else args.connection_bytes
        results.append(measure(name, elf, nordic, conn))
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
