//! Making a [`Pair`]: the harness's types, identity and seed, and [`PairBuilder`].

use std::time::Duration;

use blerpc_proto::Instant;
use blerpc_proto::connection::{Central, CentralConfig, Peripheral, PeripheralConfig, Pinning};
use blerpc_proto::crypto::{CryptoProvider, IdentitySeed, RustCrypto};
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use super::app::Service;
use super::{AppConfig, BleWire, Latency, Pair, Wire};
use crate::ble::params::{LinkParams, ParamError};

/// The harness's central.
pub type TestCentral = Central<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;
/// The harness's peripheral.
pub type TestPeripheral = Peripheral<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;

/// The identity seed every harness peripheral uses (RFC 8032 test 1).
pub const IDENTITY_SEED: [u8; 32] = [
    0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
    0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60,
];

/// The public key of [`IDENTITY_SEED`].
pub fn identity_public() -> [u8; 32] {
    RustCrypto.identity_public(&identity())
}

fn identity() -> <RustCrypto as CryptoProvider>::Identity {
    // The seed is a constant that loads (RFC 8032 test 1); a failure is a broken crypto crate.
    match RustCrypto.load_identity(&IdentitySeed::from_bytes(IDENTITY_SEED)) {
        Ok(id) => id,
        Err(e) => panic!("the harness identity does not load: {e}"),
    }
}

/// The seed for this test: `BLERPC_SEED` or a fixed default.
pub fn seed() -> u64 {
    std::env::var("BLERPC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_b1e5)
}

/// Prints the seed if the test panics.
#[derive(Debug)]
pub struct SeedGuard(pub u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scenario failed with BLERPC_SEED={}", self.0);
        }
    }
}

/// Builds a [`Pair`]: the two configurations, whether the peripheral has the identity
/// (encryption offered), the one-way latency, the seed.
#[derive(Clone, Debug)]
pub struct PairBuilder {
    /// The central's configuration (default: pinned to [`identity_public`]).
    pub central: CentralConfig,
    /// The peripheral's configuration (default: 65,535-byte requests, 4 pending).
    pub peripheral: PeripheralConfig,
    /// The peripheral has [`IDENTITY_SEED`] and offers encryption.
    pub identity: bool,
    /// The one-way delay of the [`Latency`] wire.
    pub latency: Duration,
    /// The seed of both peers' RNGs and the interceptor's.
    pub seed: u64,
    /// The demo application's behaviour.
    pub app: AppConfig,
}

impl Default for PairBuilder {
    fn default() -> Self {
        let central = CentralConfig {
            pinning: Pinning::Expect(identity_public()),
            ..Default::default()
        };
        let peripheral = PeripheralConfig {
            max_request_len: 65_535,
            max_pending_requests: 4,
            ..Default::default()
        };
        PairBuilder {
            central,
            peripheral,
            identity: true,
            latency: Duration::from_millis(1),
            seed: seed(),
            app: AppConfig::default(),
        }
    }
}

impl PairBuilder {
    /// Neither side encrypts (the peripheral has no identity).
    pub fn plaintext() -> Self {
        let mut b = PairBuilder {
            identity: false,
            ..PairBuilder::default()
        };
        b.central.require_encryption = false;
        b.peripheral.require_encryption = false;
        b
    }

    /// The default (encrypted) builder, or [`PairBuilder::plaintext`].
    pub fn encrypted(encrypted: bool) -> Self {
        if encrypted {
            PairBuilder::default()
        } else {
            PairBuilder::plaintext()
        }
    }

    /// Both sides at ATT MTU `mtu`.
    pub fn mtu(mut self, mtu: usize) -> Self {
        self.central.att_mtu = mtu;
        self.peripheral.att_mtu = mtu;
        self
    }

    /// A pair on the [`Latency`] wire.
    pub fn build(self) -> Pair {
        let latency = self.latency;
        self.build_with(|_| Latency::new(latency))
    }

    /// A pair on the BLE model: connection events, packet pairs and time on air per `params`
    /// (both sides' ATT MTU become `params.att_mtu`).
    pub fn build_ble(self, params: LinkParams) -> Result<Pair<BleWire>, ParamError> {
        let wire = BleWire::new(params, START)?;
        Ok(self.mtu(params.att_mtu).build_with(|_| wire))
    }

    /// A pair on the wire `make` returns for the start instant.
    pub fn build_with<W: Wire>(self, make: impl FnOnce(Instant) -> W) -> Pair<W> {
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed);
        let now = START;
        let crng = ChaCha20Rng::seed_from_u64(rng.next_u64());
        let prng = ChaCha20Rng::seed_from_u64(rng.next_u64());
        let central = match TestCentral::new(self.central, RustCrypto, crng, now) {
            Ok(c) => c,
            Err(e) => panic!("harness central configuration: {e}"),
        };
        let id = self.identity.then(identity);
        let peripheral = match TestPeripheral::new(self.peripheral, RustCrypto, id, prng) {
            Ok(p) => p,
            Err(e) => panic!("harness peripheral configuration: {e}"),
        };
        let svc = Service::new(&self.app);
        let mut pair = Pair {
            seed: self.seed,
            rng,
            now,
            central,
            peripheral,
            wire: make(now),
            interceptor: None,
            app: self.app,
            check_echo: false,
            log_pdus: true,
            strict_calls: false,
            central_events: Vec::new(),
            peripheral_warnings: Vec::new(),
            peripheral_cancels: 0,
            peripheral_closed: None,
            peripheral_requests: Vec::new(),
            sent_c2p: Vec::new(),
            sent_p2c: Vec::new(),
            requests_taken: 0,
            responses_checked: 0,
            svc,
            chat: super::chat::Chat::default(),
            calls: Vec::new(),
            connected: false,
            central_closed: false,
            _guard: SeedGuard(self.seed),
        };
        pair.flush();
        pair
    }
}

/// The instant every pair starts at.
pub(super) const START: Instant = Instant::from_millis(1_000);
