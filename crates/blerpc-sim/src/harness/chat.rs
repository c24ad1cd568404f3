//! The harness application's bidirectional stream (the streams extension): the demo's `chat`
//! ([`ChatEcho`]: each item echoed as one item back, against the central's credits, the end
//! once the central ended its half and every echo went), with fixed buffers as the firmware
//! serves it. With [`AppConfig::hold_items`](super::AppConfig::hold_items) it consumes nothing:
//! the central's credits then run out.

use blerpc_demo::chat::ChatEcho;

/// The command name of the harness's bidirectional stream.
pub const NAME: &str = blerpc_demo::chat::CHAT;

/// Items the harness's `chat` holds at most: its peripheral's `stream_window` must not be
/// larger (a larger window ends the stream with STREAM_LIMIT once more are held).
pub const HELD: usize = 8;

/// The longest item the harness's `chat` echoes.
pub const ITEM_LEN: usize = 512;

/// The harness's `chat`.
pub(super) type Chat = ChatEcho<HELD, ITEM_LEN>;
