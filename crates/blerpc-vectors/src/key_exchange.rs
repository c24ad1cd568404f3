//! `key_exchange.json`: every primitive value and every step of our handshake typestates, fed
//! the reference's previous step; and the recorded transcripts, replayed by our connections.

use blerpc_proto::Role;
use blerpc_proto::crypto::{
    CryptoProvider, IdentitySeed, SESSION_KEY_INFO, SESSION_KEY_LEN, X25519Secret,
};
use blerpc_proto::handshake::{
    CONFIRM_CENTRAL, CONFIRM_PERIPHERAL, CentralHandshake, PeripheralHandshake,
};
use blerpc_proto::wire::container::{Container, ControlCmd};
use blerpc_proto::wire::control::ControlMessage;
use blerpc_proto::wire::key_exchange::{KeyExchangeStep, STEP2_LEN, Step2};

use crate::connection::{Fixture, transcript_central, transcript_peripheral};
use crate::fail::{At, Fail, ensure, same_bytes, same_int, same_len};
use crate::session::{seal, session};
use crate::{Buffers, Check, Ctx, Node};

pub(crate) fn check<P: CryptoProvider, B: Buffers>(
    ctx: &mut Ctx<'_, P, B>,
    case: Node<'_>,
) -> Check {
    ensure(
        case.field("expect")?.bool("match") == Ok(true),
        "expect.match is not true",
    )?;
    match case.str("kind")? {
        "exchange" => exchange(ctx, case),
        "transcript" => {
            let fx = Fixture::of(ctx.doc)?;
            let roles = match case.field("expect")?.get("roles") {
                Some(r) => r.as_list().ok_or(Fail::field("not a list", "roles"))?,
                None => {
                    transcript_central(ctx.provider, ctx.scratch, case, &fx)?;
                    return transcript_peripheral(ctx.provider, ctx.scratch, case, &fx);
                }
            };
            ensure(roles.remaining() > 0, "no roles")?;
            for (i, r) in roles.enumerate() {
                match r.as_str() {
                    Some("central") => transcript_central(ctx.provider, ctx.scratch, case, &fx),
                    Some("peripheral") => {
                        transcript_peripheral(ctx.provider, ctx.scratch, case, &fx)
                    }
                    _ => Err(Fail::field("unknown role", "roles").into()),
                }
                .at(i)?;
            }
            Ok(())
        }
        _ => Err(Fail::field("unknown kind", "kind").into()),
    }
}

/// Every primitive value, then every step of our typestates, fed the reference's previous step.
fn exchange<P: CryptoProvider, B: Buffers>(ctx: &mut Ctx<'_, P, B>, case: Node<'_>) -> Check {
    let (p, s) = (ctx.provider, &mut *ctx.scratch);
    let inputs = case.field("inputs")?;
    let v = case.field("values")?;
    let central_priv: [u8; 32] = inputs.array("central_x25519_private")?;
    let periph_priv: [u8; 32] = inputs.array("peripheral_x25519_private")?;
    let seed: [u8; 32] = inputs.array("peripheral_ed25519_seed")?;
    let nonce_c: [u8; 12] = inputs.array("central_confirm_nonce")?;
    let nonce_p: [u8; 12] = inputs.array("peripheral_confirm_nonce")?;
    let c_pub: [u8; 32] = v.array("central_x25519_public")?;
    let p_pub: [u8; 32] = v.array("peripheral_x25519_public")?;
    let id_pub: [u8; 32] = v.array("peripheral_ed25519_public")?;
    let key: [u8; SESSION_KEY_LEN] = v.array("session_key")?;

    // The primitives.
    let c_secret = X25519Secret::from_bytes(central_priv);
    let p_secret = X25519Secret::from_bytes(periph_priv);
    same_bytes("central public", &p.x25519_public(&c_secret), &c_pub)?;
    same_bytes("peripheral public", &p.x25519_public(&p_secret), &p_pub)?;
    let ss_c = p
        .x25519_agree(&c_secret, &p_pub)
        .map_err(|_| Fail::new("x25519_agree (central)"))?;
    let ss_p = p
        .x25519_agree(&p_secret, &c_pub)
        .map_err(|_| Fail::new("x25519_agree (peripheral)"))?;
    let shared = v.bytes("shared_secret")?;
    same_bytes("shared secret (central)", ss_c.as_bytes(), shared)?;
    same_bytes("shared secret (peripheral)", ss_p.as_bytes(), shared)?;
    let salt = v.bytes("hkdf_salt")?;
    same_bytes("hkdf salt", salt.get(..32).unwrap_or(salt), &c_pub)?;
    same_bytes("hkdf salt", salt.get(32..).unwrap_or(&[]), &p_pub)?;
    same_bytes("hkdf info", SESSION_KEY_INFO, v.bytes("hkdf_info_hex")?)?;
    same_len("hkdf length", SESSION_KEY_LEN, v.usize("hkdf_length")?)?;
    let k = p
        .derive_session_key(&ss_c, &c_pub, &p_pub)
        .map_err(|_| Fail::new("derive_session_key"))?;
    same_bytes("session key", k.as_bytes(), &key)?;
    let swapped = p
        .derive_session_key(&ss_c, &p_pub, &c_pub)
        .map_err(|_| Fail::new("derive_session_key"))?;
    same_bytes(
        "session key with the salt swapped",
        swapped.as_bytes(),
        v.bytes("session_key_with_swapped_salt")?,
    )?;
    ensure(
        swapped.as_bytes() != &key,
        "the swapped salt gives the session key",
    )?;
    let msg = Step2::signed_message(&c_pub, &p_pub);
    same_bytes("signed message", &msg, v.bytes("signed_message")?)?;
    let identity = p
        .load_identity(&IdentitySeed::from_bytes(seed))
        .map_err(|_| Fail::new("load_identity"))?;
    same_bytes("identity public", &p.identity_public(&identity), &id_pub)?;
    let sig = p.ed25519_sign(&identity, &msg);
    same_bytes("signature", &sig, v.bytes("signature")?)?;
    p.ed25519_verify(&id_pub, &msg, &sig)
        .map_err(|_| Fail::new("ed25519_verify"))?;
    same_bytes(
        "confirm C",
        CONFIRM_CENTRAL,
        v.bytes("confirm_central_plaintext_hex")?,
    )?;
    same_bytes(
        "confirm P",
        CONFIRM_PERIPHERAL,
        v.bytes("confirm_peripheral_plaintext_hex")?,
    )?;

    // The steps: payloads and containers, both ways.
    let steps = case.list("steps")?;
    same_len("steps", steps.remaining(), 4)?;
    let mut payloads: [Option<&[u8]>; 4] = [None; 4];
    for (i, st) in steps.enumerate() {
        let step = st.u8("step").at(i)?;
        let payload = st.bytes("payload_hex").at(i)?;
        same_len("payload_len", payload.len(), st.usize("payload_len")?).at(i)?;
        let sender = if step % 2 == 1 {
            "central"
        } else {
            "peripheral"
        };
        ensure(st.str("sender")? == sender, "sender").at(i)?;
        let tid = st.u8("container_tid").at(i)?;
        let container = st.bytes("container_hex").at(i)?;
        let parsed = KeyExchangeStep::parse(payload)
            .map_err(|_| Fail::new("KeyExchangeStep::parse"))
            .at(i)?;
        same_int("parsed step", parsed.step(), step).at(i)?;
        let mut out = [0u8; 4 + STEP2_LEN];
        let n = parsed
            .emit(&mut out)
            .map_err(|_| Fail::new("KeyExchangeStep::emit"))
            .at(i)?;
        same_bytes("step parse→emit", out.get(..n).unwrap_or(&[]), payload).at(i)?;
        let n = ControlMessage::KeyExchange(payload)
            .emit_container(tid, &mut out)
            .map_err(|_| Fail::new("emit_container"))
            .at(i)?;
        same_bytes("step container", out.get(..n).unwrap_or(&[]), container).at(i)?;
        let c = Container::parse(container)
            .map_err(|_| Fail::new("Container::parse"))
            .at(i)?;
        ensure(
            c == Container::control(tid, ControlCmd::KeyExchange, payload),
            "parsed step container",
        )
        .at(i)?;
        *payloads
            .get_mut(usize::from(step.wrapping_sub(1)))
            .ok_or(Fail::new("a step number outside 1..=4"))
            .at(i)? = Some(payload);
    }
    let step = |n: usize| {
        payloads
            .get(n - 1)
            .copied()
            .flatten()
            .ok_or(Fail::new("a step is missing").at(n))
    };

    // The typestates, each fed the reference's bytes, each emitting the reference's bytes.
    let (c, s1) = CentralHandshake::start(p.clone(), X25519Secret::from_bytes(central_priv));
    same_bytes("our step 1", &s1, step(1)?)?;
    let per = PeripheralHandshake::new(p.clone(), identity.clone());
    let (per, s2) = per
        .receive_step1(step(1)?, X25519Secret::from_bytes(periph_priv))
        .map_err(|_| Fail::new("receive_step1"))?;
    same_bytes("our step 2", &s2, step(2)?)?;
    let c = c
        .receive_step2(step(2)?)
        .map_err(|_| Fail::new("receive_step2"))?;
    same_bytes("identity presented", c.identity(), &id_pub)?;
    let (c, s3) = c.accept(nonce_c).map_err(|_| Fail::new("accept"))?;
    same_bytes("our step 3", &s3, step(3)?)?;
    let (mut per_session, s4) = per
        .receive_step3(step(3)?, nonce_p)
        .map_err(|_| Fail::new("receive_step3"))?;
    same_bytes("our step 4", &s4, step(4)?)?;
    let mut c_session = c
        .receive_step4(step(4)?)
        .map_err(|_| Fail::new("receive_step4"))?;

    // Both sessions seal as sessions built from the reference's key.
    let hello = b"\x00\x04echo\x07\x00\x0a\x05hello";
    for (ours, role) in [
        (&mut c_session, Role::Central),
        (&mut per_session, Role::Peripheral),
    ] {
        let mut want = [0u8; 64];
        let reference = seal(&mut session(p, &key, role)?, hello, &mut s.frame)?
            .map_err(|_| Fail::new("seal"))?;
        let want = want.get_mut(..reference.len()).ok_or(Fail::new("frame"))?;
        want.copy_from_slice(reference);
        let got = seal(ours, hello, &mut s.frame)?.map_err(|_| Fail::new("seal"))?;
        same_bytes("session frame against the reference key's", got, want)?;
    }
    Ok(())
}
