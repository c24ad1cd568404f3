//! The reference functional tests (`benchmarks.md` §1, `central_py/tests/test_integration.py`),
//! with the reference's exact parameters: one table ([`CASES`]) and the checks of what comes
//! back, `no_std`, so every runner uses the same list:
//!
//! | runner | over |
//! |---|---|
//! | [`run_all`] / [`run_one`] (feature `std`) | any connected `blerpc::Client` (`blerpc demo`, the benchmarks, the Bumble run, the simulator's tests) |
//! | the firmware's QEMU image (`firmware/qemu-test`, `session.rs`) | the core's `Central` against the firmware's connection, in memory on a Cortex-M33 |
//!
//! The refusals of the demo service's limits are a second table ([`REFUSALS`]).

#[cfg(feature = "std")]
mod run;

#[cfg(feature = "std")]
pub use run::{TestResult, run_all, run_one};

use core::fmt;

use blerpc_proto::wire::error_code::ErrorCode;

/// The request of one test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `echo` of this message.
    Echo(&'static str),
    /// `flash_read` of `length` bytes at `address`.
    FlashRead {
        /// The first address.
        address: u32,
        /// How many bytes.
        length: u32,
    },
    /// `data_write` of `len` bytes of [`data_byte`].
    DataWrite {
        /// How many bytes.
        len: usize,
    },
    /// `counter_stream` of `count` items.
    CounterStream {
        /// Items asked for.
        count: u32,
    },
    /// `counter_upload` of `count` items ([`counter_item`]).
    CounterUpload {
        /// Items sent.
        count: u32,
    },
}

/// One functional test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    /// The reference's test name.
    pub name: &'static str,
    /// What it sends.
    pub call: Call,
}

const fn text<const N: usize>(bytes: &'static [u8; N]) -> &'static str {
    match core::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(_) => panic!("not UTF-8"),
    }
}

/// The 256-byte echo (`"A" * 256`).
const A_256: &str = text(&[b'A'; 256]);
/// The echo that spans several containers (`"B" * 250`).
const B_250: &str = text(&[b'B'; 250]);

/// The twelve tests, in the reference's order.
pub const CASES: [Case; 12] = [
    Case {
        name: "echo_basic",
        call: Call::Echo("hello"),
    },
    Case {
        name: "echo_empty",
        call: Call::Echo(""),
    },
    Case {
        name: "echo_max_length",
        call: Call::Echo(A_256),
    },
    Case {
        name: "multi_container_echo",
        call: Call::Echo(B_250),
    },
    Case {
        name: "flash_read_basic",
        call: Call::FlashRead {
            address: 0,
            length: 16,
        },
    },
    Case {
        name: "flash_read_8kb",
        call: Call::FlashRead {
            address: 0,
            length: 8192,
        },
    },
    Case {
        name: "data_write_basic",
        call: Call::DataWrite { len: 1024 },
    },
    Case {
        name: "data_write_8kb",
        call: Call::DataWrite { len: 8192 },
    },
    Case {
        name: "counter_stream",
        call: Call::CounterStream { count: 5 },
    },
    Case {
        name: "counter_stream_large",
        call: Call::CounterStream { count: 20 },
    },
    Case {
        name: "counter_upload",
        call: Call::CounterUpload { count: 5 },
    },
    Case {
        name: "counter_upload_large",
        call: Call::CounterUpload { count: 20 },
    },
];

/// The test names, in the reference's order.
// Evaluated at compile time: an index out of range would not compile.
#[allow(clippy::indexing_slicing)]
pub const TESTS: [&str; 12] = {
    let mut names = [""; 12];
    let mut i = 0;
    while i < CASES.len() {
        names[i] = CASES[i].name;
        i += 1;
    }
    names
};

/// The test named `name`.
pub fn case(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// A request the service must refuse, and the ERROR that refuses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// What the check is.
    pub name: &'static str,
    /// The request.
    pub call: Call,
    /// The refusal expected, with the reference limits and a flash of `flash_len` bytes all
    /// readable.
    pub code: ErrorCode,
}

/// The refusals of the reference limits, for a flash whose readable part is `flash_len` bytes
/// from address 0.
pub const fn refusals(flash_len: u32) -> [Refused; 4] {
    [
        Refused {
            name: "echo over 256 bytes: DECODE_FAILED",
            call: Call::Echo(text(&[b'x'; 257])),
            code: ErrorCode::DecodeFailed,
        },
        Refused {
            name: "flash_read over 8 KiB: HANDLER_FAILED",
            call: Call::FlashRead {
                address: 0,
                length: 8193,
            },
            code: ErrorCode::HandlerFailed,
        },
        Refused {
            name: "flash_read past the readable range: HANDLER_FAILED",
            call: Call::FlashRead {
                address: flash_len - 4,
                length: 8,
            },
            code: ErrorCode::HandlerFailed,
        },
        Refused {
            name: "counter_stream over 10,000 items: STREAM_LIMIT",
            call: Call::CounterStream { count: 10_001 },
            code: ErrorCode::StreamLimit,
        },
    ]
}

/// The refusals against the host demo's default 1 MiB image.
pub const REFUSALS: [Refused; 4] = refusals(1 << 20);

/// Byte `i` of a `data_write` payload (`0, 1, … 255, 0, …`).
pub const fn data_byte(i: usize) -> u8 {
    i as u8
}

/// Item `seq` of a counter stream or upload: `(seq, seq × 10)`.
pub const fn counter_item(seq: u32) -> (u32, i32) {
    (seq, (seq as i32).wrapping_mul(10))
}

/// What a test got that it should not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// The echo differs from what was sent.
    Echo {
        /// Bytes sent.
        sent: usize,
        /// Bytes echoed.
        echoed: usize,
    },
    /// A flash read of the wrong length.
    FlashLength {
        /// Bytes asked for.
        asked: u32,
        /// Bytes received.
        got: usize,
    },
    /// `data_write` counted another length.
    DataLength {
        /// Bytes sent.
        sent: usize,
        /// Bytes the peripheral counted.
        counted: u32,
    },
    /// A counter stream item out of sequence.
    Item {
        /// Its position.
        index: u32,
        /// Its `seq`.
        seq: u32,
        /// Its `value`.
        value: i32,
    },
    /// A counter stream of the wrong length.
    ItemCount {
        /// Items expected.
        expected: u32,
        /// Items received.
        got: u32,
    },
    /// `counter_upload` counted another number of items.
    Received {
        /// Items sent.
        sent: u32,
        /// Items the peripheral counted.
        counted: u32,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Echo { sent, echoed } => {
                write!(f, "echoed {echoed} bytes, sent {sent}")
            }
            Mismatch::FlashLength { asked, got } => write!(f, "got {got} bytes, asked {asked}"),
            Mismatch::DataLength { sent, counted } => {
                write!(f, "peripheral counted {counted}, sent {sent}")
            }
            Mismatch::Item { index, seq, value } => {
                write!(f, "item {index} is seq={seq} value={value}")
            }
            Mismatch::ItemCount { expected, got } => {
                write!(f, "{got} items, expected {expected}")
            }
            Mismatch::Received { sent, counted } => {
                write!(f, "received_count {counted}, sent {sent}")
            }
        }
    }
}

fn ensure(ok: bool, mismatch: Mismatch) -> Result<(), Mismatch> {
    if ok { Ok(()) } else { Err(mismatch) }
}

/// An echo reply.
pub fn check_echo(sent: &str, echoed: &str) -> Result<(), Mismatch> {
    ensure(
        sent == echoed,
        Mismatch::Echo {
            sent: sent.len(),
            echoed: echoed.len(),
        },
    )
}

/// A flash read's data length.
pub fn check_flash_read(asked: u32, got: usize) -> Result<(), Mismatch> {
    ensure(got == asked as usize, Mismatch::FlashLength { asked, got })
}

/// A `data_write` reply.
pub fn check_data_write(sent: usize, counted: u32) -> Result<(), Mismatch> {
    ensure(
        counted as usize == sent,
        Mismatch::DataLength { sent, counted },
    )
}

/// Item `index` of a counter stream.
pub fn check_item(index: u32, seq: u32, value: i32) -> Result<(), Mismatch> {
    ensure(
        counter_item(index) == (seq, value),
        Mismatch::Item { index, seq, value },
    )
}

/// The number of items a counter stream gave before its end.
pub fn check_item_count(expected: u32, got: u32) -> Result<(), Mismatch> {
    ensure(got == expected, Mismatch::ItemCount { expected, got })
}

/// A `counter_upload` reply.
pub fn check_upload(sent: u32, counted: u32) -> Result<(), Mismatch> {
    ensure(counted == sent, Mismatch::Received { sent, counted })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_the_reference_names_and_sizes() {
        assert_eq!(TESTS[0], "echo_basic");
        assert_eq!(TESTS[11], "counter_upload_large");
        assert_eq!(A_256.len(), 256);
        assert!(B_250.bytes().all(|b| b == b'B') && B_250.len() == 250);
        assert_eq!(
            case("flash_read_8kb").map(|c| c.call),
            Some(Call::FlashRead {
                address: 0,
                length: 8192
            })
        );
        assert!(case("nope").is_none());
        assert_eq!(data_byte(257), 1);
        assert_eq!(counter_item(3), (3, 30));
        assert!(check_item(2, 2, 20).is_ok());
        assert_eq!(
            check_item(2, 2, 21),
            Err(Mismatch::Item {
                index: 2,
                seq: 2,
                value: 21
            })
        );
        assert_eq!(
            REFUSALS[2].call,
            Call::FlashRead {
                address: (1 << 20) - 4,
                length: 8
            }
        );
    }
}
