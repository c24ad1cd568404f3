//! Diagnostics and the fixed-capacity queue events wait in.

use crate::assemble::AssembleError;
use crate::session::SessionError;
use crate::wire::WireError;
use crate::wire::error_code::ErrorCode;

/// Something the connection dropped or ignored. Warnings never change the connection's state;
/// they exist for traces (`--verbose`) and tests. They are best-effort: when the event queue is
/// nearly full they are counted in `dropped_warnings` instead of queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A PDU that is not a valid container.
    MalformedContainer(WireError),
    /// A container of the undefined type `0b10`; ignored.
    UnknownContainerType {
        /// Its transaction id.
        tid: u8,
    },
    /// A control container whose command is unknown (0x0, 0x7 or 0x9–0xF); ignored.
    UnknownControl {
        /// Its transaction id.
        tid: u8,
        /// The 4-bit command.
        cmd: u8,
    },
    /// A control message valid on the wire but unexpected now (e.g. a TIMEOUT reply with no
    /// outstanding request); ignored.
    UnexpectedControl {
        /// Its transaction id.
        tid: u8,
        /// The 4-bit command.
        cmd: u8,
    },
    /// A control payload that does not parse.
    MalformedControl(WireError),
    /// Reassembly failed; the transaction was dropped.
    Assembly(AssembleError),
    /// A reassembled message failed to decrypt or was replayed; dropped.
    Decrypt(SessionError),
    /// A plaintext message arrived while encryption is required; dropped.
    PlaintextRejected {
        /// Its transaction id.
        tid: u8,
    },
    /// A reassembled message is not a valid command packet.
    MalformedCommand(WireError),
    /// A response (or ERROR) that matches no outstanding call, such as a late answer to a call
    /// that timed out; dropped.
    StaleResponse {
        /// Its transaction id.
        tid: u8,
    },
    /// An ERROR control that matches no outstanding call.
    StaleError {
        /// Its transaction id.
        tid: u8,
        /// The code it carried.
        code: ErrorCode,
    },
    /// A message of the wrong command type (a RESPONSE sent to a peripheral, a REQUEST to a
    /// central); dropped.
    WrongCommandType {
        /// Its transaction id.
        tid: u8,
    },
    /// A partially reassembled transaction was idle longer than the reassembly timeout.
    ReassemblyTimeout {
        /// Its transaction id.
        tid: u8,
    },
    /// The application did not poll events fast enough; a request was refused with BUSY.
    EventQueueFull,
    /// A FIRST container would have taken the partial requests' announced lengths past the
    /// reassembly budget; the request was refused with BUSY before any byte was buffered.
    ReassemblyBudget {
        /// Its transaction id.
        tid: u8,
        /// What the partial requests claimed already.
        claimed: usize,
        /// What this one announced.
        requested: usize,
    },
    /// A stream item or control for a stream that is not open (ended, cancelled, or never
    /// opened: the streams extension); dropped.
    UnknownStream {
        /// The container's transaction id.
        tid: u8,
        /// The stream it named.
        stream: u8,
    },
    /// The peer sent a stream item beyond the credits it was granted (the streams extension);
    /// the stream was ended with an error.
    CreditExceeded {
        /// The stream's id.
        stream: u8,
    },
}

/// A FIFO of `N` `Copy` items that never allocates.
#[derive(Debug)]
pub(crate) struct Ring<T: Copy, const N: usize> {
    items: [Option<T>; N],
    head: usize,
    len: usize,
}

impl<T: Copy, const N: usize> Ring<T, N> {
    pub(crate) const fn new() -> Self {
        Ring {
            items: [None; N],
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn free(&self) -> usize {
        N - self.len
    }

    pub(crate) fn push(&mut self, item: T) -> Result<(), T> {
        if self.len == N || N == 0 {
            return Err(item);
        }
        let idx = (self.head + self.len) % N;
        if let Some(slot) = self.items.get_mut(idx) {
            *slot = Some(item);
            self.len += 1;
            Ok(())
        } else {
            Err(item)
        }
    }

    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.items.get_mut(self.head).and_then(Option::take);
        self.head = (self.head + 1) % N;
        self.len -= 1;
        item
    }

    pub(crate) fn clear(&mut self) {
        while self.pop().is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_is_fifo_and_bounded() {
        let mut r: Ring<u8, 3> = Ring::new();
        assert_eq!(r.push(1), Ok(()));
        assert_eq!(r.push(2), Ok(()));
        assert_eq!(r.push(3), Ok(()));
        assert_eq!(r.push(4), Err(4));
        assert_eq!(r.pop(), Some(1));
        assert_eq!(r.push(5), Ok(()));
        assert_eq!(
            (r.pop(), r.pop(), r.pop(), r.pop()),
            (Some(2), Some(3), Some(5), None)
        );
        assert_eq!(r.free(), 3);
    }
}
