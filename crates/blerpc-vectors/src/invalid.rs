//! `invalid.json`: malformed containers, commands, splits, handshake steps and reassembly
//! sequences give the named error, and where the reference fails but we succeed, our result is
//! the stated one.

use blerpc_proto::Direction;
use blerpc_proto::crypto::{CryptoProvider, IdentitySeed, X25519Secret};
use blerpc_proto::handshake::{CentralHandshake, PeripheralHandshake};
use blerpc_proto::split::SplitCursor;
use blerpc_proto::wire::command::{Command, CommandType};
use blerpc_proto::wire::container::{Container, ContainerKind};
use blerpc_proto::wire::control::ControlMessage;

use crate::assembly::results;
use crate::commands::command_type;
use crate::connection::{central_ignores, peripheral_ignores};
use crate::control::against_reference;
use crate::errors::{self, expect_match};
use crate::fail::{Fail, ensure, same_bytes};
use crate::payload::payload;
use crate::splits::split_output;
use crate::{Buffers, Check, Ctx, Node, sized};

pub(crate) fn check<P: CryptoProvider, B: Buffers>(
    ctx: &mut Ctx<'_, P, B>,
    case: Node<'_>,
) -> Check {
    let (p, s) = (ctx.provider, &mut *ctx.scratch);
    let input = case.field("input")?;
    let expect = case.field("expect")?;
    let reference = case.field("reference")?;
    match case.str("op")? {
        "container.parse" => {
            let bytes = input.bytes("hex")?;
            if expect.get("error").is_some() {
                let err = Container::parse(bytes)
                    .err()
                    .ok_or(Fail::new("the container parsed"))?;
                return Ok(errors::wire(&err, expect)?);
            }
            ensure(expect.bool("match") == Ok(true), "expect.match is not true")?;
            against_reference(bytes, reference.field("result")?, &mut s.container)?;
            let c = Container::parse(bytes).map_err(|_| Fail::new("Container::parse"))?;
            match expect.get("ignore").map(|r| r.as_str()) {
                None => Ok(()),
                Some(Some("UnknownType")) => Ok(ensure(
                    c.kind == ContainerKind::Unknown,
                    "not an unknown type",
                )?),
                Some(Some("UnknownControlCmd")) => {
                    let ContainerKind::Control(cmd) = c.kind else {
                        return Err(Fail::new("not a CONTROL container").into());
                    };
                    let m = ControlMessage::parse(cmd, c.payload, Direction::PeripheralToCentral);
                    ensure(
                        matches!(m, Ok(ControlMessage::Unknown { .. })),
                        "not an unknown control",
                    )?;
                    central_ignores::<P, B>(p, bytes)?;
                    peripheral_ignores::<P, B>(p, bytes)
                }
                Some(_) => Err(Fail::field("unknown ignore reason", "ignore").into()),
            }
        }
        "command.parse" => {
            let bytes = input.bytes("hex")?;
            if expect.get("error").is_some() {
                let err = Command::parse(bytes)
                    .err()
                    .ok_or(Fail::new("the command parsed"))?;
                return Ok(errors::wire(&err, expect)?);
            }
            let cmd = Command::parse(bytes).map_err(|_| Fail::new("Command::parse"))?;
            // We succeed where the reference fails: `expect.result`; else the reference's own.
            let (want, name) = match expect.get("result") {
                Some(result) => {
                    ensure(result.len() == 3, "expect.result has other fields")?;
                    (result, result.bytes("cmd_name_hex")?)
                }
                None => {
                    expect_match(expect)?;
                    let r = reference.field("result")?;
                    (r, r.str("cmd_name")?.as_bytes())
                }
            };
            let kind = command_type(want.str("cmd_type")?)?;
            ensure(cmd.kind == kind, "parsed command type")?;
            same_bytes("parsed command name", cmd.name.as_bytes(), name)?;
            Ok(same_bytes(
                "parsed data",
                cmd.data,
                want.bytes("data_hex")?,
            )?)
        }
        "command.emit" => {
            let kind = match input.str("cmd_type")? {
                "REQUEST" => CommandType::Request,
                _ => CommandType::Response,
            };
            let name = core::str::from_utf8(input.bytes("cmd_name_hex")?)
                .map_err(|_| Fail::field("not UTF-8", "cmd_name_hex"))?;
            let data = payload(input.field("data")?, &mut s.message)?;
            let cmd = Command { kind, name, data };
            let out = sized(&mut s.frame, cmd.emitted_len())?;
            match (cmd.emit(out), expect.get("packet_hex")) {
                (Err(e), None) => Ok(errors::wire(&e, expect)?),
                (Ok(n), Some(_)) => Ok(same_bytes(
                    "emitted packet",
                    out.get(..n).unwrap_or(&[]),
                    expect.bytes("packet_hex")?,
                )?),
                _ => Err(Fail::new("emit did not give the expected result").into()),
            }
        }
        "split" => {
            let mtu = input.usize("mtu")?;
            let tid = input.u8("tid")?;
            let payload = payload(input.field("payload")?, &mut s.message)?;
            if expect.get("containers").is_some() {
                let want = expect.list("containers")?;
                return split_output(tid, payload, mtu, want, &mut s.container, &mut s.assembler);
            }
            #[cfg(feature = "alloc")]
            {
                let err = blerpc_proto::split::split_to_vec(tid, payload, mtu)
                    .err()
                    .ok_or(Fail::new("split_to_vec succeeded"))?;
                errors::split(&err, payload.len(), mtu, expect)?;
            }
            let err = SplitCursor::new(tid, payload.len(), mtu)
                .err()
                .ok_or(Fail::new("SplitCursor::new succeeded"))?;
            Ok(errors::split(&err, payload.len(), mtu, expect)?)
        }
        "kx.central.process_step2" => {
            let secret = X25519Secret::from_bytes(input.array("central_x25519_private")?);
            let (c, _) = CentralHandshake::start(p.clone(), secret);
            let err = c
                .receive_step2(input.bytes("step2_hex")?)
                .err()
                .ok_or(Fail::new("step 2 accepted"))?;
            Ok(errors::handshake(&err, expect)?)
        }
        op @ ("kx.peripheral.handle_step" | "kx.peripheral.handle_step_after_step1") => {
            let seed = IdentitySeed::from_bytes(input.array("identity_seed")?);
            let identity = p
                .load_identity(&seed)
                .map_err(|_| Fail::new("load_identity"))?;
            let secret = X25519Secret::from_bytes(input.array("peripheral_x25519_private")?);
            let per = PeripheralHandshake::new(p.clone(), identity);
            let payload = input.bytes("payload_hex")?;
            let err = if op == "kx.peripheral.handle_step" {
                per.receive_step1(payload, secret).err()
            } else {
                let (per, _) = per
                    .receive_step1(input.bytes("step1_hex")?, secret)
                    .map_err(|_| Fail::new("step 1"))?;
                per.receive_step3(payload, [0; 12]).err()
            };
            let err = err.ok_or(Fail::new("the step was accepted"))?;
            Ok(errors::handshake(&err, expect)?)
        }
        "assemble" => results(
            input.list("containers")?,
            expect.list("results")?,
            &mut s.assembler,
        ),
        _ => Err(Fail::field("unknown op", "op").into()),
    }
}
