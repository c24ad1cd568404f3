//! The demo messages as tests build and read them, as owned bytes: thin wrappers over the demo
//! service's generated codec (`blerpc_demo::noalloc`), so no test writes protobuf by hand.

use blerpc_demo::noalloc::{
    CounterStreamRequest, CounterStreamResponse, CounterUploadRequest, CounterUploadResponse,
    DataWriteRequest, DataWriteResponse, EchoRequest, FlashReadRequest, FlashReadResponse,
};

/// Encodes a generated message into a `Vec`.
macro_rules! to_vec {
    ($m:expr) => {{
        let m = $m;
        let mut out = vec![0u8; m.encoded_len()];
        let n = m.encode(&mut out).unwrap_or(0);
        out.truncate(n);
        out
    }};
}

/// `EchoRequest { message }` (also the echo's reply: the same encoding).
pub fn echo_req(message: &str) -> Vec<u8> {
    to_vec!(EchoRequest { message })
}

/// `FlashReadRequest { address, length }`.
pub fn flash_read_req(address: u32, length: u32) -> Vec<u8> {
    to_vec!(FlashReadRequest { address, length })
}

/// `(address, length)` of a `FlashReadRequest`.
pub fn flash_read_req_of(request: &[u8]) -> Option<(u32, u32)> {
    FlashReadRequest::decode(request)
        .ok()
        .map(|m| (m.address, m.length))
}

/// `FlashReadResponse { address, data }`.
pub fn flash_read_reply(address: u32, data: &[u8]) -> Vec<u8> {
    to_vec!(FlashReadResponse { address, data })
}

/// `(address, data)` of a `FlashReadResponse`.
pub fn flash_read_reply_of(reply: &[u8]) -> Option<(u32, Vec<u8>)> {
    FlashReadResponse::decode(reply)
        .ok()
        .map(|m| (m.address, m.data.to_vec()))
}

/// `DataWriteRequest { data }`.
pub fn data_write_req(data: &[u8]) -> Vec<u8> {
    to_vec!(DataWriteRequest { data })
}

/// The `data` of a `DataWriteRequest`.
pub fn data_write_req_of(request: &[u8]) -> Option<Vec<u8>> {
    DataWriteRequest::decode(request)
        .ok()
        .map(|m| m.data.to_vec())
}

/// `DataWriteResponse { length }`.
pub fn data_write_reply(length: u32) -> Vec<u8> {
    to_vec!(DataWriteResponse { length })
}

/// The `length` of a `DataWriteResponse`.
pub fn data_write_reply_of(reply: &[u8]) -> Option<u32> {
    DataWriteResponse::decode(reply).ok().map(|m| m.length)
}

/// `CounterStreamRequest { count }`.
pub fn counter_stream_req(count: u32) -> Vec<u8> {
    to_vec!(CounterStreamRequest { count })
}

/// The `count` of a `CounterStreamRequest`.
pub fn counter_stream_req_of(request: &[u8]) -> Option<u32> {
    CounterStreamRequest::decode(request).ok().map(|m| m.count)
}

/// A counter item, `{seq, value}`: a `CounterStreamResponse` or a `CounterUploadRequest` (the
/// same encoding).
pub fn counter_item(seq: u32, value: i32) -> Vec<u8> {
    to_vec!(CounterUploadRequest { seq, value })
}

/// `(seq, value)` of a counter item.
pub fn counter_item_of(item: &[u8]) -> Option<(u32, i32)> {
    CounterStreamResponse::decode(item)
        .ok()
        .map(|m| (m.seq, m.value))
}

/// `CounterUploadResponse { received_count }`.
pub fn upload_reply(received_count: u32) -> Vec<u8> {
    to_vec!(CounterUploadResponse { received_count })
}

/// The `received_count` of a `CounterUploadResponse`.
pub fn upload_reply_of(reply: &[u8]) -> Option<u32> {
    CounterUploadResponse::decode(reply)
        .ok()
        .map(|m| m.received_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_the_reference_bytes() {
        // wire.md §6.2: {message: "hello"}; {address: 0, length: 8192}; {seq: 1, value: 10}.
        assert_eq!(echo_req("hello"), b"\x0a\x05hello");
        assert_eq!(flash_read_req(0, 8192), b"\x10\x80\x40");
        assert_eq!(flash_read_req_of(b"\x10\x80\x40"), Some((0, 8192)));
        assert_eq!(counter_item(1, 10), b"\x08\x01\x10\x0a");
        assert_eq!(counter_item_of(b"\x08\x01\x10\x0a"), Some((1, 10)));
        let reply = flash_read_reply(16, b"abc");
        assert_eq!(reply, b"\x08\x10\x12\x03abc");
        assert_eq!(flash_read_reply_of(&reply), Some((16, b"abc".to_vec())));
        assert_eq!(upload_reply_of(&upload_reply(20)), Some(20));
        assert_eq!(data_write_reply_of(&data_write_reply(0)), Some(0));
        // A length past the end is an error, not a panic.
        assert_eq!(flash_read_reply_of(&[0x12, 0xff, 0x01, 0x00]), None);
    }
}
