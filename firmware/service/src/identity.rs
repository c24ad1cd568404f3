//! The peripheral's Ed25519 identity seed: read from its own flash location, outside the range
//! `flash_read` may read, or the documented development seed while that location is erased.
//!
//! | what is stored at the identity location | the identity used |
//! |---|---|
//! | 32 bytes, not all `0xFF` and not all `0x00` | those bytes (a provisioned device) |
//! | erased (`0xFF` × 32) or zeroed | [`DEVELOPMENT_SEED`], and [`IdentitySource::Development`] says so |
//!
//! Provisioning writes the 32 raw seed bytes there (`docs/firmware.md`: `blerpc keygen`, then a
//! flash programmer at the board's identity address). The application image never covers that
//! location, so flashing a new image keeps the key; a full chip erase returns the device to the
//! development seed.
//!
//! The development seed is public (it is printed here), so a device using it authenticates
//! nothing: centrals that pin keys would pin a key everyone knows. It exists so a fresh board
//! works at once, and the firmware reports which seed is in use at start-up.

use blerpc_proto::crypto::IdentitySeed;

/// The development identity seed: the ASCII bytes `blerpc-firmware development seed`.
/// Public, for development only.
pub const DEVELOPMENT_SEED: [u8; 32] = *b"blerpc-firmware development seed";

/// Where the identity in use came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentitySource {
    /// The provisioned seed at the identity location.
    Provisioned,
    /// The identity location is erased: the public [`DEVELOPMENT_SEED`].
    Development,
}

/// The seed to use given the 32 bytes stored at the identity location.
pub fn identity_seed(stored: &[u8; 32]) -> (IdentitySeed, IdentitySource) {
    let erased = stored.iter().all(|&b| b == 0xFF) || stored.iter().all(|&b| b == 0);
    if erased {
        (
            IdentitySeed::from_bytes(DEVELOPMENT_SEED),
            IdentitySource::Development,
        )
    } else {
        (
            IdentitySeed::from_bytes(*stored),
            IdentitySource::Provisioned,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erased_locations_give_the_development_seed() {
        let (seed, source) = identity_seed(&[0xFF; 32]);
        assert_eq!(source, IdentitySource::Development);
        assert_eq!(seed.as_bytes(), &DEVELOPMENT_SEED);
        assert_eq!(identity_seed(&[0; 32]).1, IdentitySource::Development);
        let (seed, source) = identity_seed(&[7; 32]);
        assert_eq!(source, IdentitySource::Provisioned);
        assert_eq!(seed.as_bytes(), &[7; 32]);
    }
}
