//! The fixed keys of the handshake and session targets (wire.md §6.5, the same as
//! `testdata/vectors/key_exchange.json`).

use blerpc_proto::crypto::{CryptoProvider, IdentitySeed, RustCrypto};

/// Central ephemeral X25519 private key (RFC 7748 Alice).
pub const CENTRAL_EPHEMERAL: [u8; 32] =
    hex32(b"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
/// Peripheral ephemeral X25519 private key (RFC 7748 Bob).
pub const PERIPHERAL_EPHEMERAL: [u8; 32] =
    hex32(b"5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
/// Peripheral identity seed (RFC 8032 test 1).
pub const IDENTITY_SEED: [u8; 32] =
    hex32(b"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
/// The vectors' session key.
pub const SESSION_KEY: [u8; 16] = [
    0x12, 0xe6, 0x8d, 0x83, 0x0b, 0x38, 0x02, 0x89, 0x6b, 0x9f, 0x09, 0x48, 0xa4, 0xf5, 0xfe, 0x5a,
];
/// Central confirmation nonce of the vectors.
pub const CENTRAL_NONCE: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
/// Peripheral confirmation nonce of the vectors.
pub const PERIPHERAL_NONCE: [u8; 12] = [12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23];

const fn hex32(s: &[u8; 64]) -> [u8; 32] {
    const fn nibble(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("bad hex"),
        }
    }
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        out[i] = (nibble(s[2 * i]) << 4) | nibble(s[2 * i + 1]);
        i += 1;
    }
    out
}

/// The peripheral identity of [`IDENTITY_SEED`].
pub fn identity() -> <RustCrypto as CryptoProvider>::Identity {
    RustCrypto
        .load_identity(&IdentitySeed::from_bytes(IDENTITY_SEED))
        .expect("identity seed loads")
}
