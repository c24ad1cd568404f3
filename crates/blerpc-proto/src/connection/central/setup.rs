//! Setup as the reference centrals run it: TIMEOUT, CAPABILITIES (the extensions agreed there),
//! the four-step key exchange with the identity decision, and every control a central receives.

use rand_core::CryptoRngCore;
use subtle::ConstantTimeEq;

use super::Central;
#[cfg(doc)]
use super::CentralEvent;
use super::config::{MIN_ATT_MTU_FOR_KEY_EXCHANGE, Pinning, SetupPipelining};
use super::event::Record;
use crate::Direction;
use crate::Instant;
use crate::assemble::AssemblerConfig;
use crate::buf::Buffer;
use crate::connection::events::Warning;
use crate::connection::{CallError, CloseReason};
use crate::crypto::{CryptoProvider, X25519Secret};
use crate::handshake::{
    CentralAwaitStep2, CentralAwaitStep4, CentralHandshake, CentralVerifyIdentity,
};
use crate::session::Session;
use crate::wire::capabilities::{Capabilities, CapabilityFlags};
use crate::wire::container::ControlCmd;
use crate::wire::control::ControlMessage;
use crate::wire::error_code::ErrorCode;

/// Where setup is; the session once it is done.
pub(super) enum State<P: CryptoProvider> {
    AwaitTimeout {
        tid: u8,
        deadline: Instant,
    },
    AwaitCapabilities {
        tid: u8,
        deadline: Instant,
        /// Step 1 sent with the CAPABILITIES request ([`SetupPipelining::KeyExchange`]).
        early: EarlyStep1<P>,
    },
    AwaitStep2 {
        tid: u8,
        deadline: Instant,
        hs: CentralAwaitStep2<P>,
    },
    VerifyIdentity {
        deadline: Instant,
        hs: CentralVerifyIdentity<P>,
    },
    AwaitStep4 {
        tid: u8,
        deadline: Instant,
        hs: CentralAwaitStep4<P>,
    },
    /// Set up; with the E2E session if the key exchange ran. The session lives in the state so
    /// that the AES-GCM key (about 0.5 KB with ring) is stored once, not beside the handshake's.
    Ready(Option<Session<P::Aead>>),
    Closed,
}

/// The key exchange's step 1 sent before the CAPABILITIES reply.
pub(super) enum EarlyStep1<P: CryptoProvider> {
    /// Not sent.
    None,
    /// Sent with this tid; its step 2 is handled once CAPABILITIES has been answered.
    Sent { tid: u8, hs: CentralAwaitStep2<P> },
    /// The peripheral answered it with ERROR before the CAPABILITIES reply.
    Refused(ErrorCode),
}

impl<P: CryptoProvider> State<P> {
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self {
            State::AwaitTimeout { deadline, .. }
            | State::AwaitCapabilities { deadline, .. }
            | State::AwaitStep2 { deadline, .. }
            | State::VerifyIdentity { deadline, .. }
            | State::AwaitStep4 { deadline, .. } => Some(*deadline),
            State::Ready(_) | State::Closed => None,
        }
    }
    pub(super) fn session_mut(&mut self) -> Option<&mut Session<P::Aead>> {
        match self {
            State::Ready(session) => session.as_mut(),
            _ => None,
        }
    }
    pub(super) fn is_encrypted(&self) -> bool {
        matches!(self, State::Ready(Some(_)))
    }
}

impl<P, R, A, O, const SLOTS: usize> Central<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    /// Trusts the identity key presented in [`CentralEvent::IdentityPresented`] and continues the
    /// handshake.
    pub fn accept_identity(&mut self, now: Instant) {
        if !matches!(self.state, State::VerifyIdentity { .. }) {
            return;
        }
        if let State::VerifyIdentity { hs, .. } = core::mem::replace(&mut self.state, State::Closed)
        {
            self.continue_handshake(now, hs);
        }
    }

    /// Refuses the identity key presented in [`CentralEvent::IdentityPresented`]; the connection
    /// closes with [`CloseReason::IdentityRejected`].
    pub fn reject_identity(&mut self, now: Instant) {
        let _ = now;
        if matches!(self.state, State::VerifyIdentity { .. }) {
            self.close_with(CloseReason::IdentityRejected);
        }
    }

    // ----- internals: setup ------------------------------------------------------------------

    pub(super) fn send_control(&mut self, tid: u8, cmd: ControlCmd, payload: &[u8]) {
        // The setup sequence has at most three controls outstanding (TIMEOUT, CAPABILITIES and
        // step 1, pipelined), each of at most 45 bytes (step 3): the four-entry queue cannot
        // refuse them.
        let _ = self.ep.send_control(tid, cmd, payload);
    }

    pub(super) fn request_capabilities(&mut self, now: Instant) {
        let tid = self.ep.alloc_tid();
        let mut flags = CapabilityFlags::EMPTY;
        if self.config.large_messages {
            flags = flags | CapabilityFlags::LARGE_MESSAGES;
        }
        if self.config.long_containers {
            flags = flags | CapabilityFlags::LONG_CONTAINERS;
        }
        if self.config.cancel {
            flags = flags | CapabilityFlags::CANCEL;
        }
        if self.config.deadline {
            flags = flags | CapabilityFlags::DEADLINE;
        }
        if self.config.streams {
            flags = flags | CapabilityFlags::STREAMS;
        }
        // The announcement: flags bits 1, 2, 4 and 5, nothing else (no extension bytes in a
        // request).
        let payload = Capabilities {
            flags,
            ..Capabilities::default()
        }
        .to_bytes();
        let announce = self.config.large_messages
            || self.config.long_containers
            || self.config.cancel
            || self.config.deadline
            || self.config.streams;
        let payload: &[u8] = if self.config.capabilities_payload || announce {
            &payload
        } else {
            &[]
        };
        self.send_control(tid, ControlCmd::Capabilities, payload);
        let early = if self.config.setup_pipelining == SetupPipelining::KeyExchange
            && self.config.att_mtu >= MIN_ATT_MTU_FOR_KEY_EXCHANGE
        {
            let (kx_tid, hs) = self.send_step1();
            EarlyStep1::Sent { tid: kx_tid, hs }
        } else {
            EarlyStep1::None
        };
        self.state = State::AwaitCapabilities {
            tid,
            deadline: now + self.config.setup_timeout,
            early,
        };
    }

    /// Queues KEY_EXCHANGE step 1 with a fresh ephemeral key.
    pub(super) fn send_step1(&mut self) -> (u8, CentralAwaitStep2<P>) {
        let ephemeral = X25519Secret::random(&mut self.rng);
        let (hs, step1) = CentralHandshake::start(self.provider.clone(), ephemeral);
        let tid = self.ep.alloc_tid();
        self.send_control(tid, ControlCmd::KeyExchange, &step1);
        (tid, hs)
    }

    pub(super) fn on_capabilities(
        &mut self,
        now: Instant,
        caps: Option<Capabilities>,
        early: EarlyStep1<P>,
    ) {
        self.capabilities = caps;
        // Peripherals answer in order: a TIMEOUT sent before CAPABILITIES and still unanswered
        // never will be (the default 100 ms stays).
        self.pending_timeout = None;
        // In force only if we announced it and the reply carries the (complete) extension;
        // `Capabilities::parse` already refused a reply with the bit but a truncated extension.
        self.large = caps
            .and_then(|c| c.large)
            .filter(|_| self.config.large_messages);
        self.ep.long = self.config.long_containers
            && caps.is_some_and(|c| c.flags.contains(CapabilityFlags::LONG_CONTAINERS));
        self.ep.large = self.large.is_some();
        self.cancel =
            self.config.cancel && caps.is_some_and(|c| c.flags.contains(CapabilityFlags::CANCEL));
        self.deadline = self.config.deadline
            && caps.is_some_and(|c| c.flags.contains(CapabilityFlags::DEADLINE));
        self.streams =
            self.config.streams && caps.is_some_and(|c| c.flags.contains(CapabilityFlags::STREAMS));
        if self.ep.large || self.ep.long {
            self.ep.set_assembler_config(AssemblerConfig {
                max_message_len: self.config.max_response_len,
                max_in_flight: SLOTS,
                large_messages: self.large.is_some(),
                long_containers: self.ep.long,
            });
        }
        let offers = caps.is_some_and(|c| c.flags.contains(CapabilityFlags::ENCRYPTION_SUPPORTED));
        let mtu_ok = self.config.att_mtu >= MIN_ATT_MTU_FOR_KEY_EXCHANGE;
        if offers && mtu_ok {
            let (tid, hs) = match early {
                EarlyStep1::Sent { tid, hs } => (tid, hs),
                EarlyStep1::Refused(code) => {
                    self.close_with(CloseReason::HandshakeRefused(code));
                    return;
                }
                EarlyStep1::None => self.send_step1(),
            };
            self.state = State::AwaitStep2 {
                tid,
                deadline: now + self.config.handshake_step_timeout,
                hs,
            };
        } else if self.config.require_encryption {
            let reason = if offers {
                CloseReason::MtuTooSmallForKeyExchange {
                    att_mtu: self.config.att_mtu,
                }
            } else if caps.is_none() {
                CloseReason::SetupTimeout
            } else {
                CloseReason::EncryptionUnavailable
            };
            self.close_with(reason);
        } else {
            self.become_ready(None);
        }
    }

    pub(super) fn continue_handshake(&mut self, now: Instant, hs: CentralVerifyIdentity<P>) {
        let mut nonce = [0u8; 12];
        self.rng.fill_bytes(&mut nonce);
        match hs.accept(nonce) {
            Ok((hs, step3)) => {
                let tid = self.ep.alloc_tid();
                self.send_control(tid, ControlCmd::KeyExchange, &step3);
                self.state = State::AwaitStep4 {
                    tid,
                    deadline: now + self.config.handshake_step_timeout,
                    hs,
                };
            }
            Err(e) => self.close_with(CloseReason::Handshake(e)),
        }
    }

    pub(super) fn setup_timed_out(&mut self, now: Instant) {
        match core::mem::replace(&mut self.state, State::Closed) {
            State::AwaitTimeout { .. } => {
                // As the reference centrals: keep the default 100 ms and go on.
                self.request_capabilities(now);
            }
            State::AwaitCapabilities { early, .. } => self.on_capabilities(now, None, early),
            State::AwaitStep2 { .. } | State::VerifyIdentity { .. } | State::AwaitStep4 { .. } => {
                self.close_with(CloseReason::HandshakeTimeout)
            }
            other => self.state = other,
        }
    }

    pub(super) fn on_key_exchange(&mut self, now: Instant, tid: u8, payload: &[u8]) {
        match core::mem::replace(&mut self.state, State::Closed) {
            State::AwaitStep2 { tid: t, hs, .. } if t == tid => match hs.receive_step2(payload) {
                Ok(verify) => {
                    let identity = *verify.identity();
                    self.identity = Some(identity);
                    match self.config.pinning {
                        Pinning::Disabled => self.continue_handshake(now, verify),
                        Pinning::Expect(pinned) => {
                            if bool::from(pinned.ct_eq(&identity)) {
                                self.continue_handshake(now, verify)
                            } else {
                                self.close_with(CloseReason::IdentityRejected)
                            }
                        }
                        Pinning::Decide => {
                            self.push(Record::IdentityPresented(identity));
                            self.state = State::VerifyIdentity {
                                deadline: now + self.config.handshake_step_timeout,
                                hs: verify,
                            };
                        }
                    }
                }
                Err(e) => self.close_with(CloseReason::Handshake(e)),
            },
            State::AwaitStep4 { tid: t, hs, .. } if t == tid => match hs.receive_step4(payload) {
                Ok(session) => self.become_ready(Some(session)),
                Err(e) => self.close_with(CloseReason::Handshake(e)),
            },
            other => {
                self.state = other;
                self.warn(Warning::UnexpectedControl {
                    tid,
                    cmd: ControlCmd::KeyExchange.bits(),
                });
            }
        }
    }

    pub(super) fn become_ready(&mut self, session: Option<Session<P::Aead>>) {
        let encrypted = session.is_some();
        self.state = State::Ready(session);
        self.push(Record::Connected { encrypted });
    }

    pub(super) fn close_with(&mut self, reason: CloseReason) {
        self.state = State::Closed;
        self.drain = None;
        for idx in 0..SLOTS {
            if let Some(call) = self.calls.get_mut(idx).and_then(Option::take) {
                self.push(Record::CallFailed {
                    call: call.id,
                    error: CallError::Closed,
                });
            }
        }
        self.ep.clear(false);
        self.push(Record::Closed(reason));
    }

    // ----- internals: input ------------------------------------------------------------------

    pub(super) fn handle_control(
        &mut self,
        now: Instant,
        tid: u8,
        cmd: ControlCmd,
        payload: &[u8],
    ) {
        let msg = match ControlMessage::parse(cmd, payload, Direction::PeripheralToCentral) {
            Ok(m) => m,
            Err(e) => {
                self.warn(Warning::MalformedControl(e));
                return;
            }
        };
        match msg {
            ControlMessage::TimeoutResponse { timeout_ms } => match self.state {
                State::AwaitTimeout { tid: t, .. } if t == tid => {
                    self.peer_timeout_ms = timeout_ms;
                    self.request_capabilities(now);
                }
                _ if self.pending_timeout == Some(tid) => {
                    self.peer_timeout_ms = timeout_ms;
                    self.pending_timeout = None;
                }
                _ => self.warn(Warning::UnexpectedControl {
                    tid,
                    cmd: cmd.bits(),
                }),
            },
            ControlMessage::CapabilitiesResponse(caps) => match self.state {
                State::AwaitCapabilities { tid: t, .. } if t == tid => {
                    if let State::AwaitCapabilities { early, .. } =
                        core::mem::replace(&mut self.state, State::Closed)
                    {
                        self.on_capabilities(now, Some(caps), early);
                    }
                }
                _ => self.warn(Warning::UnexpectedControl {
                    tid,
                    cmd: cmd.bits(),
                }),
            },
            ControlMessage::KeyExchange(step) => self.on_key_exchange(now, tid, step),
            ControlMessage::StreamEndP2C => {
                // The reference sends STREAM_END_P2C with a fresh tid: it ends the active
                // peripheral→central stream whatever its tid.
                if !self.on_stream_end(now) {
                    self.warn(Warning::UnexpectedControl {
                        tid,
                        cmd: cmd.bits(),
                    });
                }
            }
            ControlMessage::Error(code) => self.on_error(now, tid, code),
            ControlMessage::Credit { stream, credits } if self.streams => {
                self.on_credit(tid, stream, credits)
            }
            ControlMessage::Unknown { cmd, .. } => self.warn(Warning::UnknownControl { tid, cmd }),
            _ => self.warn(Warning::UnexpectedControl {
                tid,
                cmd: cmd.bits(),
            }),
        }
    }
}
