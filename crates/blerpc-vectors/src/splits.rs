//! `splits.json` and `tid_wrap.json`: our splitter, through every API, gives the reference's
//! containers; the reference's containers parse, re-emit identically and reassemble.

use blerpc_proto::assemble::{Assembler, AssemblerConfig};
use blerpc_proto::buf::Buffer;
use blerpc_proto::split::{SplitCursor, Splitter, container_count};
use blerpc_proto::wire::container::{ATT_OVERHEAD, Container};
use sha2::{Digest, Sha256};

use crate::errors::{self, expect_match};
use crate::fail::{At, Fail, ensure, same_bytes, same_int, same_len};
use crate::payload::payload;
use crate::tree::Items;
use crate::{Buffers, Check, Ctx, Node, Stop, sized};

pub(crate) fn check<P, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let s = &mut *ctx.scratch;
    let mtu = case.usize("mtu")?;
    let tid = case.u8("tid")?;
    let payload = payload(case.field("payload")?, &mut s.message)?;
    let expect = case.field("expect")?;
    let outcome = case.field("outcome")?;
    ensure(
        case.get("capped").and_then(|c| c.as_bool()) == Some(case.str("splitter")? == "capped"),
        "the capped flag and the splitter disagree",
    )?;

    if let Some(target) = expect.get("see_case") {
        // The reference failed here; our output is its capped twin's.
        let target = target.as_str().ok_or(Fail::field("not text", "see_case"))?;
        let twin = ctx
            .doc
            .list("cases")?
            .find(|c| c.str("name") == Ok(target))
            .ok_or(Fail::field("the twin case does not exist", "see_case"))?;
        ensure(twin.str("splitter")? == "capped", "the twin is not capped")?;
        same_len("twin mtu", twin.usize("mtu")?, mtu)?;
        same_int("twin tid", twin.u8("tid")?, tid)?;
        let twin_payload = crate::payload::payload(twin.field("payload")?, &mut s.frame)?;
        same_bytes("twin payload", twin_payload, payload)?;
        ensure(
            outcome.get("containers").is_none(),
            "see_case but the reference succeeded",
        )?;
        // The reference's own (uncapped) chunk plan would need a chunk over 255 bytes.
        if let Some(lens) = outcome.get("chunk_lens").and_then(|l| l.as_list()) {
            ensure(
                lens.clone().any(|l| l.as_u64().is_some_and(|l| l > 255)),
                "the reference's chunk plan has no chunk over 255",
            )?;
        }
        return Ok(());
    }

    if expect.get("error").is_some() {
        #[cfg(feature = "alloc")]
        {
            let err = blerpc_proto::split::split_to_vec(tid, payload, mtu)
                .err()
                .ok_or(Fail::new("split_to_vec succeeded"))?;
            errors::split(&err, payload.len(), mtu, expect)?;
        }
        let err = container_count(payload.len(), mtu)
            .err()
            .ok_or(Fail::new("container_count succeeded"))?;
        errors::split(&err, payload.len(), mtu, expect)?;
        let err = SplitCursor::new(tid, payload.len(), mtu)
            .err()
            .ok_or(Fail::new("SplitCursor::new succeeded"))?;
        return Ok(errors::split(&err, payload.len(), mtu, expect)?);
    }

    expect_match(expect)?;
    let want = outcome.list("containers")?;
    split_output(tid, payload, mtu, want, &mut s.container, &mut s.assembler)?;
    // The reference's bytes themselves: parse → emit is the identity.
    let lens = outcome.list("chunk_lens")?;
    same_len("chunk_lens count", lens.remaining(), want.remaining())?;
    for (i, (bytes, len)) in want.zip(lens).enumerate() {
        let (bytes, c) = container_item(bytes).at(i)?;
        let len = len
            .as_u64()
            .ok_or(Fail::new("a chunk length is not an integer"))
            .at(i)?;
        same_int("reference chunk length", c.payload.len() as u64, len).at(i)?;
        let out = sized(&mut s.container, c.emitted_len())?;
        let n = c
            .emit(out)
            .map_err(|_| Fail::new("Container::emit"))
            .at(i)?;
        same_bytes("container parse→emit", out.get(..n).unwrap_or(&[]), bytes).at(i)?;
    }
    Ok(())
}

pub(crate) fn check_tid_wrap<P, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let s = &mut *ctx.scratch;
    expect_match(case.field("expect")?)?;
    let mtu = case.usize("mtu")?;
    // A u8 transaction counter starting at 0, shared by control requests and splits (the
    // central's `alloc_tid`), wrapping 255 → 0.
    let mut next: u8 = 0;
    for (i, op) in case.list("ops")?.enumerate() {
        let tid = op.u8("tid").at(i)?;
        same_int("op tid", tid, next).at(i)?;
        match op.str("op").at(i)? {
            "next_transaction_id" => {}
            "split" => {
                let payload = payload(op.field("payload")?, &mut s.message).at(i)?;
                let want = op.list("containers").at(i)?;
                split_output(tid, payload, mtu, want, &mut s.container, &mut s.assembler).at(i)?;
            }
            _ => return Err(Fail::field("unknown op", "op").at(i).into()),
        }
        next = next.wrapping_add(1);
    }
    Ok(())
}

/// A list item holding a container in hex: its bytes, and our parse of them.
pub(crate) fn container_item(item: Node<'_>) -> Result<(&[u8], Container<'_>), Fail> {
    let bytes = item.as_bytes().ok_or(Fail::new("a container is not hex"))?;
    let c = Container::parse(bytes).map_err(|_| Fail::new("Container::parse"))?;
    Ok((bytes, c))
}

/// Our splitter, through every API, must produce `want`; the containers must respect the MTU
/// and the 255 cap, and reassemble to the payload.
pub(crate) fn split_output<M: Buffer + Default>(
    tid: u8,
    payload: &[u8],
    mtu: usize,
    want: Items<'_>,
    out: &mut M,
    assembler: &mut Assembler<M, 4>,
) -> Check {
    #[cfg(feature = "alloc")]
    {
        let ours = blerpc_proto::split::split_to_vec(tid, payload, mtu)
            .map_err(|_| Fail::new("split_to_vec"))?;
        same_len("split_to_vec container count", ours.len(), want.remaining())?;
        for (i, (o, w)) in ours.iter().zip(want).enumerate() {
            let w = w
                .as_bytes()
                .ok_or(Fail::new("a container is not hex"))
                .at(i)?;
            same_bytes("split_to_vec container", o, w).at(i)?;
        }
    }
    ensure(
        container_count(payload.len(), mtu) == Ok(want.remaining()),
        "container_count differs",
    )?;

    // The borrowing splitter into an MTU-sized buffer.
    let mut splitter = Splitter::new(tid, payload, mtu).map_err(|_| Fail::new("Splitter::new"))?;
    let out = sized(out, mtu.saturating_sub(ATT_OVERHEAD))?;
    for (i, w) in want.enumerate() {
        let w = w
            .as_bytes()
            .ok_or(Fail::new("a container is not hex"))
            .at(i)?;
        ensure(splitter.cursor().next_len() == Some(w.len()), "next_len").at(i)?;
        let n = splitter
            .next_into(out)
            .ok_or(Fail::new("our splitter ended early"))
            .at(i)?;
        same_bytes("container", out.get(..n).unwrap_or(&[]), w).at(i)?;
        ensure(w.len() <= out.len(), "a container exceeds the MTU").at(i)?;
        let header = if i == 0 { 6 } else { 4 };
        let declared = w.get(header - 1).map(|&b| usize::from(b));
        ensure(
            declared == Some(w.len().wrapping_sub(header)),
            "payload_len inconsistent",
        )
        .at(i)?;
    }
    ensure(
        splitter.next_into(out).is_none(),
        "our splitter gives more containers",
    )?;
    ensure(splitter.cursor().is_done(), "cursor not done")?;
    reassemble(want, payload, assembler)
}

/// Emits every container of `cursor` for `message` into `out`, one at a time: each must have the
/// length `next_len` announced and pass `each(index, bytes, parsed)`, and is fed to `asm` (reset
/// to `config`); only the last may complete the message, which must be `message`. Returns the
/// number of containers and the SHA-256 of them all, end to end.
pub(crate) fn stream<M: Buffer + Default>(
    mut cursor: SplitCursor,
    message: &[u8],
    out: &mut [u8],
    asm: &mut Assembler<M, 4>,
    config: AssemblerConfig,
    mut each: impl FnMut(usize, &[u8], &Container<'_>) -> Result<(), Fail>,
) -> Result<(usize, [u8; 32]), Stop> {
    asm.reset();
    asm.set_config(config);
    let mut hash = Sha256::new();
    let (mut i, mut done) = (0, None);
    loop {
        let next = cursor.next_len();
        let emitted = cursor.emit_next(message, out);
        let Some(n) = emitted.map_err(|_| Fail::new("emit_next")).at(i)? else {
            break;
        };
        ensure(next == Some(n), "next_len").at(i)?;
        let c = out.get(..n).unwrap_or(&[]);
        hash.update(c);
        let parsed = Container::parse(c)
            .map_err(|_| Fail::new("Container::parse"))
            .at(i)?;
        each(i, c, &parsed).at(i)?;
        ensure(done.is_none(), "complete before the last container").at(i)?;
        done = asm
            .feed(&parsed)
            .map_err(|_| Fail::new("reassembly"))
            .at(i)?;
        i += 1;
    }
    let done = done.ok_or(Fail::new("not complete after the last container"))?;
    same_bytes("reassembled message", asm.message(done), message)?;
    asm.release(done);
    Ok((i, hash.finalize().into()))
}

/// Feeds `containers` to a fresh default assembler: only the last may complete, with `want`.
pub(crate) fn reassemble<M: Buffer + Default>(
    containers: Items<'_>,
    want: &[u8],
    assembler: &mut Assembler<M, 4>,
) -> Check {
    assembler.reset();
    assembler.set_config(AssemblerConfig::default());
    let count = containers.remaining();
    for (i, item) in containers.enumerate() {
        let (_, c) = container_item(item).at(i)?;
        match assembler.feed(&c) {
            Ok(None) if i + 1 < count => {}
            Ok(Some(done)) if i + 1 == count => {
                let result = same_bytes("reassembled message", assembler.message(done), want);
                assembler.release(done);
                return Ok(result?);
            }
            _ => return Err(Fail::new("the containers do not reassemble").at(i).into()),
        }
    }
    Err(Fail::new("no containers").into())
}
