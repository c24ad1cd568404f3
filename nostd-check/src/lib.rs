//! A firmware-shaped use of the core: a no-alloc peripheral with a 12 KB reassembly buffer,
//! exported to C. The C side supplies randomness (as an MCU's TRNG would) and feeds PDUs.
#![no_std]

use blerpc_proto::buf::ArrayBuf;
use blerpc_proto::connection::{Peripheral, PeripheralConfig, PeripheralEvent};
use blerpc_proto::crypto::{CryptoProvider, IdentitySeed, RustCrypto};
use blerpc_proto::Instant;

unsafe extern "C" {
    /// Fills `len` bytes at `buf` with random bytes (the board's TRNG).
    fn platform_random(buf: *mut u8, len: usize);
}

/// An RNG over the board's TRNG.
struct BoardRng;

impl rand_core::RngCore for BoardRng {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        // SAFETY: `dest` is a valid, writable buffer of `dest.len()` bytes.
        unsafe { platform_random(dest.as_mut_ptr(), dest.len()) }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}
impl rand_core::CryptoRng for BoardRng {}

/// The firmware's peripheral: 12 KB reassembly (one slot), an outbox for one encrypted 8 KB response.
pub(crate) type FirmwarePeripheral =
    Peripheral<RustCrypto, BoardRng, ArrayBuf<12288>, ArrayBuf<8448>, 1>;

static mut PERIPHERAL: Option<FirmwarePeripheral> = None;

#[allow(static_mut_refs)]
fn peripheral() -> Option<&'static mut FirmwarePeripheral> {
    // SAFETY: the C test is single-threaded and calls these functions one at a time.
    unsafe { PERIPHERAL.as_mut() }
}

/// Size in bytes of one peripheral connection's state.
#[unsafe(no_mangle)]
pub extern "C" fn blerpc_peripheral_size() -> usize {
    core::mem::size_of::<FirmwarePeripheral>()
}

/// Creates the peripheral with the 32-byte identity seed at `seed`. Returns 0 on success.
///
/// # Safety
/// `seed` must point to 32 readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blerpc_peripheral_init(seed: *const u8) -> i32 {
    let mut s = [0u8; 32];
    // SAFETY: the caller guarantees 32 readable bytes.
    unsafe { core::ptr::copy_nonoverlapping(seed, s.as_mut_ptr(), 32) };
    let Ok(identity) = RustCrypto.load_identity(&IdentitySeed::from_bytes(s)) else {
        return -2;
    };
    let config = PeripheralConfig::default();
    match FirmwarePeripheral::new(config, RustCrypto, Some(identity), BoardRng) {
        Ok(p) => {
            // SAFETY: single-threaded test harness.
            unsafe { PERIPHERAL = Some(p) };
            0
        }
        Err(_) => -1,
    }
}

/// Feeds one PDU at `now_ms`, answers echo requests, and writes the next outgoing PDU into
/// `out` (capacity `out_cap`). Returns the PDU length, 0 if there is none, or -1 on error.
///
/// # Safety
/// `pdu` must point to `len` readable bytes and `out` to `out_cap` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blerpc_peripheral_input(
    now_ms: u64,
    pdu: *const u8,
    len: usize,
    out: *mut u8,
    out_cap: usize,
) -> i32 {
    let Some(p) = peripheral() else { return -1 };
    let now = Instant::from_millis(now_ms);
    // SAFETY: guaranteed by the caller.
    let pdu = unsafe { core::slice::from_raw_parts(pdu, len) };
    // SAFETY: guaranteed by the caller.
    let out = unsafe { core::slice::from_raw_parts_mut(out, out_cap) };
    if p.handle_input(now, pdu).is_err() {
        return -1;
    }
    let mut echo: Option<(u8, [u8; 64], usize)> = None;
    while let Some(ev) = p.poll_event() {
        if let PeripheralEvent::Request { tid, name: "echo", data, .. } = ev {
            let mut copy = [0u8; 64];
            let n = data.len().min(64);
            copy[..n].copy_from_slice(&data[..n]);
            echo = Some((tid, copy, n));
        }
    }
    if let Some((tid, data, n)) = echo {
        if p.respond(now, tid, "echo", &data[..n]).is_err() {
            return -1;
        }
    }
    match p.poll_transmit(now, out) {
        Some(n) => n as i32,
        None => 0,
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}

/// The host target's precompiled `core` is built with unwinding and references this symbol;
/// with `panic = "abort"` it is never called. (Bare-metal targets do not need it.)
#[unsafe(no_mangle)]
pub extern "C" fn rust_eh_personality() {}
