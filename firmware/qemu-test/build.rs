//! Writes the test image's memory layout for cortex-m-rt (`memory.x`, QEMU mps2-an505) and, on
//! the microcontroller target, links with it. (The vectors the image checks are converted and
//! embedded by `blerpc-vectors`.)

// A build script reports a failure by failing the build with its message.
#![allow(clippy::expect_used)]

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    // The test image's memory (cortex-m-rt's `memory.x`), QEMU mps2-an505 in the secure state
    // it boots in: code in ZBT SSRAM1 at its secure alias 0x1000_0000 (QEMU's initial VTOR_S),
    // data in ZBT SSRAM2/3 at 0x3800_0000.
    std::fs::write(
        out.join("memory.x"),
        "MEMORY\n{\n  FLASH : ORIGIN = 0x10000000, LENGTH = 4M\n  RAM : ORIGIN = 0x38000000, LENGTH = 4M\n}\n",
    )
    .expect("write memory.x");
    println!("cargo::rustc-link-search={}", out.display());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo::rustc-link-arg-bins=-Tlink.x");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
