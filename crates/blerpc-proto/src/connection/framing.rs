//! Commands into the outbox: a command header and its data serialised once, straight into the
//! outbox entry, and sealed in place when a session is established.
//!
//! ```text
//! plaintext entry:  [type][name_len][name][data_len u16 | u32 large][data]
//! encrypted entry:  [counter u32 LE][ciphertext of the command above][tag 16 B]
//! ```

use super::outbox::{self, Outbox};
use crate::buf::Buffer;
use crate::crypto::Aead;
use crate::session::Session;
use crate::wire::command::CommandType;

/// The data of a command being queued.
pub(crate) enum Payload<'a, F: FnOnce(&mut [u8])> {
    /// Copied into the outbox as is.
    Bytes(&'a [u8]),
    /// `len` bytes written in place by `fill` (no intermediate copy of large responses).
    Fill { len: usize, fill: F },
}

/// A `Payload` of borrowed bytes (names the unused closure type).
pub(crate) fn bytes(data: &[u8]) -> Payload<'_, fn(&mut [u8])> {
    Payload::Bytes(data)
}

/// Serialises a command into a new outbox data entry, encrypting it in place when a session is
/// established.
#[allow(clippy::too_many_arguments)]
pub(crate) fn enqueue_command<B, A, F>(
    outbox: &mut Outbox<B>,
    session: Option<&mut Session<A>>,
    large: bool,
    tid: u8,
    kind: CommandType,
    name: &str,
    payload: Payload<'_, F>,
) -> Result<(), EnqueueError>
where
    B: Buffer,
    A: Aead,
    F: FnOnce(&mut [u8]),
{
    use crate::session::{COUNTER_LEN, SESSION_OVERHEAD};
    use crate::wire::command::{Command, MAX_NAME_LEN};
    const COUNTER_ROOM: [u8; COUNTER_LEN] = [0; COUNTER_LEN];
    const TAG_ROOM: [u8; SESSION_OVERHEAD - COUNTER_LEN] = [0; SESSION_OVERHEAD - COUNTER_LEN];
    let data_len = match &payload {
        Payload::Bytes(d) => d.len(),
        Payload::Fill { len, .. } => *len,
    };
    let header_len = if large {
        Command::header_len_large(name.len(), data_len)
    } else {
        Command::header_len(name.len())
    };
    let emit_header = |kind, name, len, out: &mut [u8]| {
        if large {
            Command::emit_header_large(kind, name, len, out)
        } else {
            Command::emit_header(kind, name, len, out)
        }
    };
    let cmd_len = header_len + data_len;
    let encrypted = session.is_some();
    let seal = |body: &mut [u8]| match session {
        Some(s) => s
            .seal_in_place(body)
            .map_err(|_| EnqueueError::CounterExhausted),
        None => Ok(()),
    };
    let result = match payload {
        Payload::Bytes(data) => {
            let mut header = [0u8; Command::header_len_large(MAX_NAME_LEN, usize::MAX)];
            let header = header.get_mut(..header_len).ok_or(EnqueueError::Invalid)?;
            emit_header(kind, name, data_len, header).map_err(|_| EnqueueError::Invalid)?;
            let parts: [&[u8]; 4] = if encrypted {
                [&COUNTER_ROOM, header, data, &TAG_ROOM]
            } else {
                [&[], header, data, &[]]
            };
            outbox.push_data_parts(tid, &parts, seal)
        }
        Payload::Fill { len, fill } => {
            let (pre, body_len) = if encrypted {
                (COUNTER_LEN, cmd_len + SESSION_OVERHEAD)
            } else {
                (0, cmd_len)
            };
            outbox.push_data_with(tid, body_len, |body| {
                let cmd = body
                    .get_mut(pre..pre + cmd_len)
                    .ok_or(EnqueueError::Internal)?;
                emit_header(kind, name, len, cmd).map_err(|_| EnqueueError::Invalid)?;
                if let Some(data) = cmd.get_mut(header_len..) {
                    fill(data);
                }
                seal(body)
            })
        }
    };
    result.map_err(|e| match e {
        outbox::PushError::Full(f) => EnqueueError::Full(f),
        outbox::PushError::Fill(e) => e,
    })
}

/// Queues a command that is already serialised (a stored request: header and data exactly as
/// [`enqueue_command`] would write them), encrypting it in place when a session is established:
/// one copy into the outbox, no parsing and no second header.
pub(crate) fn enqueue_framed<B, A>(
    outbox: &mut Outbox<B>,
    session: Option<&mut Session<A>>,
    tid: u8,
    command: &[&[u8]],
) -> Result<(), EnqueueError>
where
    B: Buffer,
    A: Aead,
{
    use crate::session::{COUNTER_LEN, SESSION_OVERHEAD};
    const COUNTER_ROOM: [u8; COUNTER_LEN] = [0; COUNTER_LEN];
    const TAG_ROOM: [u8; SESSION_OVERHEAD - COUNTER_LEN] = [0; SESSION_OVERHEAD - COUNTER_LEN];
    // Room around the command's parts (at most 4: a request with its deadline inserted).
    let (pre, post): (&[u8], &[u8]) = if session.is_some() {
        (&COUNTER_ROOM, &TAG_ROOM)
    } else {
        (&[], &[])
    };
    let mut slots: [&[u8]; 6] = [&[]; 6];
    let all = core::iter::once(pre)
        .chain(command.iter().copied())
        .chain(core::iter::once(post));
    for (slot, part) in slots.iter_mut().zip(all) {
        *slot = part;
    }
    let parts = slots
        .get(..command.len() + 2)
        .ok_or(EnqueueError::Internal)?;
    let seal = |body: &mut [u8]| match session {
        Some(s) => s
            .seal_in_place(body)
            .map_err(|_| EnqueueError::CounterExhausted),
        None => Ok(()),
    };
    outbox
        .push_data_parts(tid, parts, seal)
        .map_err(|e| match e {
            outbox::PushError::Full(f) => EnqueueError::Full(f),
            outbox::PushError::Fill(e) => e,
        })
}

/// Wire length of a command once (optionally) encrypted (with the large-message header when the
/// data exceeds 65,535 bytes).
pub(crate) fn wire_len(name_len: usize, data_len: usize, encrypted: bool) -> usize {
    let cmd = crate::wire::command::Command::header_len_large(name_len, data_len)
        .saturating_add(data_len);
    if encrypted {
        cmd.saturating_add(crate::session::SESSION_OVERHEAD)
    } else {
        cmd
    }
}

#[derive(Debug)]
pub(crate) enum EnqueueError {
    Full(outbox::Full),
    Invalid,
    CounterExhausted,
    Internal,
}
