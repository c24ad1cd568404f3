//! The four KEY_EXCHANGE payloads of the handshake (codecs only; the cryptography is in
//! [`crate::handshake`]).
//!
//! Each is the payload of one KEY_EXCHANGE control container. The first byte names the step.
//!
//! ```text
//! step 1  C→P  33 B   [0]=0x01 [1..33]  central_x25519_pub
//! step 2  P→C  129 B  [0]=0x02 [1..33]  periph_x25519_pub
//!                              [33..97] ed25519 signature over central_pub ‖ periph_pub
//!                              [97..129] periph_ed25519_pub (identity)
//! step 3  C→P  45 B   [0]=0x03 [1..13]  nonce   [13..29] AES-GCM(K, nonce, "BLERPC_CONFIRM_C")
//!                                               [29..45] tag
//! step 4  P→C  45 B   [0]=0x04 [1..13]  nonce   [13..29] AES-GCM(K, nonce, "BLERPC_CONFIRM_P")
//!                                               [29..45] tag
//! ```
//!
//! Like the reference parsers, [`KeyExchangeStep::parse`] accepts payloads longer than the step
//! needs and ignores the extra bytes. A step byte other than 1..=4 is
//! [`WireError::InvalidValue`] with field `"step"`.

use super::{WireError, out_prefix, read_array, read_u8};

/// Length of the step 1 payload.
pub const STEP1_LEN: usize = 33;
/// Length of the step 2 payload.
pub const STEP2_LEN: usize = 129;
/// Length of the step 3 payload.
pub const STEP3_LEN: usize = 45;
/// Length of the step 4 payload.
pub const STEP4_LEN: usize = 45;

/// Step 1 (central → peripheral): the central's ephemeral X25519 public key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step1 {
    /// The central's ephemeral X25519 public key.
    pub central_public: [u8; 32],
}

/// Step 2 (peripheral → central): the peripheral's ephemeral key, signed by its identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step2 {
    /// The peripheral's ephemeral X25519 public key.
    pub peripheral_public: [u8; 32],
    /// Ed25519 signature over `central_public ‖ peripheral_public`.
    pub signature: [u8; 64],
    /// The peripheral's long-term Ed25519 public key.
    pub identity: [u8; 32],
}

/// Step 3 or 4: a key confirmation, the AES-GCM encryption of a fixed 16-byte label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirmation {
    /// The random AES-GCM nonce.
    pub nonce: [u8; 12],
    /// Ciphertext (16 bytes) followed by the tag (16 bytes).
    pub sealed: [u8; 32],
}

/// One parsed KEY_EXCHANGE payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyExchangeStep {
    /// Step 1, central → peripheral.
    Step1(Step1),
    /// Step 2, peripheral → central.
    Step2(Step2),
    /// Step 3, the central's confirmation.
    Step3(Confirmation),
    /// Step 4, the peripheral's confirmation.
    Step4(Confirmation),
}

fn copy_into(out: &mut [u8], offset: usize, bytes: &[u8]) {
    if let Some(dst) = out
        .get_mut(offset..)
        .and_then(|rest| rest.get_mut(..bytes.len()))
    {
        dst.copy_from_slice(bytes);
    }
}

impl Step1 {
    /// The 33-byte payload.
    pub fn to_bytes(&self) -> [u8; STEP1_LEN] {
        let mut out = [0u8; STEP1_LEN];
        out[0] = 1;
        copy_into(&mut out, 1, &self.central_public);
        out
    }
}

impl Step2 {
    /// The signed message: `central_public ‖ peripheral_public`.
    pub fn signed_message(central_public: &[u8; 32], peripheral_public: &[u8; 32]) -> [u8; 64] {
        let mut msg = [0u8; 64];
        copy_into(&mut msg, 0, central_public);
        copy_into(&mut msg, 32, peripheral_public);
        msg
    }

    /// The 129-byte payload.
    pub fn to_bytes(&self) -> [u8; STEP2_LEN] {
        let mut out = [0u8; STEP2_LEN];
        out[0] = 2;
        copy_into(&mut out, 1, &self.peripheral_public);
        copy_into(&mut out, 33, &self.signature);
        copy_into(&mut out, 97, &self.identity);
        out
    }
}

impl Confirmation {
    /// Builds a confirmation from its nonce, ciphertext and tag.
    pub fn new(nonce: [u8; 12], ciphertext: &[u8; 16], tag: &[u8; 16]) -> Self {
        let mut sealed = [0u8; 32];
        copy_into(&mut sealed, 0, ciphertext);
        copy_into(&mut sealed, 16, tag);
        Confirmation { nonce, sealed }
    }

    /// The 16-byte ciphertext.
    pub fn ciphertext(&self) -> [u8; 16] {
        let mut ct = [0u8; 16];
        ct.copy_from_slice(self.sealed.split_at(16).0);
        ct
    }

    /// The 16-byte AES-GCM tag.
    pub fn tag(&self) -> [u8; 16] {
        let mut tag = [0u8; 16];
        tag.copy_from_slice(self.sealed.split_at(16).1);
        tag
    }

    /// The 45-byte payload with step byte 3.
    pub fn to_step3_bytes(&self) -> [u8; STEP3_LEN] {
        self.encode_with(3)
    }

    /// The 45-byte payload with step byte 4.
    pub fn to_step4_bytes(&self) -> [u8; STEP4_LEN] {
        self.encode_with(4)
    }

    fn encode_with(&self, step: u8) -> [u8; 45] {
        let mut out = [0u8; 45];
        out[0] = step;
        copy_into(&mut out, 1, &self.nonce);
        copy_into(&mut out, 13, &self.sealed);
        out
    }

    fn parse(payload: &[u8]) -> Result<Self, WireError> {
        Ok(Confirmation {
            nonce: read_array(payload, 1, "nonce")?,
            sealed: read_array(payload, 13, "sealed")?,
        })
    }
}

impl KeyExchangeStep {
    /// Parses a KEY_EXCHANGE payload. Bytes after the step's fixed length are ignored.
    pub fn parse(payload: &[u8]) -> Result<Self, WireError> {
        match read_u8(payload, 0, "step")? {
            1 => Ok(KeyExchangeStep::Step1(Step1 {
                central_public: read_array(payload, 1, "central_public")?,
            })),
            2 => Ok(KeyExchangeStep::Step2(Step2 {
                peripheral_public: read_array(payload, 1, "peripheral_public")?,
                signature: read_array(payload, 33, "signature")?,
                identity: read_array(payload, 97, "identity")?,
            })),
            3 => Confirmation::parse(payload).map(KeyExchangeStep::Step3),
            4 => Confirmation::parse(payload).map(KeyExchangeStep::Step4),
            other => Err(WireError::InvalidValue {
                field: "step",
                offset: 0,
                value: u32::from(other),
            }),
        }
    }

    /// The step number, 1..=4.
    pub fn step(&self) -> u8 {
        match self {
            KeyExchangeStep::Step1(_) => 1,
            KeyExchangeStep::Step2(_) => 2,
            KeyExchangeStep::Step3(_) => 3,
            KeyExchangeStep::Step4(_) => 4,
        }
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub fn emitted_len(&self) -> usize {
        match self {
            KeyExchangeStep::Step1(_) => STEP1_LEN,
            KeyExchangeStep::Step2(_) => STEP2_LEN,
            KeyExchangeStep::Step3(_) => STEP3_LEN,
            KeyExchangeStep::Step4(_) => STEP4_LEN,
        }
    }

    /// Writes the payload to the front of `out` and returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let dst = out_prefix(out, self.emitted_len())?;
        match self {
            KeyExchangeStep::Step1(s) => dst.copy_from_slice(&s.to_bytes()),
            KeyExchangeStep::Step2(s) => dst.copy_from_slice(&s.to_bytes()),
            KeyExchangeStep::Step3(c) => dst.copy_from_slice(&c.to_step3_bytes()),
            KeyExchangeStep::Step4(c) => dst.copy_from_slice(&c.to_step4_bytes()),
        }
        Ok(dst.len())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn h(s: &str) -> alloc_free::Bytes {
        alloc_free::Bytes::from_hex(s)
    }

    /// A tiny fixed-capacity hex decoder so these tests also run without `std`.
    mod alloc_free {
        pub struct Bytes {
            pub buf: [u8; 160],
            pub len: usize,
        }
        impl Bytes {
            pub fn from_hex(s: &str) -> Self {
                let mut buf = [0u8; 160];
                let n = hex::decode_to_slice(s, &mut buf[..s.len() / 2])
                    .map(|()| s.len() / 2)
                    .unwrap();
                Bytes { buf, len: n }
            }
            pub fn as_slice(&self) -> &[u8] {
                &self.buf[..self.len]
            }
        }
    }

    const STEP1: &str = "018520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
    const STEP2: &str = concat!(
        "02de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
        "21e1fd6899395fcddad2e8c47c1559d360962fd6aea958a705e887a3063acf94507d3b284813b1a8a2b5e7e570dd44686941f768604fa72ea6b10d5c369a6703",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    );
    const STEP3: &str = "03000102030405060708090a0bdeab3e3f1abac538d48c34b53f5dfbf9a10f3b100a97271990fc4feb34984228";
    const STEP4: &str = "040c0d0e0f1011121314151617a8c38de0e9e241a418051789fa9f9a99c149db82f3c0bf86d68efc3c97d396a3";

    fn roundtrip(hex: &str, step: u8, len: usize) -> KeyExchangeStep {
        let bytes = h(hex);
        let parsed = KeyExchangeStep::parse(bytes.as_slice()).unwrap();
        assert_eq!(parsed.step(), step);
        assert_eq!(parsed.emitted_len(), len);
        let mut out = [0u8; 200];
        assert_eq!(parsed.emit(&mut out).unwrap(), len);
        assert_eq!(&out[..len], bytes.as_slice());
        // Trailing bytes are ignored.
        let mut longer = [0xAAu8; 200];
        longer[..len].copy_from_slice(bytes.as_slice());
        assert_eq!(KeyExchangeStep::parse(&longer[..len + 7]).unwrap(), parsed);
        // One byte short is truncated.
        assert!(matches!(
            KeyExchangeStep::parse(&bytes.as_slice()[..len - 1]),
            Err(WireError::Truncated { .. })
        ));
        parsed
    }

    #[test]
    fn step1_vector() {
        let KeyExchangeStep::Step1(s) = roundtrip(STEP1, 1, STEP1_LEN) else {
            panic!()
        };
        assert_eq!(s.central_public[0], 0x85);
        assert_eq!(s.to_bytes().as_slice(), h(STEP1).as_slice());
    }

    #[test]
    fn step2_vector() {
        let KeyExchangeStep::Step2(s) = roundtrip(STEP2, 2, STEP2_LEN) else {
            panic!()
        };
        assert_eq!(s.peripheral_public[0], 0xde);
        assert_eq!(s.signature[0], 0x21);
        assert_eq!(s.signature[63], 0x03);
        assert_eq!(s.identity[0], 0xd7);
        assert_eq!(s.to_bytes().as_slice(), h(STEP2).as_slice());
        let msg = Step2::signed_message(&[1; 32], &[2; 32]);
        assert_eq!(&msg[..32], &[1; 32]);
        assert_eq!(&msg[32..], &[2; 32]);
    }

    #[test]
    fn step3_and_step4_vectors() {
        let KeyExchangeStep::Step3(c) = roundtrip(STEP3, 3, STEP3_LEN) else {
            panic!()
        };
        assert_eq!(c.nonce, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(c.ciphertext()[0], 0xde);
        assert_eq!(c.tag()[0], 0xa1);
        assert_eq!(Confirmation::new(c.nonce, &c.ciphertext(), &c.tag()), c);
        assert_eq!(c.to_step3_bytes().as_slice(), h(STEP3).as_slice());
        let KeyExchangeStep::Step4(c) = roundtrip(STEP4, 4, STEP4_LEN) else {
            panic!()
        };
        assert_eq!(c.to_step4_bytes().as_slice(), h(STEP4).as_slice());
    }

    #[test]
    fn bad_step_byte_and_errors() {
        assert_eq!(
            KeyExchangeStep::parse(&[5; 40]),
            Err(WireError::InvalidValue {
                field: "step",
                offset: 0,
                value: 5
            })
        );
        assert_eq!(
            KeyExchangeStep::parse(&[0]),
            Err(WireError::InvalidValue {
                field: "step",
                offset: 0,
                value: 0
            })
        );
        assert_eq!(
            KeyExchangeStep::parse(&[]),
            Err(WireError::Truncated {
                field: "step",
                offset: 0,
                needed: 1,
                available: 0
            })
        );
        assert_eq!(
            KeyExchangeStep::parse(&[2; 100]),
            Err(WireError::Truncated {
                field: "identity",
                offset: 97,
                needed: 32,
                available: 3
            })
        );
        let step = KeyExchangeStep::Step1(Step1 {
            central_public: [9; 32],
        });
        assert_eq!(
            step.emit(&mut [0u8; 32]),
            Err(WireError::BufferTooSmall {
                needed: 33,
                available: 32
            })
        );
    }
}
