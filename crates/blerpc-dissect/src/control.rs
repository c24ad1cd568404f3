//! CONTROL payloads, decoded by field: TIMEOUT, STREAM_END_*, CAPABILITIES, ERROR, the four
//! KEY_EXCHANGE steps, and unassigned commands.
//!
//! TIMEOUT and CAPABILITIES mean a request or a response depending on the direction. Without
//! [`Options::direction`](crate::Options::direction) it is inferred from the payload: an empty
//! TIMEOUT is a request and any other a response; an empty or all-zero 6-byte CAPABILITIES is a
//! request and any other a response. With a step 1 earlier in the input, a step 2 signature is
//! verified; with the session key, the step 3 and 4 confirmations are decrypted and checked
//! against their labels.

use blerpc_proto::crypto::{Aead, CryptoProvider, RustCrypto, SessionKey};
use blerpc_proto::wire::capabilities::{CAPABILITIES_LEN, Capabilities};
use blerpc_proto::wire::container::{ControlCmd, HEADER_LEN};
use blerpc_proto::wire::control::{ControlMessage, TIMEOUT_RESPONSE_LEN};
use blerpc_proto::wire::key_exchange::{Confirmation, KeyExchangeStep, Step2};

use crate::dissect::{At, Dissector, SeenStep1, diag, wire_diag};
use crate::report::{ControlBody, ControlKind, ControlReport, Dir, KeyExchangeReport, Layer};

/// `true` if a key-exchange confirmation decrypts to its label under `key`.
fn confirmation_valid(key: &[u8; 16], c: &Confirmation, label: &[u8; 16]) -> bool {
    let Ok(aead) = RustCrypto.aead(&SessionKey::from_bytes(*key)) else {
        return false;
    };
    let mut buf = c.ciphertext();
    aead.open_in_place(&c.nonce, &mut buf, &c.tag()).is_ok() && &buf == label
}

impl Dissector<'_> {
    fn check_dir(&mut self, at: At, what: &str, expected: Dir) {
        if let Some(given) = self.opts.direction
            && given != expected
        {
            self.warn(diag(
                at,
                Layer::Control,
                None,
                None,
                format!("{what} travels {expected}, but --direction is {given}"),
            ));
        }
    }

    fn extra_bytes(&mut self, at: At, what: &str, payload: &[u8], used: usize) {
        if payload.len() > used {
            self.warn(diag(
                at,
                Layer::Control,
                Some("payload"),
                Some(HEADER_LEN + used),
                format!(
                    "{} bytes after the {what} payload (ignored)",
                    payload.len() - used
                ),
            ));
        }
    }

    /// Decodes the payload of a CONTROL container with command `cmd`.
    pub(crate) fn control(
        &mut self,
        at: At,
        cmd: ControlCmd,
        payload: &[u8],
    ) -> Option<ControlReport> {
        // TIMEOUT and CAPABILITIES mean different things per direction: see `--help`.
        let (dir, inferred) = match self.opts.direction {
            Some(d) => (d, false),
            None => {
                let request = match cmd {
                    ControlCmd::Timeout => payload.is_empty(),
                    // Centrals send zero limits (a blerpc-rs central may set flag bits to
                    // announce the large-message extension); no peripheral answers 0 / 0.
                    ControlCmd::Capabilities => {
                        payload.is_empty()
                            || (payload.len() == CAPABILITIES_LEN
                                && payload.iter().take(4).all(|&b| b == 0))
                    }
                    _ => true,
                };
                (if request { Dir::C2p } else { Dir::P2c }, true)
            }
        };
        let msg = match ControlMessage::parse(cmd, payload, dir.to_proto()) {
            Ok(m) => m,
            Err(e) => {
                let mut d = wire_diag(at, Layer::Control, &e, HEADER_LEN, "");
                let how = if inferred { "inferred" } else { "--direction" };
                d.message = format!(
                    "{} {} ({dir}, {how}): {}",
                    cmd.as_str(),
                    if dir == Dir::C2p {
                        "request"
                    } else {
                        "response"
                    },
                    d.message
                );
                self.error(d);
                return None;
            }
        };
        let body = match msg {
            ControlMessage::TimeoutRequest => {
                if !payload.is_empty() {
                    self.extra_bytes(at, "TIMEOUT request", payload, 0);
                }
                ControlBody::Timeout {
                    kind: ControlKind::Request,
                    direction: dir,
                    inferred,
                    timeout_ms: None,
                }
            }
            ControlMessage::TimeoutResponse { timeout_ms } => {
                self.extra_bytes(at, "TIMEOUT response", payload, TIMEOUT_RESPONSE_LEN);
                ControlBody::Timeout {
                    kind: ControlKind::Response,
                    direction: dir,
                    inferred,
                    timeout_ms: Some(timeout_ms),
                }
            }
            ControlMessage::StreamEndC2P { stream } => {
                self.check_dir(at, "STREAM_END_C2P", Dir::C2p);
                // One byte names a bidirectional stream (the streams extension).
                self.extra_bytes(at, "STREAM_END_C2P", payload, usize::from(stream.is_some()));
                ControlBody::StreamEnd
            }
            ControlMessage::StreamEndP2C => {
                self.check_dir(at, "STREAM_END_P2C", Dir::P2c);
                self.extra_bytes(at, "STREAM_END_P2C", payload, 0);
                ControlBody::StreamEnd
            }
            ControlMessage::CapabilitiesRequest { advertised } => {
                if !(payload.is_empty() || payload.len() == CAPABILITIES_LEN) {
                    self.warn(diag(
                        at,
                        Layer::Control,
                        Some("payload_len"),
                        Some(HEADER_LEN - 1),
                        format!(
                            "CAPABILITIES request of {} bytes: centrals send 0 or 6 (ignored by peripherals)",
                            payload.len()
                        ),
                    ));
                }
                caps_report(ControlKind::Request, dir, inferred, advertised)
            }
            ControlMessage::CapabilitiesResponse(caps) => {
                if payload.len() < CAPABILITIES_LEN {
                    self.warn(diag(
                        at,
                        Layer::Control,
                        Some("flags"),
                        Some(HEADER_LEN + 4),
                        format!(
                            "CAPABILITIES response of {} bytes has no `flags` (read as 0); reference centrals other than C require 6",
                            payload.len()
                        ),
                    ));
                }
                // The large-message extension's 8 bytes belong to the payload.
                self.extra_bytes(at, "CAPABILITIES response", payload, caps.encoded_len());
                caps_report(ControlKind::Response, dir, inferred, Some(caps))
            }
            ControlMessage::Error(code) => {
                self.check_dir(at, "ERROR", Dir::P2c);
                self.extra_bytes(at, "ERROR", payload, 1);
                ControlBody::Error {
                    code: code.to_byte(),
                    name: code.as_str(),
                    description: code.description(),
                    reference_code: code.is_reference_code(),
                }
            }
            ControlMessage::KeyExchange(p) => ControlBody::KeyExchange(self.key_exchange(at, p)?),
            ControlMessage::Cancel { tid } => {
                self.check_dir(at, "CANCEL", Dir::C2p);
                self.extra_bytes(at, "CANCEL", payload, 1);
                ControlBody::Cancel { request_tid: tid }
            }
            ControlMessage::Credit { stream, credits } => {
                self.extra_bytes(at, "CREDIT", payload, 3);
                ControlBody::Credit { stream, credits }
            }
            ControlMessage::Unknown { cmd, payload } => {
                self.warn(diag(
                    at,
                    Layer::Control,
                    Some("flags"),
                    Some(2),
                    format!("unassigned control command {cmd:#x}; receivers skip it"),
                ));
                ControlBody::Unknown {
                    cmd_value: cmd,
                    payload_hex: hex::encode(payload),
                }
            }
        };
        Some(ControlReport { cmd, body })
    }

    fn key_exchange(&mut self, at: At, payload: &[u8]) -> Option<KeyExchangeReport> {
        let step = match KeyExchangeStep::parse(payload) {
            Ok(step) => step,
            Err(e) => {
                let mut d = wire_diag(at, Layer::KeyExchange, &e, HEADER_LEN, "");
                d.message = format!("KEY_EXCHANGE: {}", d.message);
                self.error(d);
                return None;
            }
        };
        let n = step.step();
        let direction = if n % 2 == 1 { Dir::C2p } else { Dir::P2c };
        self.check_dir(at, &format!("KEY_EXCHANGE step {n}"), direction);
        self.extra_bytes(
            at,
            &format!("KEY_EXCHANGE step {n}"),
            payload,
            step.emitted_len(),
        );
        let mut r = KeyExchangeReport {
            step: n,
            direction,
            central_public: None,
            peripheral_public: None,
            signature: None,
            identity: None,
            signature_valid: None,
            nonce: None,
            ciphertext: None,
            tag: None,
            confirmation_valid: None,
        };
        match step {
            KeyExchangeStep::Step1(s) => {
                r.central_public = Some(hex::encode(s.central_public));
                if let Some(pdu) = at.pdu {
                    self.step1 = Some(SeenStep1 {
                        pdu,
                        central_public: s.central_public,
                    });
                }
            }
            KeyExchangeStep::Step2(s) => {
                r.peripheral_public = Some(hex::encode(s.peripheral_public));
                r.signature = Some(hex::encode(s.signature));
                r.identity = Some(hex::encode(s.identity));
                if let Some(seen) = &self.step1 {
                    let msg = Step2::signed_message(&seen.central_public, &s.peripheral_public);
                    let valid = RustCrypto
                        .ed25519_verify(&s.identity, &msg, &s.signature)
                        .is_ok();
                    r.signature_valid = Some(valid);
                    if !valid {
                        let text = format!(
                            "step 2 signature does not verify over the step 1 key of PDU {} and this peripheral key",
                            seen.pdu
                        );
                        self.warn(diag(
                            at,
                            Layer::KeyExchange,
                            Some("signature"),
                            Some(HEADER_LEN + 33),
                            text,
                        ));
                    }
                }
            }
            KeyExchangeStep::Step3(c) | KeyExchangeStep::Step4(c) => {
                r.nonce = Some(hex::encode(c.nonce));
                r.ciphertext = Some(hex::encode(c.ciphertext()));
                r.tag = Some(hex::encode(c.tag()));
                if let Some(key) = &self.opts.key {
                    let label = if n == 3 {
                        b"BLERPC_CONFIRM_C"
                    } else {
                        b"BLERPC_CONFIRM_P"
                    };
                    let valid = confirmation_valid(key, &c, label);
                    r.confirmation_valid = Some(valid);
                    if !valid {
                        let text = format!(
                            "step {n} confirmation does not decrypt to {} with --key",
                            String::from_utf8_lossy(label)
                        );
                        self.warn(diag(
                            at,
                            Layer::KeyExchange,
                            Some("sealed"),
                            Some(HEADER_LEN + 13),
                            text,
                        ));
                    }
                }
            }
        }
        Some(r)
    }
}

fn caps_report(
    kind: ControlKind,
    direction: Dir,
    inferred: bool,
    caps: Option<Capabilities>,
) -> ControlBody {
    ControlBody::Capabilities {
        kind,
        direction,
        inferred,
        max_request: caps.map(|c| c.max_request),
        max_response: caps.map(|c| c.max_response),
        flags: caps.map(|c| c.flags.bits()),
        flag_names: caps
            .map(|c| c.flags.iter().map(|flag| flag.to_string()).collect())
            .unwrap_or_default(),
        large_max_request: caps.and_then(|c| c.large).map(|l| l.max_request),
        large_max_response: caps.and_then(|c| c.large).map(|l| l.max_response),
    }
}
