//! The human-readable rendering of a [`Report`]: one block per PDU, headers aligned.
//!
//! ```text
//! #0  FIRST       tid=0x2a seq=0 total_length=40 payload_len=14  (MTU 23: fits, container 1 of 3)
//! #1  SUBSEQUENT  tid=0x2a seq=1 payload_len=16                  (MTU 23: fits, container 2 of 3, 30/40 bytes)
//! #2  SUBSEQUENT  tid=0x2a seq=2 payload_len=10                  (MTU 23: fits, container 3 of 3, 40/40 bytes)
//!     → reassembled 40 bytes from #0, #1, #2
//!     → REQUEST echo  data_len=32  data=0a1e4242…
//! ```

use std::fmt::Write as _;

use blerpc_proto::wire::container::{ContainerKind, ControlCmd};

use crate::report::{
    ControlBody, ControlKind, ControlReport, Diagnostic, KeyExchangeReport, MessageReport,
    PduReport, Report, SplitReport,
};

/// Data longer than this many bytes is cut in text output unless `full` is set.
const DATA_PREVIEW: usize = 64;
/// Headers are padded to the longest one, but not beyond this.
const MAX_HEAD_WIDTH: usize = 64;

/// Renders `report` as text. `full` prints long data in full instead of a preview.
pub fn render(report: &Report, full: bool) -> String {
    let heads: Vec<String> = report.pdus.iter().map(head).collect();
    let width = heads
        .iter()
        .map(|h| h.chars().count())
        .max()
        .unwrap_or(0)
        .min(MAX_HEAD_WIDTH);
    let mut out = String::new();
    for (pdu, head) in report.pdus.iter().zip(&heads) {
        match &pdu.split {
            Some(split) => {
                let pad = width.saturating_sub(head.chars().count());
                let _ = writeln!(
                    out,
                    "{head}{:pad$}  ({})",
                    "",
                    split_text(report.mtu, pdu, split)
                );
            }
            None => {
                let _ = writeln!(out, "{head}");
            }
        }
        if let Some(control) = &pdu.control {
            control_lines(&mut out, control);
        }
        diagnostics(&mut out, report, |d| d.pdu == Some(pdu.index));
        if let Some(m) = pdu
            .completes_message
            .and_then(|i| report.messages.get(i).map(|m| (i, m)))
        {
            message_lines(&mut out, m.1, full);
            diagnostics(&mut out, report, |d| d.message_index == Some(m.0));
        }
    }
    let global = |d: &Diagnostic| d.pdu.is_none() && d.message_index.is_none();
    if report.errors.iter().chain(&report.warnings).any(global) {
        out.push('\n');
        diagnostics(&mut out, report, global);
    }
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let _ = writeln!(
        out,
        "\n{}, {}, {}, {}",
        plural(report.pdus.len(), "PDU"),
        plural(report.messages.len(), "message"),
        plural(report.errors.len(), "error"),
        plural(report.warnings.len(), "warning"),
    );
    out
}

fn head(pdu: &PduReport) -> String {
    let Some(c) = &pdu.container else {
        return if pdu.hex.is_empty() {
            format!("#{:<3}NOT HEX", pdu.index)
        } else {
            format!(
                "#{:<3}{:<11} {} bytes: {}",
                pdu.index, "MALFORMED", pdu.len, pdu.hex
            )
        };
    };
    let mut fields = format!("tid={:#04x} seq={}", c.tid, c.seq);
    if let Some(cmd) = c.control_cmd {
        let _ = write!(fields, " cmd={cmd}");
    }
    if c.kind == ContainerKind::Unknown.as_str() {
        let _ = write!(fields, " flags={:#04x}", c.flags);
    }
    if let Some(total) = c.total_length {
        let _ = write!(fields, " total_length={total}");
    }
    let _ = write!(fields, " payload_len={}", c.payload_len);
    format!("#{:<3}{:<11} {fields}", pdu.index, c.kind)
}

fn split_text(mtu: usize, pdu: &PduReport, s: &SplitReport) -> String {
    let limit = if s.long {
        "LONG container".to_owned()
    } else {
        format!("MTU {mtu}")
    };
    let mut t = if s.fits {
        format!("{limit}: fits")
    } else {
        format!(
            "{limit}: {} bytes > {} allowed",
            s.container_len, s.max_container_len
        )
    };
    match (s.position, s.containers) {
        (Some(1), Some(1)) => t.push_str(", 1 container"),
        (Some(p), Some(n)) if p <= n => {
            let _ = write!(t, ", container {p} of {n}");
        }
        (Some(p), _) => {
            let _ = write!(t, ", container {p}");
        }
        _ => {}
    }
    if let (Some(received), Some(total)) = (s.received, s.total_length)
        && s.containers != Some(1)
    {
        let _ = write!(t, ", {received}/{total} bytes");
    }
    if let (Some(expected), Some(c)) = (s.expected_chunk, &pdu.container)
        && expected != c.payload_len
        && pdu.error.is_none()
    {
        let _ = write!(
            t,
            "; chunk {} where a splitter at MTU {mtu} sends {expected}",
            c.payload_len
        );
        if let Some(hint) = s.sender_mtu_hint {
            let _ = write!(t, " (sender MTU {hint}?)");
        }
    }
    t
}

fn dir_text(direction: impl std::fmt::Display, inferred: bool) -> String {
    if inferred {
        format!("{direction}, inferred")
    } else {
        direction.to_string()
    }
}

fn control_lines(out: &mut String, control: &ControlReport) {
    let cmd = control.cmd.as_str();
    let _ = match &control.body {
        ControlBody::Timeout {
            kind,
            direction,
            inferred,
            timeout_ms,
        } => {
            let value = match kind {
                ControlKind::Request => String::new(),
                ControlKind::Response => {
                    format!(": timeout_ms={}", timeout_ms.unwrap_or_default())
                }
            };
            writeln!(
                out,
                "    {cmd} {} ({}){value}",
                kind.as_str(),
                dir_text(direction, *inferred)
            )
        }
        ControlBody::StreamEnd => {
            let who = if control.cmd == ControlCmd::StreamEndC2P {
                "central"
            } else {
                "peripheral"
            };
            writeln!(out, "    {cmd}: the {who} ended its stream")
        }
        ControlBody::Capabilities {
            kind,
            direction,
            inferred,
            max_request,
            max_response,
            flags,
            flag_names,
            large_max_request,
            large_max_response,
        } => {
            let body = match (max_request, max_response, flags) {
                (Some(req), Some(resp), Some(flags)) => format!(
                    "max_request={req} max_response={resp} flags={flags:#06x}{}",
                    if flag_names.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", flag_names.join(", "))
                    }
                ),
                _ => "empty (the C central's form)".to_owned(),
            };
            let large = match (large_max_request, large_max_response) {
                (Some(req), Some(resp)) => {
                    format!("; large messages: max_request={req} max_response={resp}")
                }
                _ => String::new(),
            };
            writeln!(
                out,
                "    {cmd} {} ({}): {body}{large}",
                kind.as_str(),
                dir_text(direction, *inferred)
            )
        }
        ControlBody::Error {
            code,
            name,
            description,
            reference_code,
        } => writeln!(
            out,
            "    {cmd} code={code:#04x} {name}: {description} ({})",
            if *reference_code {
                "reference code"
            } else {
                "blerpc-rs code; reference centrals report a generic peripheral error"
            }
        ),
        ControlBody::KeyExchange(kx) => {
            kx_lines(out, cmd, kx);
            Ok(())
        }
        ControlBody::Cancel { request_tid } => writeln!(
            out,
            "    {cmd}: the central no longer wants request tid={request_tid} (blerpc-rs extension)"
        ),
        ControlBody::Credit { stream, credits } => writeln!(
            out,
            "    {cmd}: {credits} more items of stream {stream} (blerpc-rs extension)"
        ),
        ControlBody::Unknown {
            cmd_value,
            payload_hex,
        } => writeln!(
            out,
            "    unassigned control cmd {cmd_value:#x}, payload={}",
            if payload_hex.is_empty() {
                "(empty)"
            } else {
                payload_hex
            }
        ),
    };
}

fn kx_lines(out: &mut String, cmd: &str, kx: &KeyExchangeReport) {
    let _ = writeln!(out, "    {cmd} step {} ({})", kx.step, kx.direction);
    let verdict = |v: Option<bool>, what: &str| match v {
        Some(true) => format!("  ({what}: valid)"),
        Some(false) => format!("  ({what}: INVALID)"),
        None => String::new(),
    };
    let fields = [
        ("central_public", &kx.central_public, String::new()),
        ("peripheral_public", &kx.peripheral_public, String::new()),
        (
            "signature",
            &kx.signature,
            verdict(kx.signature_valid, "over step 1 key"),
        ),
        ("identity", &kx.identity, String::new()),
        ("nonce", &kx.nonce, String::new()),
        ("ciphertext", &kx.ciphertext, String::new()),
        (
            "tag",
            &kx.tag,
            verdict(kx.confirmation_valid, "confirmation with --key"),
        ),
    ];
    for (name, value, note) in fields {
        if let Some(value) = value {
            let _ = writeln!(out, "      {name:<18} {value}{note}");
        }
    }
}

fn preview(hex: &str, full: bool) -> String {
    if full || hex.len() <= 2 * DATA_PREVIEW {
        hex.to_owned()
    } else {
        let cut = hex.get(..2 * DATA_PREVIEW).unwrap_or(hex);
        format!("{cut}…(+{} bytes)", (hex.len() - cut.len()) / 2)
    }
}

fn message_lines(out: &mut String, m: &MessageReport, full: bool) {
    if m.pdus.len() > 1 {
        let from: Vec<String> = m.pdus.iter().map(|i| format!("#{i}")).collect();
        let _ = writeln!(
            out,
            "    → reassembled {} bytes from {}",
            m.length,
            from.join(", ")
        );
    }
    if let Some(e) = &m.encryption
        && e.decrypted
    {
        let dir = e.direction.map(|d| format!(" ({d})")).unwrap_or_default();
        let _ = writeln!(
            out,
            "    → session frame{dir}: counter={} ciphertext_len={} tag={}, decrypted with --key",
            e.counter, e.ciphertext_len, e.tag
        );
    }
    if let Some(c) = &m.command {
        let data = if c.data_len == 0 {
            "(empty)".to_owned()
        } else {
            preview(&c.data_hex, full)
        };
        let mut deadline = c
            .deadline_ms
            .map_or(String::new(), |ms| format!("  deadline={ms}ms"));
        if let Some(window) = c.window {
            let kind = if c.bidi { "bidi" } else { "stream" };
            deadline.push_str(&format!("  open={kind} window={window}"));
        }
        if let Some(stream) = c.stream {
            deadline.push_str(&format!("  item_of={stream}"));
        }
        let _ = writeln!(
            out,
            "    → {} {}  data_len={}  data={data}{deadline}",
            c.kind, c.name, c.data_len
        );
    }
    if let Some(note) = &m.note {
        let _ = writeln!(out, "    → {note}");
    }
    if m.command.is_none() && m.note.is_none() {
        let _ = writeln!(
            out,
            "    → message tid={:#04x}: {}",
            m.tid,
            preview(&m.hex, full)
        );
    }
}

fn diagnostics(out: &mut String, report: &Report, pick: impl Fn(&Diagnostic) -> bool) {
    for d in report.errors.iter().filter(|d| pick(d)) {
        let _ = writeln!(out, "    error: {}", scoped(d));
    }
    for d in report.warnings.iter().filter(|d| pick(d)) {
        let _ = writeln!(out, "    warning: {}", scoped(d));
    }
}

/// The message, prefixed with the transaction when it is not about a single PDU.
fn scoped(d: &Diagnostic) -> String {
    match (d.pdu, d.tid) {
        (None, Some(tid)) => format!("tid {tid:#04x}: {}", d.message),
        _ => d.message.clone(),
    }
}
