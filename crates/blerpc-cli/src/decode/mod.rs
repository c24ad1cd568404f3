//! `blerpc decode`: the command-line shell around the dissector (the `blerpc-dissect` crate).
//!
//! [`run`] gathers the inputs (arguments, stdin, files), dissects them with
//! [`blerpc_dissect::dissect`], prints the report as text ([`blerpc_dissect::text::render`]) or
//! JSON, and picks the exit code.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use blerpc_dissect::{Dir, Options, PduInput, dissect, parse_hex, text};
use clap::Args;

/// `blerpc decode --help`, before the options.
pub const LONG_ABOUT: &str = "\
Dissect captured bleRPC PDUs.

Each HEX argument is one link PDU: one GATT write (central → peripheral) or one notification \
(peripheral → central), i.e. one container. For every PDU this prints the container header, \
whether it fits the ATT MTU and where it sits in its message's split; CONTROL payloads are \
decoded by field (TIMEOUT, CAPABILITIES, ERROR, STREAM_END_*, the four KEY_EXCHANGE steps). \
FIRST/SUBSEQUENT containers are reassembled by tid, and each completed message is shown as a \
command (type, name, data length, data), after decryption when --key is given.

Hex may be gapless or use spaces (quote the argument), ':' '-' ',' or '_' between bytes, and a \
0x prefix per group; case does not matter. '-' reads PDUs from stdin and --file from a file, one \
per line, '#' starting a comment. Arguments come first, then files, in the order given.

Direction. Without --direction, TIMEOUT and CAPABILITIES are classified by payload: an empty \
TIMEOUT is a request, any other is a response (needs timeout_ms); an empty or all-zero 6-byte \
CAPABILITIES is a request, any other is a response. The other controls mean the same in both \
directions. Session frames are tried with both nonce directions.

Messages. A message that parses as exactly one command is shown as one. Otherwise, if it is at \
least 20 bytes it is shown as a possibly encrypted session frame (counter, ciphertext length, \
tag) without --key, or is an error with --key when it does not authenticate. Shorter messages \
that do not parse are errors.

Exit status: 0 when everything decodes (warnings allowed), 1 when any PDU or message is \
malformed (or, with --strict, on any warning), 2 for usage or I/O errors. Decoding never stops \
at the first error: every PDU is decoded and every error reported, in the text output under its \
PDU and on stderr as `PDU n: field `f` at byte k ...`.";

/// `blerpc decode --help`, after the options: examples and the JSON schema.
pub const AFTER_LONG_HELP: &str = "\
Examples:
  blerpc decode 0000c4026400
  blerpc decode --mtu 23 2a000028000e00046563686f20000a1e42424242 \\
      2a01401042424242424242424242424242424242 2a02400a42424242424242424242
  blerpc decode --key 12e68d830b3802896b9f0948a4f5fe5a \\
      030000230023000000009cf7d7150c42a6bf48b246912998ab4473c7ea2df3ba26f3bc8c6fa37d7401
  blerpc decode --json --file capture.txt

JSON (--json) prints one document:
  {
    \"ok\": bool,                 false if errors (or warnings with --strict); exit code 1
    \"mtu\": 247,
    \"direction\": \"c2p\"|\"p2c\"|null,   null = inferred per PDU
    \"pdus\": [{
      \"index\": 0, \"source\": \"argument 1\", \"hex\": \"0000c4026400\", \"len\": 6,
      \"container\": {\"tid\", \"seq\",
                    \"type\": \"FIRST\"|\"LARGE_FIRST\"|\"SUBSEQUENT\"|\"CONTROL\"|\"UNKNOWN\",
                    \"flags\", \"control_cmd\"?, \"total_length\"?, \"payload_len\",
                    \"payload_hex\", \"trailing\"},
      \"split\": {\"container_len\", \"max_container_len\", \"long\"?, \"fits\", \"position\"?,
                \"containers\"?, \"expected_chunk\"?, \"received\"?, \"total_length\"?,
                \"sender_mtu_hint\"?},
      \"control\"?: {\"cmd\": \"TIMEOUT\", \"kind\": \"request\"|\"response\", \"direction\",
                   \"inferred\", \"timeout_ms\"?}
                | {\"cmd\": \"CAPABILITIES\", \"kind\", \"direction\", \"inferred\",
                   \"max_request\"?, \"max_response\"?, \"flags\"?, \"flag_names\": [..],
                   \"large_max_request\"?, \"large_max_response\"?}
                | {\"cmd\": \"ERROR\", \"code\", \"name\", \"description\", \"reference_code\"}
                | {\"cmd\": \"KEY_EXCHANGE\", \"step\", \"direction\", \"central_public\"?,
                   \"peripheral_public\"?, \"signature\"?, \"identity\"?, \"signature_valid\"?,
                   \"nonce\"?, \"ciphertext\"?, \"tag\"?, \"confirmation_valid\"?}
                | {\"cmd\": \"STREAM_END_C2P\"} | {\"cmd\": \"STREAM_END_P2C\"}
                | {\"cmd\": \"NONE\"|\"UNKNOWN\", \"cmd_value\", \"payload_hex\"},
      \"completes_message\"?: 0,    index into messages
      \"error\"?: <diagnostic>      the first error of this PDU
    }],
    \"messages\": [{
      \"tid\", \"pdus\": [0, 1, 2], \"length\", \"hex\",
      \"encryption\"?: {\"counter\", \"ciphertext_len\", \"tag\", \"decrypted\", \"direction\"?},
      \"command\"?: {\"type\": \"REQUEST\"|\"RESPONSE\", \"name\", \"data_len\", \"data_hex\"},
      \"note\"?: \"possibly encrypted: ...\"
    }],
    \"incomplete\": [{\"tid\", \"received\", \"total_length\", \"next_seq\", \"pdus\"}],
    \"errors\": [<diagnostic>], \"warnings\": [<diagnostic>]
  }
  <diagnostic> = {\"pdu\"?, \"tid\"?, \"message_index\"?,
                  \"layer\": \"hex\"|\"container\"|\"mtu\"|\"control\"|\"key_exchange\"|
                           \"assembly\"|\"session\"|\"command\",
                  \"field\"?, \"offset\"?, \"message\"}
  offset counts characters of the argument for layer hex, bytes of the reassembled (decrypted)
  message for session and command, and bytes of the PDU otherwise. Keys marked ? are omitted
  when they do not apply. Integers are decimal; byte strings are lowercase hex.";

/// Arguments of `blerpc decode`.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Captured PDUs, one per argument, in hex; `-` reads them from stdin, one per line.
    /// Required: at least one, unless --file gives them.
    #[arg(value_name = "HEX", required_unless_present = "file")]
    pub pdus: Vec<String>,
    /// Read PDUs from FILE, one per line (`#` starts a comment). Repeatable.
    #[arg(long, short = 'f', value_name = "FILE")]
    pub file: Vec<PathBuf>,
    /// ATT MTU of the link; each container must fit MTU - 3 bytes.
    #[arg(long, default_value_t = 247, value_parser = clap::value_parser!(u16).range(10..))]
    pub mtu: u16,
    /// Direction of every PDU (default: inferred per PDU, see above).
    #[arg(long, value_enum)]
    pub direction: Option<Dir>,
    /// 16-byte session key (hex) to decrypt session frames and check KEY_EXCHANGE confirmations.
    #[arg(long, value_name = "HEX", value_parser = parse_hex_array::<16>)]
    pub key: Option<[u8; 16]>,
    /// Print one JSON document (schema below) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Treat warnings (MTU overflow, trailing bytes, incomplete messages, ...) as errors.
    #[arg(long)]
    pub strict: bool,
    /// Print long command data in full instead of the first 64 bytes.
    #[arg(long)]
    pub full: bool,
}

/// Parses a fixed-length hex value (`--key`, 16 bytes) in any form [`parse_hex`] accepts.
pub fn parse_hex_array<const N: usize>(text: &str) -> Result<[u8; N], String> {
    let bytes = parse_hex(text).map_err(|e| e.to_string())?;
    <[u8; N]>::try_from(bytes.as_slice()).map_err(|_| {
        format!(
            "expected {N} bytes ({} hex digits), got {}",
            2 * N,
            bytes.len()
        )
    })
}

/// Collects the PDUs named by the arguments: positional ones (`-` expanding to stdin's lines),
/// then each `--file`.
pub fn gather_inputs(args: &DecodeArgs) -> anyhow::Result<Vec<PduInput>> {
    let mut inputs = Vec::new();
    for (i, text) in args.pdus.iter().enumerate() {
        if text == "-" {
            let mut content = String::new();
            std::io::stdin()
                .read_to_string(&mut content)
                .context("reading PDUs from stdin")?;
            inputs.extend(PduInput::lines("stdin", &content));
        } else {
            inputs.push(PduInput::arg(i + 1, text.clone()));
        }
    }
    for path in &args.file {
        let content = std::fs::read_to_string(path)
            .with_context(|| format!("reading PDUs from {}", path.display()))?;
        inputs.extend(PduInput::lines(&path.display().to_string(), &content));
    }
    if inputs.is_empty() {
        anyhow::bail!("no PDUs to decode (the input has no hex lines)");
    }
    Ok(inputs)
}

/// Writes to stdout; a closed pipe (`blerpc decode ... | head`) is not an error.
fn write_stdout(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

/// Runs `blerpc decode`: prints the report and returns the exit code (0 ok, 1 malformed input).
/// I/O and usage problems are returned as errors (the binary exits with 2).
pub fn run(args: &DecodeArgs) -> anyhow::Result<ExitCode> {
    let inputs = gather_inputs(args)?;
    let opts = Options {
        mtu: usize::from(args.mtu),
        direction: args.direction,
        key: args.key,
        strict: args.strict,
    };
    let report = dissect(&inputs, &opts);
    if args.json {
        let mut doc = serde_json::to_string_pretty(&report)?;
        doc.push('\n');
        write_stdout(&doc)?;
    } else {
        write_stdout(&text::render(&report, args.full))?;
        for e in &report.errors {
            eprintln!("blerpc: {e}");
        }
        if args.strict {
            for w in &report.warnings {
                eprintln!("blerpc: {w} (an error under --strict)");
            }
        }
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_length_is_checked() {
        assert_eq!(parse_hex_array::<2>("0102"), Ok([1, 2]));
        assert_eq!(parse_hex_array::<2>("01:02"), Ok([1, 2]));
        assert_eq!(
            parse_hex_array::<2>("010203"),
            Err("expected 2 bytes (4 hex digits), got 3".to_owned())
        );
        assert_eq!(
            parse_hex_array::<2>("01x2"),
            Err("invalid hex digit 'x' at char 2".to_owned())
        );
    }
}
