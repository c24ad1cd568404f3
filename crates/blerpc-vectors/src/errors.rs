//! The error names of the vectors' `expect` blocks, matched against our error enums
//! (`tools/vectors/README.md`, "Error names", has the table).

use blerpc_proto::crypto::CryptoError;
use blerpc_proto::handshake::HandshakeError;
use blerpc_proto::session::{SESSION_OVERHEAD, SessionError};
use blerpc_proto::split::{SplitCursor, SplitError, max_message_len};
use blerpc_proto::wire::WireError;

use crate::Node;
use crate::fail::{Fail, ensure, same_int, same_len};

/// A [`WireError`] against `{"error": NAME, "field", "max"?}` (`Truncated`, `InvalidValue`,
/// `TooLong`).
pub(crate) fn wire(got: &WireError, expect: Node<'_>) -> Result<(), Fail> {
    let (name, field, max) = match *got {
        WireError::Truncated { field, .. } => ("Truncated", field, None),
        WireError::InvalidValue { field, .. } => ("InvalidValue", field, None),
        WireError::TooLong { field, max, .. } => ("TooLong", field, Some(max)),
        _ => ("(other)", "", None),
    };
    ensure(name == expect.str("error")?, "another wire error")?;
    ensure(field == expect.str("field")?, "the error's field differs")?;
    if let Some(want) = expect.get("max") {
        let want = want.as_u64().ok_or(Fail::field("not an integer", "max"))?;
        same_int("the error's max", max.map_or(u64::MAX, u64::from), want)?;
    }
    Ok(())
}

/// A [`WireError`] against the extensions' `{"kind", "field", "offset", ...}`: `truncated` with
/// `needed` and `available`, `invalid` with `value`. With `full`, those three must be present
/// (`long.py` states them; `large.py` states kind, field and offset only).
pub(crate) fn extension(got: &WireError, expect: Node<'_>, full: bool) -> Result<(), Fail> {
    let (kind, field, offset, details): (_, _, _, &[(&'static str, u32)]) = match *got {
        WireError::Truncated {
            field,
            offset,
            needed,
            available,
        } => (
            "truncated",
            field,
            offset,
            &[("needed", needed), ("available", available)],
        ),
        WireError::InvalidValue {
            field,
            offset,
            value,
        } => ("invalid", field, offset, &[("value", value)]),
        _ => return Err(Fail::new("an error other than truncated or invalid")),
    };
    ensure(kind == expect.str("kind")?, "another kind of error")?;
    ensure(field == expect.str("field")?, "the error's field differs")?;
    same_int(
        "the error's offset",
        u64::from(offset),
        expect.u64("offset")?,
    )?;
    for &(key, value) in details {
        if full || expect.get(key).is_some() {
            same_int(key, u64::from(value), expect.u64(key)?)?;
        }
    }
    Ok(())
}

/// A [`SplitError`]: `TooLong payload max` is `MessageTooLarge { max }` with
/// `max == max_message_len(mtu)`, `InvalidValue mtu` is `MtuTooSmall { min: 10 }`.
pub(crate) fn split(
    got: &SplitError,
    len: usize,
    mtu: usize,
    expect: Node<'_>,
) -> Result<(), Fail> {
    match (expect.str("error")?, expect.str("field")?) {
        ("TooLong", "payload") => {
            let max = expect.usize("max")?;
            ensure(
                *got == SplitError::MessageTooLarge { len, max },
                "another split error (MessageTooLarge expected)",
            )?;
            same_len("max_message_len", max_message_len(mtu), max)
        }
        ("InvalidValue", "mtu") => ensure(
            *got == SplitError::MtuTooSmall {
                att_mtu: mtu,
                min: SplitCursor::MIN_ATT_MTU,
            },
            "another split error (MtuTooSmall expected)",
        ),
        _ => Err(Fail::field(
            "no mapping for the expected split error",
            "error",
        )),
    }
}

/// A [`HandshakeError`] against an `expect` block.
pub(crate) fn handshake(got: &HandshakeError, expect: Node<'_>) -> Result<(), Fail> {
    let ok = match (expect.str("error")?, got) {
        ("AllZeroSharedSecret", HandshakeError::Crypto(CryptoError::AllZeroSharedSecret)) => true,
        // Every provider reports an identity key that does not decode as a bad signature.
        ("BadSignature", HandshakeError::Crypto(CryptoError::BadSignature)) => true,
        ("BadConfirmation", HandshakeError::BadConfirmation) => true,
        ("UnexpectedStep", HandshakeError::UnexpectedStep { got, .. }) => {
            same_int("unexpected step", u64::from(*got), expect.u64("step")?)?;
            true
        }
        ("Truncated" | "InvalidValue" | "TooLong", HandshakeError::Wire(w)) => {
            wire(w, expect)?;
            true
        }
        _ => false,
    };
    ensure(ok, "another handshake error")
}

/// A [`SessionError`]: `Replay`, `BadTag` (= `AuthenticationFailed`), `FrameTooShort min 20`
/// (= `TooShort`), `CounterExhausted`.
pub(crate) fn session(got: &SessionError, expect: Node<'_>) -> Result<(), Fail> {
    let ok = match (expect.str("error")?, got) {
        ("Replay", SessionError::Replay { .. }) => true,
        ("BadTag", SessionError::AuthenticationFailed) => true,
        ("CounterExhausted", SessionError::CounterExhausted) => true,
        ("FrameTooShort", SessionError::TooShort { len }) => {
            same_len("FrameTooShort min", SESSION_OVERHEAD, expect.usize("min")?)?;
            ensure(
                *len < SESSION_OVERHEAD,
                "TooShort of a frame that is long enough",
            )?;
            true
        }
        _ => false,
    };
    ensure(ok, "another session error")
}

/// `Ok` if `expect` is exactly `{"match": true}`.
pub(crate) fn expect_match(expect: Node<'_>) -> Result<(), Fail> {
    ensure(
        expect.len() == 1 && expect.bool("match") == Ok(true),
        "expect is not {\"match\": true}",
    )
}
