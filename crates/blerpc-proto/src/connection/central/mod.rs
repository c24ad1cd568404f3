//! The central (client) role: connection setup, calls, streams, timeouts and BUSY retries.
//!
//! | file | holds |
//! |---|---|
//! | `config.rs` | [`CentralConfig`], [`Pinning`], [`SetupPipelining`], [`CallId`], [`CallKind`] |
//! | `event.rs` | [`CentralEvent`] and the records events are made of |
//! | `setup.rs` | TIMEOUT, CAPABILITIES, the key exchange and the identity decision |
//! | `calls.rs` | calls and streams both ways, BUSY retries, responses matched to calls |
//! | `streams.rs` | the streams extension: credits both ways, a bidirectional stream's items |
//! | `drain.rs` | a server stream that left while the peripheral may still send it, and the next one held |
//! | this file | the [`Central`] type, its accessors, and the sans-IO inputs and outputs |

mod calls;
mod config;
mod deadline;
mod drain;
mod event;
mod setup;
mod streams;

pub use config::{
    CallId, CallKind, CentralConfig, MIN_ATT_MTU_FOR_KEY_EXCHANGE, Pinning, SetupPipelining,
};
pub use event::CentralEvent;

use rand_core::CryptoRngCore;

use super::endpoint::Endpoint;
use super::{CloseReason, ConfigError, EventQueueFull, check_att_mtu, check_large_limit};
use crate::Instant;
use crate::Role;
use crate::assemble::AssemblerConfig;
use crate::buf::Buffer;
use crate::crypto::CryptoProvider;
use crate::wire::capabilities::{Capabilities, LargeLimits};
use crate::wire::container::{ContainerKind, ControlCmd};
use calls::Call;
use drain::Drain;
use event::Record;
use setup::State;

/// The central (client) side of one bleRPC connection. See the [module docs](super).
///
/// `A` holds reassembled responses (one per slot), `O` queued requests; `SLOTS` bounds both the
/// responses reassembled at once and the calls in flight. With `alloc`, `Vec<u8>` for both gives
/// a central whose idle memory is a few hundred bytes; without, `ArrayBuf<N>` fixes it.
pub struct Central<P: CryptoProvider, R, A: Buffer, O: Buffer, const SLOTS: usize> {
    config: CentralConfig,
    provider: P,
    rng: R,
    state: State<P>,
    next_call: u32,
    /// Responses and stream items the peripheral has answered calls with (wrapping): what
    /// tells a peripheral that is full from one that is stuck (see `busy_retries`).
    answered: u32,
    capabilities: Option<Capabilities>,
    /// The peripheral's limits while the large-message extension is in force.
    large: Option<LargeLimits>,
    peer_timeout_ms: u16,
    /// The tid of a TIMEOUT request sent together with CAPABILITIES and not answered yet.
    pending_timeout: Option<u8>,
    identity: Option<[u8; 32]>,
    /// Reassembly, outbox, controls and events (the central's controls are all small).
    ep: Endpoint<A, O, Record, SLOTS, 0>,
    calls: [Option<Call<O>>; SLOTS],
    /// A server stream that left while the peripheral may still be sending it.
    drain: Option<Drain<O>>,
    /// The cancel extension is in force (both announced it).
    cancel: bool,
    /// The deadline extension is in force (both announced it).
    deadline: bool,
    /// The streams extension is in force (both announced it).
    streams: bool,
    /// The request tid of the last call given up with a CANCEL: the rest of its answer that was
    /// already on the air (containers of a response whose start was dropped, or a whole
    /// response) is dropped without a warning.
    cancelled_tid: Option<u8>,
}

impl<P, R, A, O, const SLOTS: usize> Central<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    /// Creates a central for a link that has just connected and starts the setup sequence
    /// (TIMEOUT, CAPABILITIES, key exchange). `rng` supplies ephemeral keys and confirmation
    /// nonces.
    pub fn new(
        config: CentralConfig,
        provider: P,
        rng: R,
        now: Instant,
    ) -> Result<Self, ConfigError> {
        check_att_mtu(config.att_mtu)?;
        if config.max_calls_in_flight == 0 || config.max_calls_in_flight > SLOTS {
            return Err(ConfigError::Limit {
                field: "max_calls_in_flight",
            });
        }
        if config.max_response_len == 0 {
            return Err(ConfigError::Limit {
                field: "max_response_len",
            });
        }
        check_large_limit(
            config.large_messages,
            config.max_response_len,
            "max_response_len",
        )?;
        let assembler = AssemblerConfig {
            max_message_len: config.max_response_len,
            max_in_flight: SLOTS,
            large_messages: false,
            long_containers: false,
        };
        let mut central = Central {
            config,
            provider,
            rng,
            state: State::Ready(None),
            next_call: 0,
            answered: 0,
            capabilities: None,
            large: None,
            peer_timeout_ms: 100,
            pending_timeout: None,
            identity: None,
            ep: Endpoint::new(assembler, config.max_outbox_bytes),
            calls: core::array::from_fn(|_| None),
            drain: None,
            cancel: false,
            deadline: false,
            streams: false,
            cancelled_tid: None,
        };
        if config.skip_timeout_request {
            central.request_capabilities(now);
        } else {
            let tid = central.ep.alloc_tid();
            central.send_control(tid, ControlCmd::Timeout, &[]);
            if config.setup_pipelining == SetupPipelining::Off {
                central.state = State::AwaitTimeout {
                    tid,
                    deadline: now + central.config.setup_timeout,
                };
            } else {
                central.pending_timeout = Some(tid);
                central.request_capabilities(now);
            }
        }
        Ok(central)
    }

    // ----- accessors -------------------------------------------------------------------------

    /// The configuration in force.
    pub fn config(&self) -> &CentralConfig {
        &self.config
    }
    /// `true` once setup has finished and until the connection closes.
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready(_))
    }
    /// `true` after the connection closed.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }
    /// `true` while an E2E session is established. Closing drops the session (and its keys):
    /// `false` after [`Central::is_closed`].
    pub fn is_encrypted(&self) -> bool {
        self.state.is_encrypted()
    }
    /// The peripheral's CAPABILITIES, once received.
    pub fn capabilities(&self) -> Option<Capabilities> {
        self.capabilities
    }
    /// The peripheral's limits when the large-message extension is in force (both sides
    /// announced it); `None` otherwise.
    pub fn large_messages(&self) -> Option<LargeLimits> {
        self.large
    }
    /// `true` when the long-container extension is in force (both sides announced it).
    pub fn long_containers(&self) -> bool {
        self.ep.long
    }
    /// The longest container [`Central::poll_transmit`] can write: `att_mtu - 3`, or
    /// [`MAX_LONG_CONTAINER_LEN`](crate::wire::container::MAX_LONG_CONTAINER_LEN) when
    /// `long_containers` is configured. Size its output buffer to this.
    pub fn max_container_len(&self) -> usize {
        super::max_container_len(self.config.att_mtu, self.config.long_containers)
    }
    /// The output buffer [`Central::poll_transmit`] needs for what is queued now: `att_mtu - 3`,
    /// or, while long containers are in force, enough for the longest container the queued data
    /// makes (at most [`Central::max_container_len`]). Idle connections thus keep a small
    /// buffer; a shorter buffer only makes `poll_transmit` return `None`, losing nothing.
    pub fn transmit_len(&self) -> usize {
        self.ep.transmit_len(self.config.att_mtu)
    }
    /// The peripheral's TIMEOUT value in milliseconds (100 until it answers).
    pub fn peer_timeout_ms(&self) -> u16 {
        self.peer_timeout_ms
    }
    /// The peripheral's identity key, once the handshake has verified its signature.
    pub fn peer_identity(&self) -> Option<[u8; 32]> {
        self.identity
    }
    /// Bytes the outbox can still take.
    pub fn outbox_free(&self) -> usize {
        self.ep.outbox.free()
    }
    /// Calls in flight.
    pub fn calls_in_flight(&self) -> usize {
        self.calls.iter().flatten().count()
    }
    /// Warnings not queued because the event queue was nearly full.
    pub fn dropped_warnings(&self) -> u32 {
        self.ep.dropped_warnings()
    }

    /// Gives back the heap memory of buffers not in use. Buffers keep their capacity between
    /// messages (re-allocating per message is slower than the copies); a runtime calls this when
    /// the connection has been idle for a while, so an idle connection costs only its fixed
    /// state (see the crate docs' memory table).
    pub fn release_memory(&mut self) {
        self.ep.release_memory();
    }

    /// Changes the ATT MTU (after an MTU exchange). Messages already being split keep the MTU
    /// they started with.
    pub fn set_att_mtu(&mut self, att_mtu: usize) -> Result<(), ConfigError> {
        check_att_mtu(att_mtu)?;
        self.config.att_mtu = att_mtu;
        Ok(())
    }

    /// Closes the connection locally: every call fails with [`CallError::Closed`](super::CallError::Closed).
    pub fn close(&mut self, now: Instant) {
        let _ = now;
        if !self.is_closed() {
            self.close_with(CloseReason::Local);
        }
    }

    // ----- inputs ----------------------------------------------------------------------------

    /// Handles one PDU from the link. Returns [`EventQueueFull`] (and leaves the PDU unconsumed)
    /// when the caller has not drained [`Central::poll_event`].
    pub fn handle_input(&mut self, now: Instant, pdu: &[u8]) -> Result<(), EventQueueFull> {
        if self.is_closed() {
            return Ok(());
        }
        let Some(container) = self.ep.accept(pdu)? else {
            return Ok(());
        };
        match container.kind {
            ContainerKind::Control(cmd) => {
                self.handle_control(now, container.tid, cmd, container.payload)
            }
            _ => self.handle_data(now, &container),
        }
        Ok(())
    }

    /// Handles the passing of the instant returned by [`Central::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.is_closed() {
            return;
        }
        if self.state.deadline().is_some_and(|d| d <= now) {
            self.setup_timed_out(now);
        }
        self.ep.expire_partials(now);
        self.handle_call_timeouts(now);
        self.grant_due(now);
    }

    // ----- outputs ---------------------------------------------------------------------------

    /// Writes the next PDU for the link into `out` (which must hold `att_mtu - 3` bytes) and
    /// returns its length.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        let _ = now;
        self.ep.poll_transmit(self.config.att_mtu, out)
    }

    /// The next event, if any. Message bytes in the event stay valid until the next call.
    pub fn poll_event(&mut self) -> Option<CentralEvent<'_>> {
        let record = self.ep.next_record()?;
        Some(match record {
            Record::Connected { encrypted } => CentralEvent::Connected { encrypted },
            Record::IdentityPresented(identity) => CentralEvent::IdentityPresented { identity },
            Record::Response { call, msg } => CentralEvent::Response {
                call,
                data: self.ep.data(msg),
            },
            Record::StreamItem { call, msg } => CentralEvent::StreamItem {
                call,
                data: self.ep.data(msg),
            },
            Record::StreamEnd { call } => CentralEvent::StreamEnd { call },
            Record::Credit { call } => CentralEvent::Credit { call },
            Record::CallFailed { call, error } => CentralEvent::CallFailed { call, error },
            Record::Closed(reason) => CentralEvent::Closed { reason },
            Record::Warning(w) => CentralEvent::Warning(w),
        })
    }

    /// When [`Central::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_closed() {
            return None;
        }
        [
            self.state.deadline(),
            self.next_call_deadline(),
            self.ep.next_partial_deadline(),
            self.next_grant_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn push(&mut self, record: Record) {
        // Only fails if the caller ignores EventQueueFull; the endpoint releases the slot.
        let _ = self.ep.push(record);
    }

    fn warn(&mut self, warning: super::Warning) {
        self.ep.warn(warning);
    }
}

impl<P: CryptoProvider, R, A: Buffer, O: Buffer, const SLOTS: usize> core::fmt::Debug
    for Central<P, R, A, O, SLOTS>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Central")
            .field("role", &Role::Central)
            .field("next_tid", &self.ep.next_tid)
            .field("encrypted", &self.state.is_encrypted())
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! A central driven by hand with byte literals: what it sends, what it makes of replies.
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use alloc::vec::Vec;
    use core::time::Duration;

    use rand_chacha::ChaCha20Rng;
    use rand_chacha::rand_core::SeedableRng;

    use super::*;
    use crate::crypto::RustCrypto;

    pub(crate) type TestCentral = Central<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;

    pub(crate) const T0: Instant = Instant::from_millis(1_000);

    /// A plaintext central (the peripheral offers no encryption), as configured by `tune`.
    pub(crate) fn central(tune: impl FnOnce(&mut CentralConfig)) -> TestCentral {
        let mut config = CentralConfig {
            require_encryption: false,
            ..CentralConfig::default()
        };
        tune(&mut config);
        Central::new(config, RustCrypto, ChaCha20Rng::seed_from_u64(1), T0).unwrap()
    }

    /// Everything the central wants to send now.
    pub(crate) fn sent(c: &mut TestCentral) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 512];
        while let Some(n) = c.poll_transmit(T0, &mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    /// TIMEOUT request (tid 0): `[tid][seq][CONTROL | TIMEOUT = 0xc4][payload_len 0]`.
    const TIMEOUT_REQUEST: [u8; 4] = [0x00, 0x00, 0xc4, 0x00];
    /// TIMEOUT reply: 100 ms.
    const TIMEOUT_REPLY: [u8; 6] = [0x00, 0x00, 0xc4, 0x02, 0x64, 0x00];
    /// CAPABILITIES request (tid 1), the 6-byte form with no flags.
    const CAPABILITIES_REQUEST: [u8; 10] = [0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0, 0];
    /// CAPABILITIES reply: max_request 12,288, max_response 12,288, no encryption.
    const CAPABILITIES_PLAIN: [u8; 10] = [0x01, 0x00, 0xd0, 0x06, 0x00, 0x30, 0x00, 0x30, 0, 0];

    /// A plaintext central through setup with the extensions `tune` turns on, which announce
    /// CAPABILITIES flags `flags` (the low byte), agreed by the peripheral when `agreed`.
    pub(crate) fn ready_announcing(
        flags: u8,
        agreed: bool,
        tune: impl FnOnce(&mut CentralConfig),
    ) -> TestCentral {
        let mut c = central(tune);
        sent(&mut c);
        c.handle_input(T0, &TIMEOUT_REPLY).unwrap();
        assert_eq!(
            sent(&mut c),
            [[0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, flags, 0x00]]
        );
        let agreed = if agreed { flags } else { 0x00 };
        c.handle_input(
            T0,
            &[0x01, 0x00, 0xd0, 0x06, 0x00, 0x30, 0x00, 0x30, agreed, 0x00],
        )
        .unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::Connected { encrypted: false })
        );
        c
    }

    /// A central through plaintext setup (tids 0 and 1 used).
    pub(crate) fn ready() -> TestCentral {
        let mut c = central(|_| {});
        sent(&mut c);
        c.handle_input(T0, &TIMEOUT_REPLY).unwrap();
        sent(&mut c);
        c.handle_input(T0, &CAPABILITIES_PLAIN).unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::Connected { encrypted: false })
        );
        c
    }

    #[test]
    fn setup_asks_timeout_then_capabilities() {
        let mut c = central(|_| {});
        assert_eq!(sent(&mut c), [TIMEOUT_REQUEST.to_vec()]);
        c.handle_input(T0, &TIMEOUT_REPLY).unwrap();
        assert_eq!(c.peer_timeout_ms(), 100);
        assert_eq!(sent(&mut c), [CAPABILITIES_REQUEST.to_vec()]);
        assert!(!c.is_ready());
        c.handle_input(T0, &CAPABILITIES_PLAIN).unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::Connected { encrypted: false })
        );
        assert!(c.is_ready() && !c.is_encrypted());
        assert_eq!(
            c.capabilities()
                .map(|caps| (caps.max_request, caps.max_response)),
            Some((12_288, 12_288))
        );
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn pipelined_requests_go_out_together() {
        let mut c = central(|c| c.setup_pipelining = SetupPipelining::Requests);
        assert_eq!(
            sent(&mut c),
            [TIMEOUT_REQUEST.to_vec(), CAPABILITIES_REQUEST.to_vec()]
        );
        // The CAPABILITIES reply alone finishes setup; the TIMEOUT reply may follow.
        c.handle_input(T0, &CAPABILITIES_PLAIN).unwrap();
        assert!(c.is_ready());
        c.handle_input(T0, &[0x00, 0x00, 0xc4, 0x02, 0xc8, 0x00])
            .unwrap();
        assert_eq!(
            c.peer_timeout_ms(),
            100,
            "unanswered before CAPABILITIES: ignored"
        );
    }

    #[test]
    fn a_peripheral_without_encryption_is_refused_when_it_is_required() {
        let mut c = central(|c| c.require_encryption = true);
        sent(&mut c);
        c.handle_input(T0, &TIMEOUT_REPLY).unwrap();
        sent(&mut c);
        c.handle_input(T0, &CAPABILITIES_PLAIN).unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::Closed {
                reason: CloseReason::EncryptionUnavailable
            })
        );
        assert!(c.is_closed());
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn a_silent_peripheral_times_setup_out() {
        let mut c = central(|c| c.require_encryption = true);
        sent(&mut c);
        let t1 = T0 + Duration::from_secs(1);
        assert_eq!(c.poll_timeout(), Some(t1));
        // No TIMEOUT reply: keep the default and ask CAPABILITIES, as the reference does.
        c.handle_timeout(t1);
        assert_eq!(sent(&mut c), [CAPABILITIES_REQUEST.to_vec()]);
        let t2 = t1 + Duration::from_secs(1);
        c.handle_timeout(t2);
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::Closed {
                reason: CloseReason::SetupTimeout
            })
        );
    }

    #[test]
    fn garbage_is_a_warning_and_changes_nothing() {
        let mut c = ready();
        c.handle_input(T0, &[0x07]).unwrap();
        assert!(matches!(
            c.poll_event(),
            Some(CentralEvent::Warning(
                crate::connection::Warning::MalformedContainer(_)
            ))
        ));
        assert!(c.is_ready());
    }
}
