//! The deadline extension on the central's side: what a request carries of its call's deadline.

use rand_core::CryptoRngCore;

use super::Central;
use super::calls::Call;
use super::config::CallKind;
use crate::Instant;
use crate::buf::Buffer;
use crate::crypto::CryptoProvider;
use crate::session::SESSION_OVERHEAD;
use crate::split::containers_with;
use crate::wire::command::{MAX_FIELDS_LEN, RequestFields};

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

    /// `fields` for a stored request command of `command_len` bytes, without the deadline when
    /// it alone would make a request that fits one container take two (at ATT MTU 247 an
    /// encrypted 200-byte `data_write`: one more packet on the air, for every such call). The
    /// peripheral then runs the request without a deadline of its own; the central still ends
    /// the call at its deadline, and tells a peripheral that agreed to the cancel extension.
    pub(super) fn fitted(&self, command_len: usize, fields: RequestFields) -> RequestFields {
        if fields.deadline_ms.is_none() {
            return fields;
        }
        let without = RequestFields {
            deadline_ms: None,
            ..fields
        };
        let sealed = if self.state.is_encrypted() {
            SESSION_OVERHEAD
        } else {
            0
        };
        let containers = |f: &RequestFields| {
            let len = command_len + f.emit(&mut [0; MAX_FIELDS_LEN]) + sealed;
            containers_with(len, self.config.att_mtu, self.ep.large, self.ep.long).ok()
        };
        match (containers(&without), containers(&fields)) {
            (Some(1), Some(n)) if n > 1 => without,
            _ => fields,
        }
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
        // [type 0x02][4]"echo"[300 ms, a varint: ac 02][data_len 4]0a026869
        assert_eq!(
            sent(&mut c),
            [request(2, b"\x02\x04echo\xac\x02\x04\x00\x0a\x02hi")]
        );
        // Without the caller's deadline, the call timeout's 5,000 ms (varint 88 27).
        c.start_call(T0, "echo", b"", CallKind::Unary).unwrap();
        assert_eq!(sent(&mut c), [request(3, b"\x02\x04echo\x88\x27\x00\x00")]);
        // A server stream carries only the caller's deadline; without one, nothing.
        c.start_call(T0, "counter_stream", b"\x08\x05", CallKind::ServerStream)
            .unwrap();
        let out = sent(&mut c);
        assert_eq!(out[0][6], 0x00, "no deadline: {out:02x?}");
    }

    #[test]
    fn a_deadline_never_makes_a_one_container_request_two() {
        // MTU 247, plaintext: a FIRST container carries 238 bytes of the command. echo with
        // n bytes of data is 8 + n bytes; 300 ms of deadline adds 2 (ac 02).
        let mut c = ready_with_deadline(true);
        let at = T0 + Duration::from_millis(300);
        let call = |c: &mut TestCentral, n: usize| {
            c.start_call_until(T0, "echo", &alloc::vec![0x55; n], CallKind::Unary, Some(at))
                .unwrap();
            sent(c)
        };
        // 228 bytes of data: 236 + 2 = 238, one container with the deadline.
        let out = call(&mut c, 228);
        assert_eq!(
            (out.len(), &out[0][..8]),
            (1, &[2, 0, 0, 238, 0, 238, 0x02, 4][..])
        );
        assert_eq!(&out[0][12..14], [0xac, 0x02]);
        // 230: 238 alone, 240 with it: sent without it, in one container, as classic.
        let out = call(&mut c, 230);
        assert_eq!(
            (out.len(), &out[0][..8]),
            (1, &[3, 0, 0, 238, 0, 238, 0x00, 4][..])
        );
        assert_eq!(&out[0][12..14], [230, 0], "data_len follows the name");
        // 240: two containers either way, so the deadline goes.
        let out = call(&mut c, 240);
        assert_eq!((out.len(), out[0][6]), (2, 0x02));
        assert_eq!(&out[0][12..14], [0xac, 0x02]);
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
        assert!((128..250).contains(&left), "{left}");
        let mut command = alloc::vec![0x02, 0x04];
        command.extend_from_slice(b"echo");
        // Two bytes of varint: the low 7 bits with the top bit set, then the rest.
        command.extend_from_slice(&[(left & 0x7f) as u8 | 0x80, (left >> 7) as u8]);
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
