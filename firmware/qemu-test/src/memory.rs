//! What one firmware connection costs in RAM on the CPU this runs on, measured with `size_of`
//! (the host figure, 23,136 bytes on x86_64, is `crates/blerpc-proto/tests/memory.rs`'s).

use blerpc_demo::flash::MappedFlash;
use blerpc_fw_service::plaintext::NoCrypto;
use blerpc_fw_service::{Connection, FirmwarePeripheral, OUTBOX_BYTES, REASSEMBLY_BYTES};
use blerpc_proto::crypto::RustCrypto;
use rand_chacha::ChaCha20Rng;

/// A 0-byte RNG stand-in, as `memory.rs` on the host: an MCU's TRNG driver is a unit struct.
pub struct Trng;
impl rand_core::RngCore for Trng {
    fn next_u32(&mut self) -> u32 {
        0
    }
    fn next_u64(&mut self) -> u64 {
        0
    }
    fn fill_bytes(&mut self, _: &mut [u8]) {}
    fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), rand_core::Error> {
        Ok(())
    }
}
impl rand_core::CryptoRng for Trng {}

/// Sizes in bytes: `(what, bytes)`.
pub fn sizes() -> [(&'static str, usize); 5] {
    [
        (
            "core peripheral, firmware configuration (the host test's type)",
            core::mem::size_of::<FirmwarePeripheral<RustCrypto, Trng>>(),
        ),
        (
            "  of which buffers (reassembly + outbox)",
            REASSEMBLY_BYTES + OUTBOX_BYTES,
        ),
        (
            "core peripheral with the firmware's ChaCha20 RNG",
            core::mem::size_of::<FirmwarePeripheral<RustCrypto, ChaCha20Rng>>(),
        ),
        (
            "firmware connection (core + demo service)",
            core::mem::size_of::<Connection<RustCrypto, ChaCha20Rng, MappedFlash>>(),
        ),
        (
            "firmware connection, plaintext build",
            core::mem::size_of::<Connection<NoCrypto, ChaCha20Rng, MappedFlash>>(),
        ),
    ]
}
