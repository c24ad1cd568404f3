//! The dissector's last stage: a reassembled message, decrypted with the session key when it can
//! be (the core's [`Session`]), checked for replays, and parsed as a [`Command`].

use blerpc_proto::Role;
use blerpc_proto::crypto::{CryptoProvider, RustCrypto, SessionKey, TAG_LEN};
use blerpc_proto::session::{COUNTER_LEN, SESSION_OVERHEAD, Session};
use blerpc_proto::wire::WireError;
use blerpc_proto::wire::command::{
    Command, CommandType, Extended, LARGE_DATA_FLAG, REQUEST_FLAGS, RequestFields,
};

use crate::dissect::{At, Dissector, diag, wire_diag};
use crate::report::{CommandReport, Dir, EncryptionReport, Layer, MessageReport};

impl Dissector<'_> {
    /// Records the message reassembled from `pdus` (completed by PDU `completed_by`).
    pub(crate) fn message(&mut self, tid: u8, pdus: Vec<usize>, completed_by: usize, msg: &[u8]) {
        let index = self.report.messages.len();
        if let Some(p) = self.report.pdus.get_mut(completed_by) {
            p.completes_message = Some(index);
        }
        let at = At {
            pdu: None,
            tid: Some(tid),
            message: Some(index),
        };
        let mut m = MessageReport {
            tid,
            pdus,
            length: msg.len(),
            hex: hex::encode(msg),
            encryption: None,
            command: None,
            note: None,
        };
        if msg.is_empty() {
            m.note = Some("empty message (total_length 0): no command".to_owned());
            self.report.messages.push(m);
            return;
        }
        let frame = frame_view(msg);
        if let (Some(key), Some((counter, ciphertext_len, tag))) = (self.opts.key, &frame) {
            let dirs = match self.opts.direction {
                Some(d) => vec![d],
                None => vec![Dir::C2p, Dir::P2c],
            };
            for dir in dirs {
                let Some(plain) = open_frame(&key, dir, msg) else {
                    continue;
                };
                m.encryption = Some(EncryptionReport {
                    counter: *counter,
                    ciphertext_len: *ciphertext_len,
                    tag: tag.clone(),
                    decrypted: true,
                    direction: Some(dir),
                });
                self.check_replay(at, dir, *counter);
                self.plain_command(at, &mut m, &plain, Some(dir), " of the decrypted message");
                self.report.messages.push(m);
                return;
            }
        }
        let exact = parse_command(msg)
            .ok()
            .filter(|e| e.header_len + e.command.data.len() == msg.len());
        match (exact, &frame) {
            (Some(_), _) => {
                if self.opts.key.is_some() && frame.is_some() {
                    m.note =
                        Some("plaintext command (does not authenticate with --key)".to_owned());
                }
                self.plain_command(at, &mut m, msg, self.opts.direction, " of the message");
            }
            (None, Some((counter, ciphertext_len, tag))) => {
                m.encryption = Some(EncryptionReport {
                    counter: *counter,
                    ciphertext_len: *ciphertext_len,
                    tag: tag.clone(),
                    decrypted: false,
                    direction: None,
                });
                if self.opts.key.is_some() {
                    let tried = match self.opts.direction {
                        Some(d) => d.to_string(),
                        None => "C→P or P→C".to_owned(),
                    };
                    self.error(diag(
                        at,
                        Layer::Session,
                        Some("tag"),
                        Some(msg.len() - TAG_LEN),
                        format!(
                            "message is neither a plaintext command nor a session frame that authenticates with --key as {tried} (counter={counter}, tag at byte {})",
                            msg.len() - TAG_LEN
                        ),
                    ));
                } else {
                    m.note = Some(format!(
                        "possibly encrypted: counter={counter}, ciphertext_len={ciphertext_len}, tag={tag}; pass --key to decrypt"
                    ));
                }
            }
            (None, None) => {
                self.plain_command(at, &mut m, msg, self.opts.direction, " of the message");
            }
        }
        self.report.messages.push(m);
    }

    /// Parses `plain` as the message's command (trailing bytes are a warning, failure an error).
    fn plain_command(
        &mut self,
        at: At,
        m: &mut MessageReport,
        plain: &[u8],
        dir: Option<Dir>,
        unit: &str,
    ) {
        match parse_command(plain) {
            Ok(extended) => {
                let cmd = extended.command;
                let used = extended.header_len + cmd.data.len();
                if plain.len() > used {
                    self.warn(diag(
                        at,
                        Layer::Command,
                        Some("data"),
                        Some(used),
                        format!(
                            "{} bytes after the command's data{unit} (ignored)",
                            plain.len() - used
                        ),
                    ));
                }
                if let Some(dir) = dir
                    && dir != command_dir(&cmd)
                {
                    let kind = command_report(&cmd).kind;
                    self.warn(diag(
                        at,
                        Layer::Command,
                        Some("type"),
                        Some(0),
                        format!("a {kind} travelling {dir}"),
                    ));
                }
                let mut report = command_report(&cmd);
                report.deadline_ms = extended.fields.deadline_ms;
                report.window = extended.fields.open.map(|o| o.window);
                report.bidi = extended.fields.open.is_some_and(|o| o.bidi);
                report.stream = extended.fields.item_of;
                m.command = Some(report);
            }
            Err(e) => {
                let d = wire_diag(at, Layer::Command, &e, 0, unit);
                self.error(d);
            }
        }
    }

    fn check_replay(&mut self, at: At, dir: Dir, counter: u32) {
        let last = self.last_counter.get(dir.index()).copied().flatten();
        if let Some(last) = last
            && counter <= last
        {
            self.warn(diag(
                at,
                Layer::Session,
                Some("counter"),
                Some(0),
                format!(
                    "counter {counter} is not above the previous {last} ({dir}): a receiver rejects it as a replay"
                ),
            ));
        }
        if let Some(slot) = self.last_counter.get_mut(dir.index()) {
            *slot = Some(last.map_or(counter, |l| l.max(counter)));
        }
    }
}

/// Decrypts a session frame `counter ‖ ciphertext ‖ tag` sent in `dir`, with the core's session.
fn open_frame(key: &[u8; 16], dir: Dir, frame: &[u8]) -> Option<Vec<u8>> {
    let aead = RustCrypto.aead(&SessionKey::from_bytes(*key)).ok()?;
    // The receiving role of a frame sent in `dir`.
    let role = match dir {
        Dir::C2p => Role::Peripheral,
        Dir::P2c => Role::Central,
    };
    let mut session = Session::new(aead, role);
    let mut buf = frame.to_vec();
    let range = session.open_in_place(&mut buf).ok()?;
    buf.get(range).map(<[u8]>::to_vec)
}

/// The unauthenticated view of a session frame: counter, ciphertext length and tag.
fn frame_view(msg: &[u8]) -> Option<(u32, usize, String)> {
    if msg.len() < SESSION_OVERHEAD {
        return None;
    }
    let counter = u32::from_le_bytes(msg.get(..COUNTER_LEN)?.try_into().ok()?);
    let tag = msg.get(msg.len() - TAG_LEN..)?;
    Some((counter, msg.len() - SESSION_OVERHEAD, hex::encode(tag)))
}

fn command_report(cmd: &Command<'_>) -> CommandReport {
    CommandReport {
        kind: cmd.kind.as_str(),
        name: cmd.name.to_owned(),
        data_len: cmd.data.len(),
        data_hex: hex::encode(cmd.data),
        deadline_ms: None,
        window: None,
        bidi: false,
        stream: None,
    }
}

fn command_dir(cmd: &Command<'_>) -> Dir {
    match cmd.kind {
        CommandType::Request => Dir::C2p,
        CommandType::Response => Dir::P2c,
    }
}

/// A command: a request carrying extension fields (its deadline, a stream's window or id: the
/// deadline and streams extensions) when that parses to exactly the bytes given; else in its large-message form (type bit 0, `u32`
/// data_len) when that parses; else classic (reserved type bits ignored, as the reference
/// does).
fn parse_command(bytes: &[u8]) -> Result<Extended<'_>, WireError> {
    let type_byte = bytes.first().copied().unwrap_or(0);
    if type_byte & 0x80 == 0
        && type_byte & REQUEST_FLAGS != 0
        && let Ok(e) = Command::parse_extended(bytes, true, REQUEST_FLAGS)
        && e.header_len + e.command.data.len() == bytes.len()
    {
        return Ok(e);
    }
    let large = type_byte & LARGE_DATA_FLAG != 0;
    let command = match Command::parse_large(bytes) {
        Ok(cmd) if large => cmd,
        _ => Command::parse(bytes)?,
    };
    Ok(Extended {
        command,
        fields: RequestFields::NONE,
        header_len: Command::header_len_large(command.name.len(), command.data.len()),
    })
}
