//! `control.json`: every CONTROL message parses to the stated values in each direction it can
//! travel and emits the reference's bytes; the ignored ones (unknown type, unknown command, a
//! payload too short) are dropped by every role that can receive them.

use blerpc_proto::Direction;
use blerpc_proto::buf::Buffer;
use blerpc_proto::crypto::CryptoProvider;
use blerpc_proto::wire::capabilities::{Capabilities, CapabilityFlags};
use blerpc_proto::wire::container::{Container, ContainerKind};
use blerpc_proto::wire::control::ControlMessage;
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_proto::wire::key_exchange::{KeyExchangeStep, STEP2_LEN};

use crate::connection::{central_ignores, peripheral_ignores};
use crate::errors::expect_match;
use crate::fail::{Fail, ensure, same_bytes, same_int};
use crate::{Buffers, Check, Ctx, Node, sized};

/// Both directions, for `"direction": "any"`.
const BOTH: [Direction; 2] = [
    Direction::CentralToPeripheral,
    Direction::PeripheralToCentral,
];

/// The directions a case names (`c2p`, `p2c` or `any`).
pub(crate) fn directions(name: &str) -> Result<&'static [Direction], Fail> {
    match name {
        "c2p" => Ok(&BOTH[..1]),
        "p2c" => Ok(&BOTH[1..]),
        "any" => Ok(&BOTH),
        _ => Err(Fail::field("unknown direction", "direction")),
    }
}

/// One direction (`c2p` or `p2c`).
pub(crate) fn direction(name: &str) -> Result<Direction, Fail> {
    match directions(name)? {
        [d] => Ok(*d),
        _ => Err(Fail::field("not one direction", "direction")),
    }
}

/// Our parse of `bytes` against the reference's `Container.deserialize` result `parsed`, then
/// our emitter on what we parsed: the input again, without trailing bytes and with the flag bits
/// the parser ignores cleared (the reserved bits 1-0 always (wire.md §1.2), and the command bits
/// 5-2 of non-CONTROL containers: `ContainerKind::Unknown` keeps no command, like FIRST).
pub(crate) fn against_reference<M: Buffer + Default>(
    bytes: &[u8],
    parsed: Node<'_>,
    out: &mut M,
) -> Check {
    let c = Container::parse(bytes).map_err(|_| Fail::new("Container::parse"))?;
    same_int("tid", c.tid, parsed.u8("tid")?)?;
    same_int("seq", c.seq, parsed.u8("seq")?)?;
    // The core's names are the reference's (LARGE_FIRST is not a reference type: the reference
    // reads flags 0x01 as a FIRST, bits 1..0 ignored, and no vector has one).
    ensure(c.kind.as_str() == parsed.str("type")?, "container type")?;
    let total = match c.kind {
        ContainerKind::First { total_length } => total_length,
        _ => 0,
    };
    same_int("total_length", total, parsed.u16("total_length")?)?;
    if let ContainerKind::Control(cmd) = c.kind {
        ensure(cmd.as_str() == parsed.str("control_cmd")?, "control_cmd")?;
    }
    same_bytes("payload", c.payload, parsed.bytes("payload_hex")?)?;
    let out = sized(out, c.emitted_len())?;
    let n = c.emit(out).map_err(|_| Fail::new("Container::emit"))?;
    let emitted = out.get(..n).unwrap_or(&[]);
    let canonical = bytes.get(..n).unwrap_or(bytes);
    same_int("re-emitted length", emitted.len(), canonical.len())?;
    for (i, (&e, &b)) in emitted.iter().zip(canonical).enumerate() {
        let want = match i {
            2 if b >> 6 == 0b11 => b & !0b11,
            2 => b & 0b1100_0000,
            _ => b,
        };
        ensure(e == want, "the re-emitted container differs").map_err(|f| f.at(i))?;
    }
    Ok(())
}

pub(crate) fn check<P: CryptoProvider, B: Buffers>(
    ctx: &mut Ctx<'_, P, B>,
    case: Node<'_>,
) -> Check {
    let s = &mut *ctx.scratch;
    let bytes = case.bytes("container_hex")?;
    against_reference(bytes, case.field("parsed")?, &mut s.container)?;
    let c = Container::parse(bytes).map_err(|_| Fail::new("Container::parse"))?;
    let dirs = directions(case.str("direction")?)?;
    let expect = case.field("expect")?;
    let fields = case.field("fields")?;

    if let Some(reason) = expect.get("ignore") {
        match reason.as_str() {
            Some("UnknownType") => {
                ensure(c.kind == ContainerKind::Unknown, "not an unknown type")?;
                same_int("type field", c.flags() >> 6, fields.u8("type")?)?;
            }
            Some(reason @ ("UnknownControlCmd" | "BadControlPayload")) => {
                let ContainerKind::Control(cmd) = c.kind else {
                    return Err(Fail::new("not a CONTROL container").into());
                };
                for &dir in dirs {
                    match (reason, ControlMessage::parse(cmd, c.payload, dir)) {
                        ("UnknownControlCmd", Ok(ControlMessage::Unknown { cmd, payload })) => {
                            same_int("unknown cmd", cmd, fields.u8("control_cmd")?)?;
                            same_bytes("unknown control payload", payload, c.payload)?;
                        }
                        ("BadControlPayload", Err(_)) => {}
                        _ => {
                            return Err(
                                Fail::new("an ignored control parsed as something else").into()
                            );
                        }
                    }
                }
            }
            _ => return Err(Fail::field("unknown ignore reason", "ignore").into()),
        }
        // The connection of every role that can receive it drops it: no reply, no event but a
        // warning, and setup is not disturbed.
        for &dir in dirs {
            match dir {
                Direction::PeripheralToCentral => central_ignores::<P, B>(ctx.provider, bytes)?,
                Direction::CentralToPeripheral => peripheral_ignores::<P, B>(ctx.provider, bytes)?,
            }
        }
        return Ok(());
    }

    expect_match(expect)?;
    let ContainerKind::Control(cmd) = c.kind else {
        return Err(Fail::new("not a CONTROL container").into());
    };
    let want = expected(case, c.payload)?;
    for &dir in dirs {
        let got = ControlMessage::parse(cmd, c.payload, dir)
            .map_err(|_| Fail::new("ControlMessage::parse"))?;
        ensure(got == want, "the parsed control differs")?;
        ensure(
            ControlMessage::from_container(&c, dir) == Some(Ok(want)),
            "ControlMessage::from_container differs",
        )?;
    }
    if let ControlMessage::Error(code) = want {
        same_int("error code byte", code.to_byte(), fields.u8("error_code")?)?;
    }
    if case.get("emit").and_then(|e| e.as_bool()) == Some(true) {
        let out = sized(&mut s.frame, 4 + want.payload_len())?;
        let n = want
            .emit_container(c.tid, out)
            .map_err(|_| Fail::new("emit_container"))?;
        same_bytes("emit_container", out.get(..n).unwrap_or(&[]), bytes)?;
    }
    Ok(())
}

fn caps(fields: Node<'_>) -> Result<Capabilities, Fail> {
    Ok(Capabilities {
        max_request: fields.u16("max_request_payload_size")?,
        max_response: fields.u16("max_response_payload_size")?,
        flags: CapabilityFlags::from_bits_retain(fields.u16("flags")?),
        large: None,
    })
}

/// The message a case describes (`message` + `fields`), as our enum.
fn expected<'a>(case: Node<'_>, payload: &'a [u8]) -> Result<ControlMessage<'a>, Fail> {
    let fields = case.field("fields")?;
    Ok(match case.str("message")? {
        "TIMEOUT_REQUEST" => ControlMessage::TimeoutRequest,
        "TIMEOUT_RESPONSE" => ControlMessage::TimeoutResponse {
            timeout_ms: fields.u16("timeout_ms")?,
        },
        "STREAM_END_C2P" => ControlMessage::StreamEndC2P { stream: None },
        "STREAM_END_P2C" => ControlMessage::StreamEndP2C,
        "CAPABILITIES_REQUEST" if fields.is_empty() => {
            ControlMessage::CapabilitiesRequest { advertised: None }
        }
        "CAPABILITIES_REQUEST" => ControlMessage::CapabilitiesRequest {
            advertised: Some(caps(fields)?),
        },
        "CAPABILITIES_RESPONSE" => ControlMessage::CapabilitiesResponse(caps(fields)?),
        "ERROR" => ControlMessage::Error(ErrorCode::from_byte(fields.u8("error_code")?)),
        "KEY_EXCHANGE" => {
            same_bytes(
                "KEY_EXCHANGE payload",
                payload,
                fields.bytes("payload_hex")?,
            )?;
            let step =
                KeyExchangeStep::parse(payload).map_err(|_| Fail::new("KeyExchangeStep::parse"))?;
            same_int("step", u64::from(step.step()), fields.u64("step")?)?;
            let mut out = [0u8; STEP2_LEN];
            let n = step
                .emit(&mut out)
                .map_err(|_| Fail::new("KeyExchangeStep::emit"))?;
            same_bytes("step parse→emit", out.get(..n).unwrap_or(&[]), payload)?;
            ControlMessage::KeyExchange(payload)
        }
        "UNKNOWN" => ControlMessage::Unknown {
            cmd: fields.u8("control_cmd")?,
            payload,
        },
        _ => return Err(Fail::field("no mapping for the message", "message")),
    })
}
