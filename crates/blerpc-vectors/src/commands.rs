//! `commands.json`: command packets parse to the stated type, name and data, and emit the same
//! bytes from those values and from what we parsed.

use blerpc_proto::wire::command::{Command, CommandType};

use crate::errors::expect_match;
use crate::fail::{Fail, ensure, same_bytes, same_len};
use crate::payload::sha256;
use crate::{Buffers, Check, Ctx, Node, sized};

/// The command type a case names (the core's names are the reference's).
pub(crate) fn command_type(name: &str) -> Result<CommandType, Fail> {
    [CommandType::Request, CommandType::Response]
        .into_iter()
        .find(|t| t.as_str() == name)
        .ok_or(Fail::field("unknown command type", "cmd_type"))
}

pub(crate) fn check<P, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let s = &mut *ctx.scratch;
    expect_match(case.field("expect")?)?;
    let packet = case.bytes("packet_hex")?;
    let data = case.bytes("data_hex")?;
    same_bytes("data sha256", &sha256(data), case.bytes("data_sha256")?)?;
    let kind = command_type(case.str("cmd_type")?)?;
    let name = case.str("cmd_name")?;
    // Parse.
    let parsed = Command::parse(packet).map_err(|_| Fail::new("Command::parse"))?;
    ensure(parsed.kind == kind, "parsed command type")?;
    ensure(parsed.name == name, "parsed command name")?;
    same_bytes("parsed data", parsed.data, data)?;
    // Emit, from the case's values and from what we parsed.
    for (cmd, what) in [
        (Command { kind, name, data }, "emitted command"),
        (parsed, "parse→emit"),
    ] {
        same_len("emitted_len", cmd.emitted_len(), packet.len())?;
        let out = sized(&mut s.frame, cmd.emitted_len())?;
        let n = cmd.emit(out).map_err(|_| Fail::new("Command::emit"))?;
        same_bytes(what, out.get(..n).unwrap_or(&[]), packet)?;
    }
    Ok(())
}
