//! `long_containers.json`, the long-container extension's vectors (`tools/vectors/long.py`,
//! built from the layout in `docs/protocol.md`, "Long containers"; no reference has it):
//! - CAPABILITIES with flags bit 2 parse to the stated fields and emit the same bytes;
//! - LONG FIRST / LARGE FIRST / SUBSEQUENT containers (and their classic neighbours) parse to
//!   the stated fields, and `Container::emit` writes the same bytes;
//! - non-canonical, truncated and short LONG containers fail with the stated `WireError`;
//! - the assembler takes LONG containers only with `AssemblerConfig::long_containers`, up to
//!   16,384 bytes each (`AssembleError::ContainerTooLong` otherwise);
//! - `SplitCursor::new_long` gives exactly the recorded containers (patterns and sealed
//!   frames), refuses what the vectors refuse, and the containers reassemble.

use blerpc_proto::assemble::{AssembleError, AssemblerConfig};
use blerpc_proto::buf::Buffer;
use blerpc_proto::crypto::CryptoProvider;
use blerpc_proto::session::SESSION_OVERHEAD;
use blerpc_proto::split::{SplitCursor, SplitError};
use blerpc_proto::wire::capabilities::CapabilityFlags;
use blerpc_proto::wire::container::{
    Container, ContainerKind, ControlCmd, FIRST_HEADER_LEN, HEADER_LEN, LARGE_FIRST_HEADER_LEN,
    MAX_LONG_CONTAINER_LEN,
};

use crate::errors;
use crate::fail::{At, Fail, ensure, same_bytes, same_int, same_len};
use crate::large::control_both_ways;
use crate::payload::{long_pattern, pattern, sha256};
use crate::session::sealed_request;
use crate::splits::stream;
use crate::{Buffers, Check, Ctx, Node, Stop, fits, sized};

/// What `long.py` promises about its file: its constants are ours, and its cases cover the
/// extension (each LONG kind, both refusals of the assembler, the seq wrap, both split
/// refusals, a sealed frame).
pub(crate) fn envelope(doc: Node<'_>) -> Result<(), Fail> {
    ensure(
        doc.str("generator")? == "tools/vectors/long.py",
        "generator",
    )?;
    ensure(
        doc.field("reference")?.is_null(),
        "no reference has this extension",
    )?;
    let k = doc.field("constants")?;
    let max = MAX_LONG_CONTAINER_LEN;
    same_len("max_container_len", k.usize("max_container_len")?, max)?;
    same_len(
        "first_chunk",
        k.usize("first_chunk")?,
        max - FIRST_HEADER_LEN - 1,
    )?;
    same_len(
        "large_first_chunk",
        k.usize("large_first_chunk")?,
        max - LARGE_FIRST_HEADER_LEN - 1,
    )?;
    same_len(
        "subsequent_chunk",
        k.usize("subsequent_chunk")?,
        max - HEADER_LEN - 1,
    )?;
    same_int(
        "capability_flag",
        k.u16("capability_flag")?,
        CapabilityFlags::LONG_CONTAINERS.bits(),
    )?;
    let cases = doc.list("cases")?;
    ensure(cases.remaining() >= 20, "fewer than 20 cases")?;
    for kind in ["FIRST", "LARGE_FIRST", "SUBSEQUENT"] {
        ensure(
            cases.clone().any(|c| {
                c.str("kind") == Ok("container")
                    && c.bool("long") == Ok(true)
                    && c.get("fields")
                        .and_then(|f| f.get("type"))
                        .and_then(|t| t.as_str())
                        == Some(kind)
            }),
            "no LONG container of some type",
        )?;
    }
    let case = |name: &str| cases.clone().find(|c| c.str("name") == Ok(name));
    let wrap = case("split_5000000_large_seq_wraps").ok_or(Fail::new("no seq wrap case"))?;
    ensure(wrap.u64("container_count")? > 256, "the seq does not wrap")?;
    for name in [
        "long_first_without_extension",
        "long_first_over_max",
        "split_65536_refused_without_large",
        "split_encrypted_echo_60000",
    ] {
        ensure(
            case(name).is_some(),
            "a case the extension needs is missing",
        )?;
    }
    Ok(())
}

pub(crate) fn check<P: CryptoProvider, B: Buffers>(
    ctx: &mut Ctx<'_, P, B>,
    case: Node<'_>,
) -> Check {
    match case.str("kind")? {
        "control" => {
            let caps = control_both_ways(case, true)?.ok_or(Fail::new("not a control"))?;
            let long = caps.flags.contains(CapabilityFlags::LONG_CONTAINERS);
            ensure(Ok(long) == case.bool("long"), "the LONG_CONTAINERS bit")?;
            Ok(())
        }
        "container" => container(ctx, case),
        "control_container" => control_container(ctx, case),
        "container_invalid" => {
            let err = Container::parse(case.bytes("hex")?)
                .err()
                .ok_or(Fail::new("the container parsed"))?;
            Ok(errors::extension(&err, case.field("error")?, true)?)
        }
        "assemble" => assemble(ctx, case),
        "split" => split(ctx, case),
        _ => Err(Fail::field("unknown kind", "kind").into()),
    }
}

/// A container descriptor `{"header_hex", "payload", "trailer_hex"?, "len", "sha256", "hex"?}`
/// built into `buf` from the vector (never by our emitter), length and hash checked.
fn built<'b, M: Buffer + Default>(desc: Node<'_>, buf: &'b mut M) -> Result<&'b [u8], Stop> {
    let header = desc.bytes("header_hex")?;
    let trailer = match desc.get("trailer_hex") {
        Some(_) => desc.bytes("trailer_hex")?,
        None => &[],
    };
    let len = fits(buf, desc.u64("len")?)?;
    let p = desc.field("payload")?;
    let payload_len = usize::try_from(p.u64("len")?).unwrap_or(usize::MAX);
    same_len(
        "container length",
        header
            .len()
            .saturating_add(payload_len)
            .saturating_add(trailer.len()),
        len,
    )?;
    let out = sized(buf, len)?;
    // The lengths add up (checked above).
    let parts = out
        .split_at_mut_checked(header.len())
        .and_then(|(head, rest)| Some((head, rest.split_at_mut_checked(payload_len)?)));
    let (head, (body, tail)) = parts.ok_or(Fail::new("container length"))?;
    head.copy_from_slice(header);
    crate::payload::fill_pattern(body, p.u64("mul")?, p.u64("add")?);
    same_bytes("pattern sha256", &sha256(body), p.bytes("sha256")?)?;
    tail.copy_from_slice(trailer);
    same_bytes("container sha256", &sha256(out), desc.bytes("sha256")?)?;
    if desc.get("hex").is_some() {
        same_bytes("container hex", out, desc.bytes("hex")?)?;
    }
    Ok(out)
}

/// `c` emitted into `buf`.
fn emit<'b, M: Buffer + Default>(c: &Container<'_>, buf: &'b mut M) -> Result<&'b [u8], Stop> {
    let out = sized(buf, c.emitted_len())?;
    let n = c.emit(out).map_err(|_| Fail::new("Container::emit"))?;
    same_len("emitted length", n, out.len())?;
    Ok(out)
}

fn container<P, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let s = &mut *ctx.scratch;
    let desc = case.field("container")?;
    let bytes = built(desc, &mut s.frame)?;
    let c = Container::parse(bytes).map_err(|_| Fail::new("Container::parse"))?;
    let f = case.field("fields")?;
    let (tid, seq) = (f.u8("tid")?, f.u8("seq")?);
    let payload = long_pattern(desc.field("payload")?, &mut s.message)?;
    same_len("payload_len", payload.len(), f.usize("payload_len")?)?;
    let want = match f.str("type")? {
        "FIRST" => Container::first(tid, f.u16("total_length")?, payload),
        "LARGE_FIRST" => Container::large_first(tid, f.u32("total_length")?, payload),
        "SUBSEQUENT" => Container::subsequent(tid, seq, payload),
        _ => return Err(Fail::field("unknown type", "type").into()),
    };
    ensure(c == want, "the parsed container differs")?;
    ensure(Ok(c.is_long()) == case.bool("long"), "is_long")?;
    same_len("header_len", c.header_len(), case.usize("header_len")?)?;
    let expect = match case.get("emit_hex") {
        Some(_) => case.bytes("emit_hex")?,
        None => bytes,
    };
    Ok(same_bytes(
        "emitted container",
        emit(&want, &mut s.container)?,
        expect,
    )?)
}

fn control_container<P, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let bytes = case.bytes("hex")?;
    let c = Container::parse(bytes).map_err(|_| Fail::new("Container::parse"))?;
    let f = case.field("fields")?;
    let cmd = match f.str("control_cmd")? {
        "ERROR" => ControlCmd::Error,
        "CAPABILITIES" => ControlCmd::Capabilities,
        _ => return Err(Fail::field("unexpected control_cmd", "control_cmd").into()),
    };
    let want = Container::control(f.u8("tid")?, cmd, f.bytes("payload_hex")?);
    ensure(c == want, "the parsed container differs")?;
    ensure(!c.is_long(), "a CONTROL container is never LONG")?;
    let emitted = emit(&c, &mut ctx.scratch.container)?;
    Ok(same_bytes(
        "emitted container",
        emitted,
        case.bytes("emit_hex")?,
    )?)
}

fn assemble<P, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let s = &mut *ctx.scratch;
    let cfg = case.field("config")?;
    let asm = &mut s.assembler;
    asm.reset();
    asm.set_config(AssemblerConfig {
        max_message_len: cfg.usize("max_message_len")?,
        max_in_flight: 2,
        large_messages: cfg.bool("large_messages")?,
        long_containers: cfg.bool("long_containers")?,
    });
    let containers = case.list("containers")?;
    let results = case.list("results")?;
    same_len("results", results.remaining(), containers.remaining())?;
    for (i, (desc, want)) in containers.zip(results).enumerate() {
        let bytes = built(desc, &mut s.frame).at(i)?;
        let c = Container::parse(bytes)
            .map_err(|_| Fail::new("Container::parse"))
            .at(i)?;
        // Our emitter writes the same bytes for what we parsed.
        same_bytes("re-emitted container", emit(&c, &mut s.container)?, bytes).at(i)?;
        let got = asm.feed(&c);
        const DIFFERS: &str = "another assembler result";
        match want.str("result").at(i)? {
            "pending" => ensure(got == Ok(None), DIFFERS).at(i)?,
            "complete" => {
                let Ok(Some(done)) = got else {
                    return Err(Fail::new(DIFFERS).at(i).into());
                };
                let message = asm.message(done);
                same_len("message length", message.len(), want.usize("len")?).at(i)?;
                same_bytes("message sha256", &sha256(message), want.bytes("sha256")?).at(i)?;
                asm.release(done);
            }
            "error" => {
                let tid = want.u8("tid").at(i)?;
                let expect = match want.str("error").at(i)? {
                    "ContainerTooLong" => AssembleError::ContainerTooLong {
                        tid,
                        payload_len: want.usize("payload_len")?,
                        max: want.usize("max")?,
                    },
                    "UnknownTransaction" => AssembleError::UnknownTransaction {
                        tid,
                        seq: want.u8("seq")?,
                    },
                    "LargeNotNegotiated" => AssembleError::LargeNotNegotiated {
                        tid,
                        total_length: want.usize("total_length")?,
                    },
                    _ => return Err(Fail::field("unknown error", "error").at(i).into()),
                };
                ensure(got == Err(expect), DIFFERS).at(i)?;
                // A refused container leaves nothing in progress for its tid.
                ensure(!asm.is_receiving(tid), "tid still in progress").at(i)?;
            }
            _ => return Err(Fail::field("unknown result", "result").at(i).into()),
        }
    }
    Ok(())
}

/// A split with `SplitCursor::new_long`: its refusals, or exactly the recorded containers (of
/// a pattern, or of an echo request built by our command emitter and sealed by our session,
/// checked against the recorded hashes and tag), which parse with the stated headers and
/// reassemble.
fn split<P: CryptoProvider, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let (p, s) = (ctx.provider, &mut *ctx.scratch);
    let tid = case.u8("tid")?;
    let large = case.bool("large_messages")?;
    let desc = case.field("payload")?;
    if let Some(err) = case.get("error") {
        ensure(err.str("kind")? == "MessageTooLarge", "error kind")?;
        // A length over usize::MAX (2^32 on a 32-bit MCU) cannot even be asked for here.
        let needed = desc.u64("len")?;
        let len = usize::try_from(needed).map_err(|_| {
            Stop::Skip(crate::Skip {
                needed,
                capacity: usize::MAX,
            })
        })?;
        let want = SplitError::MessageTooLarge {
            len: err.usize("len")?,
            max: err.usize("max")?,
        };
        let got = SplitCursor::new_long(tid, len, large).map(|_| ());
        return Ok(ensure(got == Err(want), "another split result")?);
    }
    let message: &[u8] = match case.get("encrypted") {
        None => {
            let len = fits(&s.message, desc.u64("len")?)?;
            let m = pattern(&mut s.message, len, desc.u64("mul")?, desc.u64("add")?)?;
            same_bytes("payload sha256", &sha256(m), desc.bytes("sha256")?)?;
            m
        }
        Some(enc) => {
            ensure(enc.str("direction")? == "c2p", "direction")?;
            ensure(enc.str("cmd_type")? == "REQUEST", "cmd_type")?;
            let data = long_pattern(enc.field("data")?, &mut s.message)?;
            let frame = sealed_request(
                p,
                (&enc.array("session_key")?, enc.u32("counter")?),
                (enc.str("cmd_name")?, data),
                enc.bytes("plaintext_sha256")?,
                &mut s.frame,
            )?;
            let plaintext_len = frame.len().saturating_sub(SESSION_OVERHEAD);
            same_len("plaintext_len", plaintext_len, enc.usize("plaintext_len")?)?;
            let tag = frame.get(frame.len().saturating_sub(16)..).unwrap_or(&[]);
            same_bytes("tag", tag, enc.bytes("frame_tag_hex")?)?;
            same_bytes("frame sha256", &sha256(frame), desc.bytes("sha256")?)?;
            frame
        }
    };
    let cursor = SplitCursor::new_long(tid, message.len(), large)
        .map_err(|_| Fail::new("SplitCursor::new_long"))?;
    ensure(
        Ok(cursor.is_large()) == case.bool("large_first"),
        "large_first",
    )?;
    same_len(
        "containers_left",
        cursor.containers_left(),
        case.usize("container_count")?,
    )?;
    let lens = case.list("container_lens")?;
    let (mut lens_left, mut headers) = (lens, case.list("headers")?);
    // The containers in full, where recorded (otherwise equal to ours by the hash).
    let mut theirs = match case.get("containers") {
        Some(_) => Some(case.list("containers")?),
        None => None,
    };
    let config = AssemblerConfig {
        max_message_len: message.len(),
        max_in_flight: 1,
        large_messages: large,
        long_containers: true,
    };
    // The ATT MTU plays no part: every container fits MAX_LONG_CONTAINER_LEN.
    let out = sized(&mut s.container, MAX_LONG_CONTAINER_LEN)?;
    let each = |i: usize, c: &[u8], parsed: &Container<'_>| {
        let len = lens_left.next().and_then(|l| l.as_u64());
        let len = len.ok_or(Fail::new("more containers than recorded"))?;
        same_int("container length", c.len() as u64, len)?;
        let header = headers.next().and_then(|h| h.as_bytes());
        let header = header.ok_or(Fail::new("no header recorded"))?;
        same_bytes("header", c.get(..header.len()).unwrap_or(c), header)?;
        if let Some(t) = theirs.as_mut() {
            let t = t.next().and_then(|t| t.as_bytes()).unwrap_or(&[]);
            same_bytes("container", c, t)?;
        }
        // Ours (equal to theirs) parse with the stated headers.
        same_len("header_len", parsed.header_len(), header.len())?;
        ensure(parsed.is_long() == (parsed.payload.len() > 255), "LONG")?;
        same_int("seq", parsed.seq, (i % 256) as u8)?;
        let kind_ok = match (i, parsed.kind) {
            (0, ContainerKind::First { total_length }) => {
                usize::from(total_length) == message.len()
            }
            (0, ContainerKind::LargeFirst { total_length }) => {
                total_length as usize == message.len()
            }
            (1.., ContainerKind::Subsequent) => true,
            _ => false,
        };
        ensure(kind_ok, "container kind or total_length")
    };
    let (n, digest) = stream(cursor, message, out, &mut s.assembler, config, each)?;
    same_len("container count", n, lens.remaining())?;
    if let Some(t) = case.get("containers").and_then(|t| t.as_list()) {
        same_len("recorded containers", t.remaining(), n)?;
    }
    Ok(same_bytes(
        "containers sha256",
        &digest,
        case.bytes("containers_sha256")?,
    )?)
}
