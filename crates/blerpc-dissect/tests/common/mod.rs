//! What the dissector's tests share: the wire.md §6 vectors as hex, and running the dissector
//! over them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use blerpc_dissect::{ControlBody, Options, PduInput, Report, dissect};
use blerpc_proto::wire::container::ControlCmd;

/// The session key of wire.md §6.5.
pub const KEY: &str = "12e68d830b3802896b9f0948a4f5fe5a";
/// KEY_EXCHANGE step 1 (the central's X25519 key), §6.5.
pub const STEP1: &str = "018520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
/// KEY_EXCHANGE step 2 (peripheral key, signature, identity), §6.5.
pub const STEP2: &str = concat!(
    "02de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
    "21e1fd6899395fcddad2e8c47c1559d360962fd6aea958a705e887a3063acf94",
    "507d3b284813b1a8a2b5e7e570dd44686941f768604fa72ea6b10d5c369a6703",
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
);
/// KEY_EXCHANGE step 3 with the fixed nonce 000102…0b, §6.5.
pub const STEP3: &str =
    "03000102030405060708090a0bdeab3e3f1abac538d48c34b53f5dfbf9a10f3b100a97271990fc4feb34984228";
/// encrypt(K, ctr 0, C→P, REQUEST echo "hello") as a FIRST container, tid 3.
pub const SEALED_FIRST: &str =
    "030000230023000000009cf7d7150c42a6bf48b246912998ab4473c7ea2df3ba26f3bc8c6fa37d7401";
/// The MTU 23 split of REQUEST echo {message: "B"*30}, tid 0x2a.
pub const SPLIT_23: [&str; 3] = [
    "2a000028000e00046563686f20000a1e42424242",
    "2a01401042424242424242424242424242424242",
    "2a02400a42424242424242424242",
];

/// Dissects `pdus` (hex, one per argument) with `opts`.
pub fn run(pdus: &[&str], opts: &Options) -> Report {
    let inputs: Vec<PduInput> = pdus
        .iter()
        .enumerate()
        .map(|(i, p)| PduInput::arg(i + 1, *p))
        .collect();
    dissect(&inputs, opts)
}

/// Dissects `pdus` with the default options.
pub fn default(pdus: &[&str]) -> Report {
    run(pdus, &Options::default())
}

/// [`KEY`] as bytes.
pub fn key() -> [u8; 16] {
    hex::decode(KEY).unwrap().try_into().unwrap()
}

/// The decoded CONTROL payload of PDU `i`.
pub fn control(r: &Report, i: usize) -> &ControlBody {
    &r.pdus[i].control.as_ref().expect("control payload").body
}

/// The command of PDU `i`'s CONTROL payload.
pub fn cmd(r: &Report, i: usize) -> ControlCmd {
    r.pdus[i].control.as_ref().expect("control payload").cmd
}
