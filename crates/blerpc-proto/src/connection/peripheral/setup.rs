//! The controls a peripheral answers: TIMEOUT, CAPABILITIES (the extensions agreed there), the
//! key exchange's steps 1 and 3, and STREAM_END_C2P; ERROR replies go out ahead of all data.

use rand_core::CryptoRngCore;

use super::Peripheral;
use super::event::Record;
use crate::Direction;
use crate::Instant;
use crate::buf::Buffer;
use crate::connection::MIN_ATT_MTU_FOR_KEY_EXCHANGE;
use crate::connection::MIN_ATT_MTU_FOR_LARGE_MESSAGES;
use crate::connection::events::Warning;
use crate::crypto::{CryptoProvider, X25519Secret};
use crate::handshake::{PeripheralAwaitStep3, PeripheralHandshake};
use crate::session::Session;
use crate::wire::capabilities::CapabilityFlags;
use crate::wire::container::ControlCmd;
use crate::wire::control::ControlMessage;
use crate::wire::error_code::ErrorCode;

/// The key exchange, and the session it established. One enum holds both, so the AES-GCM key
/// (about 0.5 KB with ring) is stored once: in step 3's state while the handshake runs, in the
/// session's once it is done.
pub(super) enum Kx<P: CryptoProvider> {
    /// No identity configured: the peripheral does not offer encryption.
    Unavailable,
    AwaitStep1,
    AwaitStep3 {
        deadline: Instant,
        hs: PeripheralAwaitStep3<P>,
    },
    Established(Session<P::Aead>),
}

impl<P: CryptoProvider> Kx<P> {
    pub(super) fn session_mut(&mut self) -> Option<&mut Session<P::Aead>> {
        match self {
            Kx::Established(session) => Some(session),
            _ => None,
        }
    }
    pub(super) fn is_established(&self) -> bool {
        matches!(self, Kx::Established(_))
    }
}

impl<P, R, A, O, const SLOTS: usize> Peripheral<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    P::Identity: Clone,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    pub(super) fn send_control(&mut self, tid: u8, cmd: ControlCmd, payload: &[u8]) {
        if self.ep.send_control(tid, cmd, payload).is_err() {
            // A central flooding control requests faster than the link drains: drop the reply
            // (the central's own timeout covers it) and say so.
            self.warn(Warning::UnexpectedControl {
                tid,
                cmd: cmd.bits(),
            });
        }
    }

    /// A CAPABILITIES request or a request arrived: a plaintext connection is now established.
    pub(super) fn mark_set_up(&mut self) {
        self.set_up = true;
        if !self.config.require_encryption {
            self.setup_deadline = None;
        }
    }

    pub(super) fn send_error(&mut self, tid: u8, code: ErrorCode) {
        self.counters.error(code.to_byte());
        self.send_control(tid, ControlCmd::Error, &[code.to_byte()]);
    }

    pub(super) fn handle_control(
        &mut self,
        now: Instant,
        tid: u8,
        cmd: ControlCmd,
        payload: &[u8],
    ) {
        let msg = match ControlMessage::parse(cmd, payload, Direction::CentralToPeripheral) {
            Ok(m) => m,
            Err(e) => {
                self.warn(Warning::MalformedControl(e));
                return;
            }
        };
        match msg {
            ControlMessage::TimeoutRequest => {
                let reply = self.config.timeout_ms.to_le_bytes();
                self.send_control(tid, ControlCmd::Timeout, &reply);
            }
            ControlMessage::CapabilitiesRequest { advertised } => {
                let announced =
                    advertised.is_some_and(|c| c.flags.contains(CapabilityFlags::LARGE_MESSAGES));
                // Each request decides afresh: the reply states what is in force.
                self.ep.large = announced
                    && self.config.large_messages
                    && self.config.att_mtu >= MIN_ATT_MTU_FOR_LARGE_MESSAGES;
                self.ep.long = self.config.long_containers
                    && advertised
                        .is_some_and(|c| c.flags.contains(CapabilityFlags::LONG_CONTAINERS));
                self.ep.set_assembler_config(Self::assembler_config(
                    &self.config,
                    self.ep.large,
                    self.ep.long,
                ));
                let mut caps = if self.ep.large {
                    self.capabilities_large()
                } else {
                    self.capabilities()
                };
                if self.ep.long {
                    caps.flags = caps.flags | CapabilityFlags::LONG_CONTAINERS;
                }
                self.cancel = self.config.cancel
                    && advertised.is_some_and(|c| c.flags.contains(CapabilityFlags::CANCEL));
                if self.cancel {
                    caps.flags = caps.flags | CapabilityFlags::CANCEL;
                }
                self.deadline = self.config.deadline
                    && advertised.is_some_and(|c| c.flags.contains(CapabilityFlags::DEADLINE));
                if self.deadline {
                    caps.flags = caps.flags | CapabilityFlags::DEADLINE;
                }
                self.streams = self.config.streams
                    && advertised.is_some_and(|c| c.flags.contains(CapabilityFlags::STREAMS));
                if self.streams {
                    caps.flags = caps.flags | CapabilityFlags::STREAMS;
                }
                let mut reply = [0u8; crate::wire::capabilities::CAPABILITIES_LARGE_LEN];
                if let Ok(n) = caps.emit(&mut reply) {
                    self.send_control(tid, ControlCmd::Capabilities, reply.get(..n).unwrap_or(&[]));
                }
                self.mark_set_up();
            }
            ControlMessage::KeyExchange(step) => self.on_key_exchange(now, tid, step),
            ControlMessage::StreamEndC2P {
                stream: Some(stream),
            } if self.streams => self.on_items_end(tid, stream),
            ControlMessage::StreamEndC2P { .. } => self.push(Record::StreamEndC2P { tid }),
            ControlMessage::Credit { stream, credits } if self.streams => {
                self.on_credit(tid, stream, credits)
            }
            ControlMessage::Cancel { tid: request } if self.cancel => self.on_cancel(request),
            ControlMessage::Unknown { cmd, .. } => self.warn(Warning::UnknownControl { tid, cmd }),
            _ => self.warn(Warning::UnexpectedControl {
                tid,
                cmd: cmd.bits(),
            }),
        }
    }

    pub(super) fn on_key_exchange(&mut self, now: Instant, tid: u8, payload: &[u8]) {
        let step = payload.first().copied();
        if step == Some(1) {
            self.kx_attempts = self.kx_attempts.saturating_add(1);
            if self.kx_attempts > self.config.max_key_exchange_attempts {
                // Each step 1 costs a key pair and a signature: a central that keeps starting
                // over is closed instead of served.
                self.send_error(tid, ErrorCode::KeyExchangeFailed);
                self.close_for(super::PeripheralCloseReason::KeyExchangeAttempts {
                    attempts: self.kx_attempts,
                });
                return;
            }
        }
        let kx = core::mem::replace(&mut self.kx, Kx::Unavailable);
        self.kx = match (step, kx) {
            (Some(1), Kx::AwaitStep1 | Kx::AwaitStep3 { .. })
                if self.config.att_mtu < MIN_ATT_MTU_FOR_KEY_EXCHANGE =>
            {
                // Step 2 is one 133-byte control container: it cannot travel at this MTU.
                self.send_error(tid, ErrorCode::KeyExchangeFailed);
                Kx::AwaitStep1
            }
            (Some(1), Kx::AwaitStep1 | Kx::AwaitStep3 { .. }) => {
                let Some(identity) = self.identity.as_ref() else {
                    self.send_error(tid, ErrorCode::KeyExchangeFailed);
                    return;
                };
                let ephemeral = X25519Secret::random(&mut self.rng);
                let hs = PeripheralHandshake::new(self.provider.clone(), identity.clone());
                match hs.receive_step1(payload, ephemeral) {
                    Ok((hs, step2)) => {
                        self.send_control(tid, ControlCmd::KeyExchange, &step2);
                        Kx::AwaitStep3 {
                            deadline: now + self.config.handshake_timeout,
                            hs,
                        }
                    }
                    Err(_) => {
                        self.send_error(tid, ErrorCode::KeyExchangeFailed);
                        Kx::AwaitStep1
                    }
                }
            }
            (Some(3), Kx::AwaitStep3 { hs, .. }) => {
                let mut nonce = [0u8; 12];
                self.rng.fill_bytes(&mut nonce);
                match hs.receive_step3(payload, nonce) {
                    Ok((session, step4)) => {
                        self.send_control(tid, ControlCmd::KeyExchange, &step4);
                        self.push(Record::Secured);
                        self.setup_deadline = None;
                        Kx::Established(session)
                    }
                    Err(_) => {
                        // Unlike the reference (which needs a reconnect), a failed step 3 lets
                        // the central start over with a new step 1.
                        self.send_error(tid, ErrorCode::KeyExchangeFailed);
                        Kx::AwaitStep1
                    }
                }
            }
            (_, other) => {
                // Out of order, unknown step byte, a second handshake on an established
                // session, or no identity: refuse loudly instead of staying silent.
                self.send_error(tid, ErrorCode::KeyExchangeFailed);
                other
            }
        };
    }
}
