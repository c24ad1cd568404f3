//! The harness application's bidirectional stream (the streams extension): `chat` echoes each
//! item the central sends as one item back, against the central's credits, and ends its half
//! once the central ended its own and every echo went out. With
//! [`AppConfig::hold_items`](super::AppConfig::hold_items) it consumes nothing until told
//! ([`Chat::release`]): the central's credits then run out.

use std::collections::VecDeque;

use blerpc_proto::Instant;
use blerpc_proto::connection::SendError;

use super::app::AppConfig;
use super::builder::TestPeripheral;

/// The command name of the harness's bidirectional stream.
pub const NAME: &str = "chat";

/// The open `chat` stream, if any.
#[derive(Debug, Default)]
pub(super) struct Chat {
    /// The stream's id (its open request's tid).
    stream: Option<u8>,
    /// Echoes waiting for the central's credit or outbox room.
    echoes: VecDeque<Vec<u8>>,
    /// Items received and not yet reported consumed.
    unconsumed: u32,
    /// The central ended its half.
    ended: bool,
    /// Items this side received in all.
    pub(super) received: usize,
}

impl Chat {
    pub(super) fn open(&mut self, tid: u8) {
        *self = Chat {
            stream: Some(tid),
            received: self.received,
            ..Chat::default()
        };
    }

    pub(super) fn item(&mut self, stream: u8, data: &[u8]) {
        assert_eq!(self.stream, Some(stream), "an item of a stream not open");
        self.echoes.push_back(data.to_vec());
        self.unconsumed += 1;
        self.received += 1;
    }

    pub(super) fn items_end(&mut self, stream: u8) {
        assert_eq!(self.stream, Some(stream), "the end of a stream not open");
        self.ended = true;
    }

    pub(super) fn cancelled(&mut self, tid: u8) {
        if self.stream == Some(tid) {
            *self = Chat {
                received: self.received,
                ..Chat::default()
            };
        }
    }

    /// Items received and not consumed yet.
    pub(super) fn unconsumed(&self) -> u32 {
        self.unconsumed
    }

    /// Consumes what arrived (unless the application holds items), then sends echoes while
    /// the central's credits and the outbox allow, and the end once all went.
    pub(super) fn pump(&mut self, app: &AppConfig, p: &mut TestPeripheral, now: Instant) {
        let Some(stream) = self.stream else {
            return;
        };
        if !app.hold_items && self.unconsumed > 0 {
            let consumed = p.consumed(stream, self.unconsumed);
            if consumed.is_ok() {
                self.unconsumed = 0;
            }
        }
        while let Some(echo) = self.echoes.front() {
            match p.send_stream_item(now, stream, NAME, echo) {
                Ok(()) => {
                    self.echoes.pop_front();
                }
                Err(SendError::NoCredit | SendError::OutboxFull { .. }) => return,
                Err(e) => {
                    assert!(!app.strict, "the chat could not echo: {e}");
                    return;
                }
            }
        }
        if self.ended && p.end_stream(now, stream).is_ok() {
            self.stream = None;
        }
    }
}
