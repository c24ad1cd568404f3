//! The one-byte code carried by an ERROR control container.
//!
//! ```text
//! CONTROL container, cmd 0x5 (flags 0xD4), always peripheral -> central, tid = the request's tid
//! +-----+-----+-------+-------------+------+
//! | tid | 0   | 0xD4  | payload_len | code |
//! +-----+-----+-------+-------------+------+
//!                        = 1           u8
//! ```
//!
//! Codes `0x01` (RESPONSE_TOO_LARGE) and `0x02` (BUSY) are the reference's. Codes `0x03` and up are
//! blerpc-rs additions: the reference peripherals stay silent on these failures, so a reference
//! central only ever sees a timeout. Reference centrals map every code other than `0x01` to a
//! generic "peripheral error", so sending the new codes is wire-safe: an old central fails the
//! call at once instead of waiting for its timeout. Likewise, a byte this crate does not know is
//! kept as [`ErrorCode::Unknown`] and must be treated as a generic error, never as a parse failure.

/// The code of an ERROR control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `0x01` (reference): the response does not fit the peripheral's limits.
    ResponseTooLarge,
    /// `0x02` (reference): the peripheral cannot take another request now; retry later.
    Busy,
    /// `0x03`: no handler is registered for the command name.
    UnknownCommand,
    /// `0x04`: the command packet or its protobuf data did not decode.
    DecodeFailed,
    /// `0x05`: an encrypted message failed to decrypt (bad tag, replayed or stale counter).
    DecryptFailed,
    /// `0x06`: a plaintext message arrived while the peer requires an encrypted session.
    EncryptionRequired,
    /// `0x07`: the request is larger than the peripheral accepts.
    RequestTooLarge,
    /// `0x08`: a container arrived out of sequence and the message was dropped.
    SequenceGap,
    /// `0x09`: the key exchange failed (bad step, signature or key).
    KeyExchangeFailed,
    /// `0x0A`: the handler ran and reported a failure.
    HandlerFailed,
    /// `0x0B`: a stream exceeded its item count or backlog limit.
    StreamLimit,
    /// `0x0C` (cancel extension): the request was cancelled by the central's CANCEL; nothing
    /// more comes for it.
    Cancelled,
    /// `0x0D` (deadline extension): the request's deadline passed before its answer; the
    /// handler was stopped and nothing more comes for it.
    DeadlineExceeded,
    /// Any other byte: a generic peripheral error.
    Unknown(u8),
}

impl ErrorCode {
    /// Decodes a code byte. Never fails: unknown bytes become [`ErrorCode::Unknown`].
    pub const fn from_byte(b: u8) -> Self {
        match b {
            0x01 => ErrorCode::ResponseTooLarge,
            0x02 => ErrorCode::Busy,
            0x03 => ErrorCode::UnknownCommand,
            0x04 => ErrorCode::DecodeFailed,
            0x05 => ErrorCode::DecryptFailed,
            0x06 => ErrorCode::EncryptionRequired,
            0x07 => ErrorCode::RequestTooLarge,
            0x08 => ErrorCode::SequenceGap,
            0x09 => ErrorCode::KeyExchangeFailed,
            0x0A => ErrorCode::HandlerFailed,
            0x0B => ErrorCode::StreamLimit,
            0x0C => ErrorCode::Cancelled,
            0x0D => ErrorCode::DeadlineExceeded,
            other => ErrorCode::Unknown(other),
        }
    }

    /// The code byte put on the wire.
    pub const fn to_byte(self) -> u8 {
        match self {
            ErrorCode::ResponseTooLarge => 0x01,
            ErrorCode::Busy => 0x02,
            ErrorCode::UnknownCommand => 0x03,
            ErrorCode::DecodeFailed => 0x04,
            ErrorCode::DecryptFailed => 0x05,
            ErrorCode::EncryptionRequired => 0x06,
            ErrorCode::RequestTooLarge => 0x07,
            ErrorCode::SequenceGap => 0x08,
            ErrorCode::KeyExchangeFailed => 0x09,
            ErrorCode::HandlerFailed => 0x0A,
            ErrorCode::StreamLimit => 0x0B,
            ErrorCode::Cancelled => 0x0C,
            ErrorCode::DeadlineExceeded => 0x0D,
            ErrorCode::Unknown(b) => b,
        }
    }

    /// Every code this crate names, in byte order. [`ErrorCode::from_byte`] decodes exactly these
    /// bytes to a named code and every other byte to [`ErrorCode::Unknown`].
    pub const NAMED: [ErrorCode; 13] = [
        ErrorCode::ResponseTooLarge,
        ErrorCode::Busy,
        ErrorCode::UnknownCommand,
        ErrorCode::DecodeFailed,
        ErrorCode::DecryptFailed,
        ErrorCode::EncryptionRequired,
        ErrorCode::RequestTooLarge,
        ErrorCode::SequenceGap,
        ErrorCode::KeyExchangeFailed,
        ErrorCode::HandlerFailed,
        ErrorCode::StreamLimit,
        ErrorCode::Cancelled,
        ErrorCode::DeadlineExceeded,
    ];

    /// The code's protocol name: `RESPONSE_TOO_LARGE` and `BUSY` as the reference names them
    /// (`BLERPC_ERROR_*`), the blerpc-rs codes as `docs/protocol.md` lists them, and `UNKNOWN`
    /// for any other byte.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ResponseTooLarge => "RESPONSE_TOO_LARGE",
            ErrorCode::Busy => "BUSY",
            ErrorCode::UnknownCommand => "UNKNOWN_COMMAND",
            ErrorCode::DecodeFailed => "DECODE_FAILED",
            ErrorCode::DecryptFailed => "DECRYPT_FAILED",
            ErrorCode::EncryptionRequired => "ENCRYPTION_REQUIRED",
            ErrorCode::RequestTooLarge => "REQUEST_TOO_LARGE",
            ErrorCode::SequenceGap => "SEQUENCE_GAP",
            ErrorCode::KeyExchangeFailed => "KEY_EXCHANGE_FAILED",
            ErrorCode::HandlerFailed => "HANDLER_FAILED",
            ErrorCode::StreamLimit => "STREAM_LIMIT",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            ErrorCode::Unknown(_) => "UNKNOWN",
        }
    }

    /// `true` for the codes the reference implementations define (`0x01`, `0x02`).
    pub const fn is_reference_code(self) -> bool {
        matches!(self.to_byte(), 0x01 | 0x02)
    }

    /// A short human-readable description.
    pub fn description(self) -> &'static str {
        match self {
            ErrorCode::ResponseTooLarge => "response too large",
            ErrorCode::Busy => "peripheral busy",
            ErrorCode::UnknownCommand => "unknown command",
            ErrorCode::DecodeFailed => "request failed to decode",
            ErrorCode::DecryptFailed => "message failed to decrypt",
            ErrorCode::EncryptionRequired => "encryption required",
            ErrorCode::RequestTooLarge => "request too large",
            ErrorCode::SequenceGap => "container sequence gap",
            ErrorCode::KeyExchangeFailed => "key exchange failed",
            ErrorCode::HandlerFailed => "handler failed",
            ErrorCode::StreamLimit => "stream limit exceeded",
            ErrorCode::Cancelled => "cancelled by the central",
            ErrorCode::DeadlineExceeded => "the request's deadline passed",
            ErrorCode::Unknown(_) => "peripheral error",
        }
    }
}

impl From<u8> for ErrorCode {
    fn from(b: u8) -> Self {
        ErrorCode::from_byte(b)
    }
}

impl From<ErrorCode> for u8 {
    fn from(code: ErrorCode) -> Self {
        code.to_byte()
    }
}

/// The protocol name ([`ErrorCode::as_str`]); a byte without a name shows its value too:
/// `BUSY`, `UNKNOWN(0xee)`.
impl core::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ErrorCode::Unknown(b) => write!(f, "{}({b:#04x})", self.as_str()),
            _ => f.write_str(self.as_str()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn reference_codes() {
        assert_eq!(ErrorCode::from_byte(0x01), ErrorCode::ResponseTooLarge);
        assert_eq!(ErrorCode::from_byte(0x02), ErrorCode::Busy);
        assert!(ErrorCode::Busy.is_reference_code());
        assert!(ErrorCode::ResponseTooLarge.is_reference_code());
        assert!(!ErrorCode::UnknownCommand.is_reference_code());
        assert!(!ErrorCode::Unknown(0x00).is_reference_code());
    }

    #[test]
    fn every_byte_roundtrips() {
        for b in 0..=u8::MAX {
            let code = ErrorCode::from_byte(b);
            assert_eq!(code.to_byte(), b);
            assert_eq!(u8::from(ErrorCode::from(b)), b);
            assert_eq!(matches!(code, ErrorCode::Unknown(_)), b == 0 || b > 0x0D);
        }
    }

    #[test]
    fn display_is_the_protocol_name() {
        extern crate std;
        use std::string::ToString;
        assert_eq!(ErrorCode::from_byte(0x02).to_string(), "BUSY");
        assert_eq!(ErrorCode::from_byte(0x0b).to_string(), "STREAM_LIMIT");
        assert_eq!(ErrorCode::from_byte(0xee).to_string(), "UNKNOWN(0xee)");
        assert_eq!(ErrorCode::from_byte(0x00).to_string(), "UNKNOWN(0x00)");
    }

    #[test]
    fn every_code_has_its_name() {
        // The wire byte, the name and the description of every named code, written out: a code
        // added to the enum without a name fails `as_str`'s exhaustive match, and one left out
        // of `NAMED` fails the count below.
        let expected: [(u8, &str, &str); 13] = [
            (0x01, "RESPONSE_TOO_LARGE", "response too large"),
            (0x02, "BUSY", "peripheral busy"),
            (0x03, "UNKNOWN_COMMAND", "unknown command"),
            (0x04, "DECODE_FAILED", "request failed to decode"),
            (0x05, "DECRYPT_FAILED", "message failed to decrypt"),
            (0x06, "ENCRYPTION_REQUIRED", "encryption required"),
            (0x07, "REQUEST_TOO_LARGE", "request too large"),
            (0x08, "SEQUENCE_GAP", "container sequence gap"),
            (0x09, "KEY_EXCHANGE_FAILED", "key exchange failed"),
            (0x0a, "HANDLER_FAILED", "handler failed"),
            (0x0b, "STREAM_LIMIT", "stream limit exceeded"),
            (0x0c, "CANCELLED", "cancelled by the central"),
            (0x0d, "DEADLINE_EXCEEDED", "the request's deadline passed"),
        ];
        assert_eq!(ErrorCode::NAMED.len(), expected.len());
        for (code, (byte, name, description)) in ErrorCode::NAMED.iter().zip(expected) {
            assert_eq!(code.to_byte(), byte);
            assert_eq!(ErrorCode::from_byte(byte), *code);
            assert_eq!((code.as_str(), code.description()), (name, description));
        }
        // Every byte the parser decodes to a named code is in `NAMED`, and only those.
        let named = (0..=u8::MAX)
            .filter(|&b| !matches!(ErrorCode::from_byte(b), ErrorCode::Unknown(_)))
            .count();
        assert_eq!(named, ErrorCode::NAMED.len());
        assert_eq!(ErrorCode::Unknown(0x42).as_str(), "UNKNOWN");
    }
}
