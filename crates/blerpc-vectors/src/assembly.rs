//! `assembly.json`: one assembler fed the containers in order gives the stated result for each
//! (`pending`, `complete` + payload, `ignored` + reason, `dropped` + reason); where we do not
//! diverge from the reference, its results are ours.

use blerpc_proto::assemble::{AssembleError, Assembler, AssemblerConfig};
use blerpc_proto::buf::Buffer;
use blerpc_proto::wire::container::ContainerKind;

use crate::fail::{At, Fail, ensure, same_bytes, same_len};
use crate::splits::container_item;
use crate::tree::Items;
use crate::{Buffers, Check, Ctx, Node};

pub(crate) fn check<P, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let containers = case.list("containers")?;
    let expect = case.list("expect")?;
    results(containers, expect, &mut ctx.scratch.assembler)?;
    // Where we do not diverge, the reference's results are ours: the payload of each complete
    // message, null for everything else.
    let reference = case.list("reference")?;
    let same = reference.remaining() == expect.remaining()
        && reference.zip(expect).all(|(r, e)| match e.str("result") {
            Ok("complete") => r.as_bytes().is_some() && r.as_bytes() == e.bytes("payload_hex").ok(),
            _ => r.is_null(),
        });
    ensure(
        case.bool("diverges")? != same,
        "the diverges flag does not match the results",
    )?;
    Ok(())
}

/// `want` is exactly `{"result": result, "reason": reason}` (no reason: `{"result": result}`).
fn result(want: Node<'_>, result: &str, reason: Option<&str>) -> Result<(), Fail> {
    ensure(want.str("result")? == result, "another result")?;
    match reason {
        Some(reason) => ensure(want.str("reason")? == reason, "another reason")?,
        None => ensure(want.get("reason").is_none(), "a reason given")?,
    }
    same_len(
        "result fields",
        want.len(),
        1 + usize::from(reason.is_some()),
    )
}

/// Feeds `containers` to one fresh assembler (default limits) and compares each result with
/// `expect`.
pub(crate) fn results<M: Buffer + Default>(
    containers: Items<'_>,
    expect: Items<'_>,
    asm: &mut Assembler<M, 4>,
) -> Check {
    same_len("results", expect.remaining(), containers.remaining())?;
    asm.reset();
    asm.set_config(AssemblerConfig::default());
    for (i, (item, want)) in containers.zip(expect).enumerate() {
        let (_, c) = container_item(item).at(i)?;
        match asm.feed(&c) {
            Ok(Some(done)) => {
                ensure(want.str("result")? == "complete", "complete").at(i)?;
                same_len("result fields", want.len(), 2).at(i)?;
                let payload = want.bytes("payload_hex").at(i)?;
                let same = same_bytes("assembled payload", asm.message(done), payload);
                asm.release(done);
                same.at(i)?;
            }
            Ok(None) => match c.kind {
                ContainerKind::Control(_) => result(want, "ignored", Some("Control")),
                ContainerKind::Unknown => result(want, "ignored", Some("UnknownType")),
                _ => result(want, "pending", None),
            }
            .at(i)?,
            Err(AssembleError::SequenceGap { .. }) => {
                result(want, "dropped", Some("SeqGap")).at(i)?;
                ensure(
                    !asm.is_receiving(c.tid),
                    "tid still in progress after a gap",
                )
                .at(i)?;
            }
            Err(AssembleError::UnknownTransaction { .. }) => {
                result(want, "ignored", Some("UnknownTid")).at(i)?;
            }
            Err(_) => return Err(Fail::new("an assembler error no vector names").at(i).into()),
        }
    }
    Ok(())
}
