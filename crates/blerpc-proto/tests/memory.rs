//! RAM cost of a connection, measured with `size_of`. The crate docs quote these numbers; this
//! test fails when they drift, so the docs cannot rot.
use std::mem::size_of;

use blerpc_proto::buf::ArrayBuf;
use blerpc_proto::connection::{Central, Peripheral};
use blerpc_proto::crypto::RustCrypto;

/// A 0-byte RNG stand-in: an MCU's TRNG driver is a unit struct over registers.
pub struct Trng;
impl rand_chacha::rand_core::RngCore for Trng {
    fn next_u32(&mut self) -> u32 {
        0
    }
    fn next_u64(&mut self) -> u64 {
        0
    }
    fn fill_bytes(&mut self, _: &mut [u8]) {}
    fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), rand_chacha::rand_core::Error> {
        Ok(())
    }
}
impl rand_chacha::rand_core::CryptoRng for Trng {}

/// The firmware configuration: one 12 KB reassembly slot (`CONFIG_BLERPC_PROTOCOL_ASSEMBLER_BUF_SIZE`)
/// and an outbox that holds one encrypted 8 KB `flash_read` response (8,229 wire bytes + a 6-byte
/// entry header).
pub type FirmwarePeripheral = Peripheral<RustCrypto, Trng, ArrayBuf<12288>, ArrayBuf<8448>, 1>;

#[test]
fn peripheral_connection_ram() {
    let total = size_of::<FirmwarePeripheral>();
    let buffers = 12288 + 8448;
    println!(
        "firmware peripheral: {total} bytes ({buffers} in buffers, {} of state)",
        total - buffers
    );
    assert_eq!(
        total, DOCUMENTED_FIRMWARE_PERIPHERAL,
        "update the table in src/lib.rs"
    );
    // A host connection keeps its buffers on the heap and is small when idle.
    type HostPeripheral = Peripheral<RustCrypto, Trng, Vec<u8>, Vec<u8>, 4>;
    type HostCentral = Central<RustCrypto, Trng, Vec<u8>, Vec<u8>, 4>;
    println!(
        "host peripheral (idle): {} bytes",
        size_of::<HostPeripheral>()
    );
    println!("host central (idle): {} bytes", size_of::<HostCentral>());
    assert_eq!(
        size_of::<HostPeripheral>(),
        DOCUMENTED_HOST_PERIPHERAL,
        "update src/lib.rs"
    );
    assert_eq!(
        size_of::<HostCentral>(),
        DOCUMENTED_HOST_CENTRAL,
        "update src/lib.rs"
    );
}

const DOCUMENTED_FIRMWARE_PERIPHERAL: usize = 23_424;
const DOCUMENTED_HOST_PERIPHERAL: usize = 2_912;
const DOCUMENTED_HOST_CENTRAL: usize = 3_136;
