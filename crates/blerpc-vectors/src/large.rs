//! `large_messages.json`, the large-message extension's vectors (`tools/vectors/large.py`, built
//! from the layout in `docs/protocol.md`: no reference has the extension). The vector's bytes
//! parse to the fields it states, and our emitters, splitter and session produce its bytes.

use blerpc_proto::Direction;
use blerpc_proto::assemble::AssemblerConfig;
use blerpc_proto::crypto::CryptoProvider;
use blerpc_proto::split::SplitCursor;
use blerpc_proto::wire::capabilities::{Capabilities, CapabilityFlags, LargeLimits};
use blerpc_proto::wire::command::{Command, CommandType};
use blerpc_proto::wire::container::{ATT_OVERHEAD, Container, ContainerKind};
use blerpc_proto::wire::control::ControlMessage;

use crate::control::direction;
use crate::errors;
use crate::fail::{Fail, ensure, same_bytes, same_int, same_len};
use crate::payload::{pattern, sha256};
use crate::session::sealed_request;
use crate::splits::stream;
use crate::{Buffers, Check, Ctx, Node, fits, sized};

/// What `large.py` promises about its file.
pub(crate) fn envelope(doc: Node<'_>) -> Result<(), Fail> {
    ensure(
        doc.str("generator")? == "tools/vectors/large.py",
        "generator",
    )?;
    ensure(doc.list("cases")?.remaining() >= 30, "fewer than 30 cases")
}

pub(crate) fn check<P: CryptoProvider, B: Buffers>(
    ctx: &mut Ctx<'_, P, B>,
    case: Node<'_>,
) -> Check {
    match case.str("kind")? {
        "control" | "control_invalid" => control(case),
        "container" | "container_invalid" => container(ctx, case),
        "command" | "command_invalid" => command(ctx, case),
        "split" => split(ctx, case),
        _ => Err(Fail::field("unknown kind", "kind").into()),
    }
}

/// The CAPABILITIES a case's `fields` state (`large_max_*` present: the extension's limits).
fn capabilities(f: Node<'_>) -> Result<Capabilities, Fail> {
    let large = match f.get("large_max_request") {
        Some(_) => Some(LargeLimits {
            max_request: f.u32("large_max_request")?,
            max_response: f.u32("large_max_response")?,
        }),
        None => None,
    };
    Ok(Capabilities {
        max_request: f.u16("max_request")?,
        max_response: f.u16("max_response")?,
        flags: CapabilityFlags::from_bits_retain(f.u16("flags")?),
        large,
    })
}

/// A CAPABILITIES control of the extensions' files: parses to the stated fields (or fails as
/// stated) and emits the same bytes. Returns the capabilities for the caller's own checks.
pub(crate) fn control_both_ways(
    case: Node<'_>,
    full_errors: bool,
) -> Result<Option<Capabilities>, Fail> {
    let bytes = case.bytes("container_hex")?;
    let dir = direction(case.str("direction")?)?;
    let c = Container::parse(bytes).map_err(|_| Fail::new("Container::parse"))?;
    let parsed = ControlMessage::from_container(&c, dir).ok_or(Fail::new("not a control"))?;
    if case.str("kind")? == "control_invalid" {
        let err = parsed.err().ok_or(Fail::new("the control parsed"))?;
        errors::extension(&err, case.field("error")?, full_errors)?;
        return Ok(None);
    }
    let caps = capabilities(case.field("fields")?)?;
    let want = match dir {
        Direction::CentralToPeripheral => ControlMessage::CapabilitiesRequest {
            advertised: Some(caps),
        },
        Direction::PeripheralToCentral => ControlMessage::CapabilitiesResponse(caps),
    };
    ensure(parsed == Ok(want), "the parsed control differs")?;
    let mut out = [0u8; 64];
    let n = want
        .emit_container(c.tid, &mut out)
        .map_err(|_| Fail::new("emit_container"))?;
    same_bytes("emitted control", out.get(..n).unwrap_or(&[]), bytes)?;
    Ok(Some(caps))
}

fn control(case: Node<'_>) -> Check {
    control_both_ways(case, false)?;
    Ok(())
}

fn container<P, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let bytes = case.bytes("hex")?;
    let parsed = Container::parse(bytes);
    if case.str("kind")? == "container_invalid" {
        let err = parsed.err().ok_or(Fail::new("the container parsed"))?;
        return Ok(errors::extension(&err, case.field("error")?, false)?);
    }
    let c = parsed.map_err(|_| Fail::new("Container::parse"))?;
    let f = case.field("fields")?;
    let total = f.u32("total_length")?;
    ensure(
        c.kind
            == ContainerKind::LargeFirst {
                total_length: total,
            },
        "not the stated LARGE FIRST",
    )?;
    same_int("tid", c.tid, f.u8("tid")?)?;
    same_int("seq", c.seq, 0)?;
    same_len("payload_len", c.payload.len(), f.usize("payload_len")?)?;
    let want = match case.get("emit_hex") {
        Some(_) => case.bytes("emit_hex")?,
        None => bytes,
    };
    let rebuilt = Container::large_first(c.tid, total, c.payload);
    let out = sized(&mut ctx.scratch.container, rebuilt.emitted_len())?;
    let n = rebuilt
        .emit(out)
        .map_err(|_| Fail::new("Container::emit"))?;
    Ok(same_bytes(
        "emitted container",
        out.get(..n).unwrap_or(&[]),
        want,
    )?)
}

fn command<P, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let s = &mut *ctx.scratch;
    if case.str("kind")? == "command_invalid" {
        let err = Command::parse_large(case.bytes("hex")?)
            .err()
            .ok_or(Fail::new("the command parsed"))?;
        return Ok(errors::extension(&err, case.field("error")?, false)?);
    }
    let len = fits(&s.message, case.field("data")?.u64("len")?)?;
    let data = pattern(&mut s.message, len, 7, 0)?;
    let name = case.str("cmd_name")?;
    let (cmd, kind) = match case.str("type")? {
        "RESPONSE" => (Command::response(name, data), CommandType::Response),
        _ => (Command::request(name, data), CommandType::Request),
    };
    ensure(cmd.kind == kind, "command type")?;
    let out = sized(&mut s.frame, cmd.emitted_len_large())?;
    let n = cmd.emit_large(out).map_err(|_| Fail::new("emit_large"))?;
    let out = out.get(..n).unwrap_or(&[]);
    same_len("packet_len", out.len(), case.usize("packet_len")?)?;
    let header = case.bytes("header_hex")?;
    same_bytes("header", out.get(..header.len()).unwrap_or(out), header)?;
    same_bytes("packet sha256", &sha256(out), case.bytes("packet_sha256")?)?;
    ensure(Command::parse_large(out) == Ok(cmd), "re-parse")?;
    Ok(())
}

fn split<P: CryptoProvider, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let (p, s) = (ctx.provider, &mut *ctx.scratch);
    let (tid, mtu) = (case.u8("tid")?, case.usize("mtu")?);
    // The message: the sealed 64 KiB echo request, or a pattern.
    let message: &[u8] = if case.get("session_key").is_some() {
        let key = case.array("session_key")?;
        let data = pattern(&mut s.message, 65_536, 7, 0)?;
        let frame = sealed_request(
            p,
            (&key, case.u32("counter")?),
            ("echo", data),
            case.bytes("plaintext_sha256")?,
            &mut s.frame,
        )?;
        same_bytes("frame sha256", &sha256(frame), case.bytes("frame_sha256")?)?;
        frame
    } else {
        let len = fits(&s.message, case.field("payload")?.u64("len")?)?;
        pattern(&mut s.message, len, 31, 7)?
    };
    let cursor = SplitCursor::new_large(tid, message.len(), mtu)
        .map_err(|_| Fail::new("SplitCursor::new_large"))?;
    ensure(
        Some(cursor.is_large()) == case.get("large").and_then(|l| l.as_bool()),
        "large",
    )?;
    // Our containers, one at a time: compared where the vector records them, and fed back into
    // an assembler with the extension in force.
    let config = AssemblerConfig {
        max_message_len: message.len(),
        max_in_flight: 1,
        large_messages: true,
        long_containers: false,
    };
    let out = sized(&mut s.container, mtu.saturating_sub(ATT_OVERHEAD))?;
    let headers_at = case.field("headers_at")?;
    let count = case.usize("container_count")?;
    let mut longest = 0;
    let each = |i: usize, c: &[u8], _: &Container<'_>| {
        match i {
            0 => same_bytes("first container", c, case.bytes("first_hex")?)?,
            1 if case.get("second_hex").is_some() => {
                same_bytes("second container", c, case.bytes("second_hex")?)?
            }
            _ => {}
        }
        if i + 1 == count {
            same_bytes("last container", c, case.bytes("last_hex")?)?;
        }
        let entries = headers_at.as_object();
        for (at, h) in entries.ok_or(Fail::field("not an object", "headers_at"))? {
            if at.parse() == Ok(i) {
                let h = h.as_bytes().ok_or(Fail::field("not hex", "headers_at"))?;
                same_bytes("container header", c.get(..4).unwrap_or(c), h)?;
            }
        }
        longest = longest.max(c.len());
        Ok(())
    };
    let (n, digest) = stream(cursor, message, out, &mut s.assembler, config, each)?;
    same_len("container count", n, count)?;
    same_bytes(
        "containers sha256",
        &digest,
        case.bytes("containers_sha256")?,
    )?;
    Ok(same_len(
        "longest container",
        longest,
        case.usize("max_container_len")?,
    )?)
}
