//! # blerpc-codec-workloads: the codec benchmark's workloads
//!
//! The same work the reference Python library does in `crates/blerpc-bench/python/codec_ref.py`,
//! step for step, so the two can be timed side by side: `blerpc-bench codec` runs these
//! natively, the browser central (`blerpc-web`, feature `codec-bench`) in WebAssembly.
//!
//! ```text
//! enc_8k    RESPONSE flash_read, 8 195 B protobuf   emit → seal (P→C) → split MTU 247 (35 PDUs)
//!           → parse each PDU → assemble → open (central) → parse command
//! enc_echo  REQUEST echo, 7 B protobuf              the same path, C→P (1 PDU)
//! plain_8k  RESPONSE flash_read, 8 195 B            the same path without the session (35 PDUs)
//! kx        full key exchange, both roles           fresh ephemeral keys and confirmation nonces
//! ```
//!
//! Each workload is a struct built once (keys, sessions and the assembler live across
//! iterations, as they do on a connection) whose `run_once` performs one message or one
//! handshake and checks the result cheaply; [`CodecPath::verify`] checks full equality outside
//! the timed region.
//!
//! ```
//! use blerpc_codec_workloads::{CodecPath, Workload, expected_pdus};
//! use blerpc_proto::crypto::RustCrypto;
//!
//! let mut path = CodecPath::new(Workload::EncEcho, &RustCrypto)?;
//! assert_eq!(path.run_once()?, expected_pdus(Workload::EncEcho));
//! path.verify(expected_pdus(Workload::EncEcho))?;
//! # Ok::<(), anyhow::Error>(())
//! ```

use anyhow::{Context as _, Result, bail, ensure};
use blerpc_proto::Role;
use blerpc_proto::assemble::{Assembler, AssemblerConfig};
use blerpc_proto::crypto::{CryptoProvider, IdentitySeed, NONCE_LEN, SessionKey, X25519Secret};
use blerpc_proto::handshake::{CentralHandshake, PeripheralHandshake};
use blerpc_proto::session::{COUNTER_LEN, SESSION_OVERHEAD, Session};
use blerpc_proto::split::{SplitCursor, effective_mtu};
use blerpc_proto::wire::command::{Command, CommandType};
use blerpc_proto::wire::container::Container;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

/// ATT MTU of every workload (the usual negotiated BLE value).
pub const MTU: usize = 247;
/// Bytes of flash data in the 8 KB response.
pub const FLASH_LEN: usize = 8192;
/// The echo request's protobuf: `EchoRequest { message: "hello" }`.
pub const ECHO_DATA: &[u8] = b"\x0a\x05hello";
/// The session key of the data-path workloads (any fixed key; the handshake is timed apart).
pub const SESSION_KEY: [u8; 16] = *b"blerpc-bench-key";

/// Flash byte `i`: `(i * 31 + 7) mod 256` (the Python driver uses the same formula).
pub fn flash_byte(i: usize) -> u8 {
    // `% 256` first, so the cast never truncates.
    ((i * 31 + 7) % 256) as u8
}

/// `FlashReadResponse { address: 0 (omitted), data: 8192 bytes }` encoded by hand:
/// field 2, wire type 2 (`0x12`), varint length 8192 (`80 40`), then the bytes.
pub fn flash_read_response() -> Vec<u8> {
    let mut v = Vec::with_capacity(3 + FLASH_LEN);
    v.extend_from_slice(&[0x12, 0x80, 0x40]);
    v.extend((0..FLASH_LEN).map(flash_byte));
    v
}

/// The workloads, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    /// 8 KB response through the encrypted codec path.
    Enc8k,
    /// 5-byte echo request through the encrypted codec path.
    EncEcho,
    /// 8 KB response through the codec path without encryption.
    Plain8k,
    /// A full key exchange, both roles.
    Kx,
}

impl Workload {
    /// All workloads in table order.
    pub const ALL: [Workload; 4] = [
        Workload::Enc8k,
        Workload::EncEcho,
        Workload::Plain8k,
        Workload::Kx,
    ];
    /// The name shared with the Python driver.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Enc8k => "enc_8k",
            Workload::EncEcho => "enc_echo",
            Workload::Plain8k => "plain_8k",
            Workload::Kx => "kx",
        }
    }
    /// Parses a name given by [`Workload::name`].
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == s)
    }
    /// Whether the Rust result depends on the crypto provider.
    pub fn uses_crypto(self) -> bool {
        self != Workload::Plain8k
    }
    /// The required speed-up over the reference (Python median / Rust median).
    pub fn target(self) -> f64 {
        match self {
            Workload::Enc8k | Workload::EncEcho => 50.0,
            Workload::Plain8k => 100.0,
            Workload::Kx => 2.5,
        }
    }
}

/// One message through the codec path: sender (command emit, optional seal, split into PDUs)
/// and receiver (PDU parse, assemble, optional open, command parse), as a connection does it.
pub struct CodecPath<P: CryptoProvider> {
    kind: CommandType,
    name: &'static str,
    /// The request/response data, placed inside `data_storage` at `data_off` (see `place_data`).
    data_storage: Vec<u8>,
    data_off: usize,
    data_len: usize,
    tx: Option<Session<P::Aead>>,
    rx: Option<Session<P::Aead>>,
    assembler: Assembler<Vec<u8>, 4>,
    pdu: Vec<u8>,
    /// The sender's message buffer (the connection's outbox keeps its capacity the same way).
    send_buf: Vec<u8>,
    tid: u8,
    /// The last received command, copied out for [`CodecPath::verify`] (not in the timed loop).
    keep_last: bool,
    last: Option<(CommandType, String, Vec<u8>)>,
}

/// Copies `data` into a fresh buffer at an offset whose distance to `dst` (where the sender
/// copies it to) is half a page modulo 4096.
///
/// Copying 8 KB between two addresses a few dozen bytes apart modulo 4096 stalls on "4K
/// aliasing" (loads falsely wait for stores to the same page offset) and takes several times
/// longer. Which offsets the heap hands out depends on what ran before (a key
/// exchange's allocations shift it), which made repetitions bimodal. Fixing the distance makes
/// runs comparable; real senders avoid this copy altogether (`respond_with` encodes in place).
fn place_data(data: &[u8], dst: usize) -> (Vec<u8>, usize) {
    let mut storage = vec![0u8; data.len() + 4096];
    let base = storage.as_ptr() as usize;
    // Want (dst - (base + off)) mod 4096 == 2048.
    let off = (dst.wrapping_sub(base).wrapping_sub(2048)) & 4095;
    storage[off..off + data.len()].copy_from_slice(data);
    (storage, off)
}

impl<P: CryptoProvider> CodecPath<P> {
    /// The data the sender sends.
    pub fn data(&self) -> &[u8] {
        &self.data_storage[self.data_off..self.data_off + self.data_len]
    }

    /// The path for `workload` (not [`Workload::Kx`]); `provider` is used only when encrypted.
    pub fn new(workload: Workload, provider: &P) -> Result<Self> {
        let (kind, name, data, encrypted) = match workload {
            Workload::Enc8k => (
                CommandType::Response,
                "flash_read",
                flash_read_response(),
                true,
            ),
            Workload::Plain8k => (
                CommandType::Response,
                "flash_read",
                flash_read_response(),
                false,
            ),
            Workload::EncEcho => (CommandType::Request, "echo", ECHO_DATA.to_vec(), true),
            Workload::Kx => bail!("kx is not a codec path"),
        };
        // The sender's role follows the command: responses go P→C, requests C→P.
        let (tx_role, rx_role) = match kind {
            CommandType::Response => (Role::Peripheral, Role::Central),
            CommandType::Request => (Role::Central, Role::Peripheral),
        };
        let session = |role| -> Result<Session<P::Aead>> {
            // One keyed AEAD per session, built once, as the handshake hands it to a connection.
            let aead = provider
                .aead(&SessionKey::from_bytes(SESSION_KEY))
                .context("AES key schedule")?;
            Ok(Session::new(aead, role))
        };
        let (tx, rx) = if encrypted {
            (Some(session(tx_role)?), Some(session(rx_role)?))
        } else {
            (None, None)
        };
        // The send buffer holds the whole message from the start (as the outbox does after its
        // first message), so its address is fixed for the run.
        let header_len = Command::header_len(name.len());
        let pre = if encrypted { COUNTER_LEN } else { 0 };
        let send_buf = Vec::with_capacity(pre + header_len + data.len() + SESSION_OVERHEAD);
        let (data_storage, data_off) =
            place_data(&data, send_buf.as_ptr() as usize + pre + header_len);
        Ok(CodecPath {
            kind,
            name,
            data_storage,
            data_off,
            data_len: data.len(),
            tx,
            rx,
            assembler: Assembler::new(AssemblerConfig::default()),
            pdu: vec![0; effective_mtu(MTU)],
            send_buf,
            tid: 0,
            keep_last: false,
            last: None,
        })
    }

    /// One message end to end; returns the number of PDUs it took.
    pub fn run_once(&mut self) -> Result<usize> {
        // Sender, as the connection's outbox does it: the command header and data are appended
        // to the send buffer (kept between messages, no zero-fill), with 4 + 16 bytes of room for
        // the counter and tag when encrypting, then sealed in place.
        let encrypted = self.tx.is_some();
        let header_len = Command::header_len(self.name.len());
        let wire_len = header_len + self.data_len + if encrypted { SESSION_OVERHEAD } else { 0 };
        let body = &mut self.send_buf;
        body.clear();
        body.reserve(wire_len);
        if encrypted {
            body.extend_from_slice(&[0u8; COUNTER_LEN]);
        }
        let mut header = [0u8; 4 + 255];
        let header = header.get_mut(..header_len).context("command header")?;
        Command::emit_header(self.kind, self.name, self.data_len, header).context("header")?;
        body.extend_from_slice(header);
        body.extend_from_slice(&self.data_storage[self.data_off..self.data_off + self.data_len]);
        if let Some(tx) = self.tx.as_mut() {
            body.extend_from_slice(&[0u8; SESSION_OVERHEAD - COUNTER_LEN]);
            tx.seal_in_place(body).context("seal")?;
        }

        // Split into PDUs; each is delivered to the receiver as the link would.
        let tid = self.tid;
        self.tid = self.tid.wrapping_add(1);
        let mut cursor = SplitCursor::new(tid, body.len(), MTU).context("split")?;
        let mut pdus = 0;
        let mut done = None;
        while let Some(n) = cursor
            .emit_next(body, &mut self.pdu)
            .context("emit container")?
        {
            pdus += 1;
            let pdu = self.pdu.get(..n).context("container length")?;
            let container = match Container::parse(pdu) {
                Ok(c) => c,
                Err(e) => bail!("container parse: {e}"),
            };
            if let Some(d) = self.assembler.feed(&container).context("assemble")? {
                done = Some(d);
            }
        }
        let done = done.context("message did not complete")?;

        // Receiver: open in place in the assembler's slot, parse, check, release.
        let msg = self.assembler.message_mut(done);
        let plain = match self.rx.as_mut() {
            Some(rx) => {
                let range = rx.open_in_place(msg).context("open")?;
                msg.get(range).context("plaintext range")?
            }
            None => &*msg,
        };
        let got = Command::parse(plain).context("command parse")?;
        ensure!(
            got.kind == self.kind && got.name == self.name && got.data.len() == self.data_len,
            "received a different command"
        );
        if self.keep_last {
            self.last = Some((got.kind, got.name.to_owned(), got.data.to_vec()));
        }
        self.assembler.release(done);
        Ok(pdus)
    }

    /// Runs one message outside the timed region and checks it byte for byte.
    pub fn verify(&mut self, expected_pdus: usize) -> Result<()> {
        self.keep_last = true;
        let pdus = self.run_once();
        self.keep_last = false;
        let pdus = pdus?;
        ensure!(
            pdus == expected_pdus,
            "{pdus} PDUs, expected {expected_pdus}"
        );
        let (kind, name, data) = self.last.take().context("nothing received")?;
        ensure!(
            kind == self.kind && name == self.name && data == self.data(),
            "round trip changed the command"
        );
        Ok(())
    }
}

/// The central's and the peripheral's sessions after a handshake.
pub type SessionPair<P> = (
    Session<<P as CryptoProvider>::Aead>,
    Session<<P as CryptoProvider>::Aead>,
);

/// A full key exchange between a fresh central and a fresh peripheral handshake.
///
/// Ephemeral X25519 keys and confirmation nonces come from a ChaCha20 CSPRNG seeded once (the
/// reference draws them from the OS through OpenSSL); the peripheral's Ed25519 identity is loaded
/// once, as a server does.
pub struct KeyExchange<P: CryptoProvider> {
    provider: P,
    identity: P::Identity,
    rng: ChaCha20Rng,
}

impl<P: CryptoProvider> KeyExchange<P> {
    /// A handshake runner; `seed` seeds the CSPRNG.
    pub fn new(provider: P, seed: u64) -> Result<Self> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let identity = provider
            .load_identity(&IdentitySeed::random(&mut rng))
            .context("load identity")?;
        Ok(KeyExchange {
            provider,
            identity,
            rng,
        })
    }

    fn nonce(&mut self) -> [u8; NONCE_LEN] {
        let mut n = [0u8; NONCE_LEN];
        self.rng.fill_bytes(&mut n);
        n
    }

    /// One handshake: start → step 1 → step 2 (sign) → verify → step 3 → step 4 → sessions.
    /// Returns both sessions (the caller drops them).
    pub fn run_once(&mut self) -> Result<SessionPair<P>> {
        let p = &self.provider;
        let (central, step1) =
            CentralHandshake::start(p.clone(), X25519Secret::random(&mut self.rng));
        let periph = PeripheralHandshake::new(p.clone(), self.identity.clone());
        let (periph, step2) = periph
            .receive_step1(&step1, X25519Secret::random(&mut self.rng))
            .context("step 1")?;
        // The reference is benchmarked without a verify callback, so any valid signature is
        // accepted here too.
        let central = central.receive_step2(&step2).context("step 2")?;
        let n3 = self.nonce();
        let (central, step3) = central.accept(n3).context("step 3")?;
        let n4 = self.nonce();
        let (periph_session, step4) = periph
            .receive_step3(&step3, n4)
            .context("step 3 (peripheral)")?;
        let central_session = central.receive_step4(&step4).context("step 4")?;
        Ok((central_session, periph_session))
    }

    /// Runs one handshake and checks that the two sessions share a key (a sealed message opens).
    pub fn verify(&mut self) -> Result<()> {
        let (mut c, mut p) = self.run_once()?;
        let mut buf = vec![0u8; 5 + SESSION_OVERHEAD];
        buf.get_mut(COUNTER_LEN..COUNTER_LEN + 5)
            .context("buffer")?
            .copy_from_slice(b"hello");
        c.seal_in_place(&mut buf).context("seal")?;
        let range = p.open_in_place(&mut buf).context("sessions disagree")?;
        ensure!(buf.get(range) == Some(&b"hello"[..]), "wrong plaintext");
        Ok(())
    }
}

/// PDUs each codec workload takes at MTU 247.
pub fn expected_pdus(w: Workload) -> usize {
    match w {
        Workload::Enc8k | Workload::Plain8k => 35,
        Workload::EncEcho => 1,
        Workload::Kx => 0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use blerpc_proto::crypto::RustCrypto;

    #[test]
    fn workloads_round_trip() {
        for w in [Workload::Enc8k, Workload::EncEcho, Workload::Plain8k] {
            let mut path = CodecPath::new(w, &RustCrypto).unwrap();
            path.verify(expected_pdus(w)).unwrap();
            path.run_once().unwrap();
        }
        KeyExchange::new(RustCrypto, 1).unwrap().verify().unwrap();
    }

    #[test]
    fn flash_response_layout() {
        let r = flash_read_response();
        assert_eq!(r.len(), 8195);
        assert_eq!(&r[..5], &[0x12, 0x80, 0x40, 7, 38]);
    }
}
