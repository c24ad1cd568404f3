//! The deadline extension on the central's side: what a request carries of its call's deadline.

use rand_core::CryptoRngCore;

use super::Central;
use super::calls::Call;
use super::config::CallKind;
use crate::Instant;
use crate::buf::Buffer;
use crate::crypto::CryptoProvider;

impl<P, R, A, O, const SLOTS: usize> Central<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    /// The deadline call `call`'s request carries when sent at `now` (the deadline extension in
    /// force): the milliseconds left until the call's own deadline, rounded up (a unary call's:
    /// the caller's, else the call timeout; a server stream's: the caller's, if any), 0 once
    /// passed. `None` without the extension, for a stream without a caller's deadline, and for
    /// an upload (its items are not requests a handler waits on).
    pub(super) fn wire_deadline(&self, call: &Call<O>, now: Instant) -> Option<u32> {
        if !self.deadline {
            return None;
        }
        let until = match call.kind {
            CallKind::Unary => call.deadline,
            CallKind::ServerStream | CallKind::BidiStream => call.cap(),
            _ => None,
        }?;
        // Rounded up: the peripheral's deadline (its arrival plus this) is never before ours.
        let left = until
            .saturating_duration_since(now)
            .as_micros()
            .div_ceil(1000);
        Some(u32::try_from(left).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use alloc::vec::Vec;
    use core::time::Duration;

    use super::super::CentralEvent;
    use super::super::tests::{T0, TestCentral, sent};
    use super::*;
    use crate::connection::CallError;

    /// A plaintext central through setup with the deadline extension announced (CAPABILITIES
    /// flags `0x0020`) and agreed by the peripheral when `agreed`.
    fn ready_with_deadline(agreed: bool) -> TestCentral {
        super::super::tests::ready_announcing(0x20, agreed, |c| c.deadline = true)
    }

    /// The FIRST container of a one-container request under `tid`: `[tid][0][FIRST 0x00]
    /// [total_len u16][payload_len]` and the command.
    fn request(tid: u8, command: &[u8]) -> Vec<u8> {
        let len = command.len() as u8;
        let mut pdu = alloc::vec![tid, 0x00, 0x00, len, 0x00, len];
        pdu.extend_from_slice(command);
        pdu
    }

    #[test]
    fn a_call_carries_the_time_left_after_its_name() {
        let mut c = ready_with_deadline(true);
        let at = T0 + Duration::from_millis(300);
        c.start_call_until(T0, "echo", b"\x0a\x02hi", CallKind::Unary, Some(at))
            .unwrap();
        // [type 0x02][4]"echo"[300 ms: 2c 01 00 00][data_len 4]0a026869
        assert_eq!(
            sent(&mut c),
            [request(
                2,
                b"\x02\x04echo\x2c\x01\x00\x00\x04\x00\x0a\x02hi"
            )]
        );
        // Without the caller's deadline, the call timeout's 5,000 ms (0x1388).
        c.start_call(T0, "echo", b"", CallKind::Unary).unwrap();
        assert_eq!(
            sent(&mut c),
            [request(3, b"\x02\x04echo\x88\x13\x00\x00\x00\x00")]
        );
        // A server stream carries only the caller's deadline; without one, nothing.
        c.start_call(T0, "counter_stream", b"\x08\x05", CallKind::ServerStream)
            .unwrap();
        let out = sent(&mut c);
        assert_eq!(out[0][6], 0x00, "no deadline: {out:02x?}");
    }

    #[test]
    fn a_busy_retry_carries_the_time_left_then() {
        let mut c = ready_with_deadline(true);
        let at = T0 + Duration::from_millis(300);
        c.start_call_until(T0, "echo", b"", CallKind::Unary, Some(at))
            .unwrap();
        sent(&mut c);
        // ERROR BUSY for tid 2 at 50 ms: `[02][00][0xd4][01][02]`.
        let busy_at = T0 + Duration::from_millis(50);
        c.handle_input(busy_at, &[0x02, 0x00, 0xd4, 0x01, 0x02])
            .unwrap();
        let retry = c.poll_timeout().unwrap();
        c.handle_timeout(retry);
        let left = (at - retry).as_micros().div_ceil(1000) as u32;
        assert!(left < 250, "{left}");
        let mut command = alloc::vec![0x02, 0x04];
        command.extend_from_slice(b"echo");
        command.extend_from_slice(&left.to_le_bytes());
        command.extend_from_slice(&[0x00, 0x00]);
        assert_eq!(sent(&mut c), [request(3, &command)]);
    }

    #[test]
    fn without_the_peripherals_agreement_the_request_is_the_reference_one() {
        let mut c = ready_with_deadline(false);
        let at = T0 + Duration::from_millis(300);
        c.start_call_until(T0, "echo", b"\x0a\x02hi", CallKind::Unary, Some(at))
            .unwrap();
        assert_eq!(
            sent(&mut c),
            [request(2, b"\x00\x04echo\x04\x00\x0a\x02hi")]
        );
    }

    #[test]
    fn the_peripherals_deadline_error_fails_the_call_as_a_timeout() {
        let mut c = ready_with_deadline(true);
        let at = T0 + Duration::from_millis(300);
        let id = c
            .start_call_until(T0, "echo", b"", CallKind::Unary, Some(at))
            .unwrap();
        sent(&mut c);
        // ERROR DEADLINE_EXCEEDED (0x0d) for tid 2, just before this side's own timer.
        c.handle_input(
            T0 + Duration::from_micros(299_700),
            &[0x02, 0x00, 0xd4, 0x01, 0x0d],
        )
        .unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::CallFailed {
                call: id,
                error: CallError::Timeout
            })
        );
        // Once forgotten, a late one is not a warning.
        c.handle_input(at, &[0x02, 0x00, 0xd4, 0x01, 0x0d]).unwrap();
        assert_eq!(c.poll_event(), None);
    }
}
