//! The demo service's five commands, the same on every runtime: what each answers and when it
//! refuses, with the reference firmware's limits (`handlers.c`, `blerpc.options`).
//!
//! | command | answer | refused with |
//! |---|---|---|
//! | `echo` | the same message | `DECODE_FAILED` over `max_echo` bytes (the reference cannot decode it either) |
//! | `flash_read` | `length` bytes of flash at `address`, written straight into the reply | `HANDLER_FAILED` over `max_read` or outside the readable range |
//! | `data_write` | the number of bytes received | — |
//! | `counter_stream` | `count` items `{seq, seq × 10}` | `STREAM_LIMIT` over `max_stream_items` |
//! | `counter_upload` | `{received_count}` once the upload ends | — |
//!
//! [`DemoService`] holds no state between calls. Its callers carry the calls: the host
//! `blerpc::Server` (the `pb::Blerpc` handlers, feature `std`), and on a core `Peripheral` the
//! [`Responder`](crate::Responder) of the firmware and the simulator.

use core::fmt;

use blerpc_proto::wire::error_code::ErrorCode;

use crate::flash::{DemoFlash, Flash};
use crate::noalloc::codec::BytesField;
use crate::noalloc::{
    CounterStreamRequest, CounterStreamResponse, CounterUploadResponse, DataWriteRequest,
    DataWriteResponse, EchoRequest, EchoResponse, FlashReadRequest, FlashReadResponse,
};

/// The longest echo message a [`Responder`](crate::Responder) can hold between decoding a
/// request and answering it (the reference's nanopb `max_size: 257`, less its terminator);
/// [`DemoLimits::max_echo`] can only lower it.
pub const ECHO_CAPACITY: usize = 256;

/// Limits of the demo service. Defaults are the reference firmware's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DemoLimits {
    /// Longest echo message in bytes, at most [`ECHO_CAPACITY`]. Default 256.
    pub max_echo: usize,
    /// Longest flash read in bytes. Default 8,192.
    pub max_read: u32,
    /// Most items of one counter stream. Default 10,000.
    pub max_stream_items: u32,
}

impl DemoLimits {
    /// The reference firmware's limits.
    pub const REFERENCE: DemoLimits = DemoLimits {
        max_echo: 256,
        max_read: 8192,
        max_stream_items: 10_000,
    };
}

impl Default for DemoLimits {
    fn default() -> Self {
        DemoLimits::REFERENCE
    }
}

/// A request the service refuses: the ERROR code the central gets, and (for logs and host
/// errors) what was wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// An echo message over [`DemoLimits::max_echo`]: `DECODE_FAILED`.
    EchoTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A flash read over [`DemoLimits::max_read`]: `HANDLER_FAILED`.
    ReadTooLong {
        /// The length asked for.
        length: u32,
        /// The limit.
        max: u32,
    },
    /// A flash read outside the readable range: `HANDLER_FAILED`.
    OutsideReadable {
        /// The first address asked for.
        address: u32,
        /// The length asked for.
        length: u32,
        /// The readable range (start, end).
        readable: (u32, u32),
    },
    /// A counter stream over [`DemoLimits::max_stream_items`]: `STREAM_LIMIT`.
    TooManyItems {
        /// The count asked for.
        count: u32,
        /// The limit.
        max: u32,
    },
}

impl Refusal {
    /// The ERROR code that answers the request.
    pub fn code(&self) -> ErrorCode {
        match self {
            Refusal::EchoTooLong { .. } => ErrorCode::DecodeFailed,
            Refusal::ReadTooLong { .. } | Refusal::OutsideReadable { .. } => {
                ErrorCode::HandlerFailed
            }
            Refusal::TooManyItems { .. } => ErrorCode::StreamLimit,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::EchoTooLong { len, max } => {
                write!(f, "echo message of {len} bytes, at most {max}")
            }
            Refusal::ReadTooLong { length, max } => {
                write!(f, "read of {length} bytes, at most {max} per call")
            }
            Refusal::OutsideReadable {
                address,
                length,
                readable: (start, end),
            } => write!(
                f,
                "{address:#x}+{length} is outside the readable flash {start:#x}..{end:#x}"
            ),
            Refusal::TooManyItems { count, max } => {
                write!(f, "{count} items requested, at most {max}")
            }
        }
    }
}

/// The bytes of a `flash_read` reply, copied from flash into place when the reply is encoded
/// (no buffer in between).
#[derive(Clone, Copy, Debug)]
pub struct FlashBytes<'f, F> {
    flash: &'f DemoFlash<F>,
    address: u32,
    len: usize,
}

impl<F: Flash> BytesField for FlashBytes<'_, F> {
    fn field_len(&self) -> usize {
        self.len
    }
    fn write_to(&self, out: &mut [u8]) {
        // Checked by `DemoService::flash_read` before this value was made.
        if !self.flash.read(self.address, out) {
            out.fill(0);
        }
    }
}

/// The items of a counter stream, `{seq, seq × 10}` for `seq` in `0..count`.
#[derive(Clone, Debug)]
pub struct CounterItems {
    next: u32,
    count: u32,
}

impl CounterItems {
    /// The item after those already taken, if any.
    pub fn peek(&self) -> Option<CounterStreamResponse> {
        (self.next < self.count).then(|| CounterStreamResponse {
            seq: self.next,
            value: (self.next as i32).wrapping_mul(10),
        })
    }
}

impl Iterator for CounterItems {
    type Item = CounterStreamResponse;

    fn next(&mut self) -> Option<CounterStreamResponse> {
        let item = self.peek()?;
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.count - self.next) as usize;
        (n, Some(n))
    }
}

/// The demo service over a flash (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct DemoService<F> {
    flash: DemoFlash<F>,
    limits: DemoLimits,
}

impl<F: Flash> DemoService<F> {
    /// A service reading `flash` within `limits` (`max_echo` is capped at [`ECHO_CAPACITY`]).
    pub fn new(flash: DemoFlash<F>, mut limits: DemoLimits) -> Self {
        limits.max_echo = limits.max_echo.min(ECHO_CAPACITY);
        DemoService { flash, limits }
    }

    /// The limits in force.
    pub fn limits(&self) -> DemoLimits {
        self.limits
    }

    /// The flash `flash_read` reads.
    pub fn flash(&self) -> &DemoFlash<F> {
        &self.flash
    }

    /// `echo`: the same message.
    pub fn echo<'m>(&self, request: EchoRequest<'m>) -> Result<EchoResponse<'m>, Refusal> {
        let len = request.message.len();
        if len > self.limits.max_echo {
            return Err(Refusal::EchoTooLong {
                len,
                max: self.limits.max_echo,
            });
        }
        Ok(EchoResponse {
            message: request.message,
        })
    }

    /// `flash_read`: the reply, whose data is read from flash as it is encoded.
    pub fn flash_read(
        &self,
        request: FlashReadRequest,
    ) -> Result<FlashReadResponse<FlashBytes<'_, F>>, Refusal> {
        let FlashReadRequest { address, length } = request;
        if length > self.limits.max_read {
            return Err(Refusal::ReadTooLong {
                length,
                max: self.limits.max_read,
            });
        }
        if !self.flash.can_read(address, length) {
            let r = self.flash.readable();
            return Err(Refusal::OutsideReadable {
                address,
                length,
                readable: (r.start, r.end),
            });
        }
        Ok(FlashReadResponse {
            address,
            data: FlashBytes {
                flash: &self.flash,
                address,
                len: length as usize,
            },
        })
    }

    /// `data_write`: how many bytes arrived.
    pub fn data_write(&self, request: &DataWriteRequest<impl BytesField>) -> DataWriteResponse {
        DataWriteResponse {
            length: u32::try_from(request.data.field_len()).unwrap_or(u32::MAX),
        }
    }

    /// `counter_stream`: the items to send, then the stream's end.
    pub fn counter_stream(&self, request: CounterStreamRequest) -> Result<CounterItems, Refusal> {
        if request.count > self.limits.max_stream_items {
            return Err(Refusal::TooManyItems {
                count: request.count,
                max: self.limits.max_stream_items,
            });
        }
        Ok(CounterItems {
            next: 0,
            count: request.count,
        })
    }

    /// `counter_upload`: the reply once the upload of `received` items ended.
    pub fn counter_upload(&self, received: u32) -> CounterUploadResponse {
        CounterUploadResponse {
            received_count: received,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::flash::SliceFlash;
    use crate::flash::tests::IMAGE;

    fn service(limits: DemoLimits) -> DemoService<SliceFlash> {
        DemoService::new(
            DemoFlash::new(SliceFlash(&IMAGE), 0..48, 48..64).unwrap(),
            limits,
        )
    }

    #[test]
    fn answers_and_refusals_carry_the_reference_codes() {
        let s = service(DemoLimits {
            max_echo: 4,
            max_read: 16,
            max_stream_items: 3,
        });
        assert_eq!(
            s.echo(EchoRequest { message: "abcd" }).unwrap().message,
            "abcd"
        );
        let e = s.echo(EchoRequest { message: "abcde" }).unwrap_err();
        assert_eq!(e.code(), ErrorCode::DecodeFailed);
        let e = s
            .flash_read(FlashReadRequest {
                address: 0,
                length: 17,
            })
            .unwrap_err();
        assert_eq!(
            e,
            Refusal::ReadTooLong {
                length: 17,
                max: 16
            }
        );
        assert_eq!(e.code(), ErrorCode::HandlerFailed);
        let e = s
            .flash_read(FlashReadRequest {
                address: 40,
                length: 16,
            })
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::HandlerFailed);
        assert_eq!(
            std::format!("{e}"),
            "0x28+16 is outside the readable flash 0x0..0x30"
        );
        let e = s
            .counter_stream(CounterStreamRequest { count: 4 })
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::StreamLimit);
        assert_eq!(
            s.data_write(&DataWriteRequest {
                data: &[0u8; 9][..]
            })
            .length,
            9
        );
        assert_eq!(s.counter_upload(7).received_count, 7);
    }

    #[test]
    fn a_flash_read_is_written_in_place_as_the_reply_is_encoded() {
        let s = service(DemoLimits::REFERENCE);
        let reply = s
            .flash_read(FlashReadRequest {
                address: 16,
                length: 3,
            })
            .unwrap();
        let mut out = [0u8; 16];
        let n = reply.encode(&mut out).unwrap();
        assert_eq!(n, reply.encoded_len());
        // {address: 16, data: [16, 17, 18]}
        assert_eq!(&out[..n], b"\x08\x10\x12\x03\x10\x11\x12");
    }

    #[test]
    fn counter_items_are_seq_and_ten_times_seq() {
        let s = service(DemoLimits::REFERENCE);
        let items = s.counter_stream(CounterStreamRequest { count: 3 }).unwrap();
        assert_eq!(items.size_hint(), (3, Some(3)));
        let got: [(u32, i32); 3] = {
            let mut a = [(0, 0); 3];
            for (slot, item) in a.iter_mut().zip(items) {
                *slot = (item.seq, item.value);
            }
            a
        };
        assert_eq!(got, [(0, 0), (1, 10), (2, 20)]);
        assert!(
            s.counter_stream(CounterStreamRequest { count: 0 })
                .unwrap()
                .next()
                .is_none()
        );
    }
}
