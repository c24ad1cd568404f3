//! The demo service's handlers.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use blerpc::server::Status;
use futures_util::StreamExt;

use crate::pb;

/// Limits of the demo service. Defaults are the reference firmware's (`handlers.c`,
/// `blerpc.options`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DemoLimits {
    /// Longest echo message in bytes. Default 256.
    pub max_echo: usize,
    /// Longest flash read in bytes. Default 8,192.
    pub max_read: u32,
    /// Most items of one counter stream. Default 10,000.
    pub max_stream_items: u32,
}

impl Default for DemoLimits {
    fn default() -> Self {
        DemoLimits {
            max_echo: 256,
            max_read: 8192,
            max_stream_items: 10_000,
        }
    }
}

/// A flash image refused at start-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlashError {
    /// The readable range does not lie inside the image.
    #[error("readable range {start:#x}..{end:#x} is outside the {size}-byte image")]
    Range {
        /// Range start.
        start: u32,
        /// Range end.
        end: u32,
        /// Image size.
        size: usize,
    },
    /// The identity seed appears in the readable range: `flash_read` would leak it (the
    /// reference firmware's audit finding).
    #[error("the identity key appears in the readable flash at {offset:#x}; refusing to serve it")]
    SecretExposed {
        /// Where it was found.
        offset: usize,
    },
    /// The image file could not be read.
    #[error("flash image {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// The flash the server reads from, and the part of it `flash_read` may expose.
#[derive(Clone, Debug)]
pub struct FlashImage {
    bytes: Arc<[u8]>,
    readable: Range<u32>,
}

impl FlashImage {
    /// A synthetic image of `size` bytes (byte `i` is `(i * 31 + 7) mod 256`), all readable.
    pub fn synthetic(size: usize) -> Self {
        let bytes: Arc<[u8]> = (0..size)
            .map(|i| (i.wrapping_mul(31).wrapping_add(7)) as u8)
            .collect();
        let end = u32::try_from(size).unwrap_or(u32::MAX);
        FlashImage {
            bytes,
            readable: 0..end,
        }
    }

    /// The image stored in `path`, all readable.
    pub fn from_file(path: &std::path::Path) -> Result<Self, FlashError> {
        let bytes = std::fs::read(path).map_err(|source| FlashError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let end = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        Ok(FlashImage {
            bytes: bytes.into(),
            readable: 0..end,
        })
    }

    /// Restricts `flash_read` to `range`.
    pub fn with_readable(mut self, range: Range<u32>) -> Result<Self, FlashError> {
        let size = self.bytes.len();
        if range.start > range.end || range.end as usize > size {
            return Err(FlashError::Range {
                start: range.start,
                end: range.end,
                size,
            });
        }
        self.readable = range;
        Ok(self)
    }

    /// Fails if `secret` (e.g. the identity seed) occurs in the readable range.
    pub fn ensure_not_exposed(&self, secret: &[u8]) -> Result<(), FlashError> {
        if secret.is_empty() {
            return Ok(());
        }
        let readable = self.readable_bytes();
        match readable.windows(secret.len()).position(|w| w == secret) {
            Some(at) => Err(FlashError::SecretExposed {
                offset: self.readable.start as usize + at,
            }),
            None => Ok(()),
        }
    }

    /// The readable range.
    pub fn readable(&self) -> Range<u32> {
        self.readable.clone()
    }

    fn readable_bytes(&self) -> &[u8] {
        self.bytes
            .get(self.readable.start as usize..self.readable.end as usize)
            .unwrap_or(&[])
    }

    /// `length` bytes at `address`, if entirely inside the readable range.
    pub fn read(&self, address: u32, length: u32) -> Option<&[u8]> {
        let end = address.checked_add(length)?;
        if address < self.readable.start || end > self.readable.end {
            return None;
        }
        self.bytes.get(address as usize..end as usize)
    }
}

/// The demo service.
#[derive(Debug)]
pub struct DemoService {
    flash: FlashImage,
    limits: DemoLimits,
    uploads: AtomicU64,
}

impl DemoService {
    /// A service reading from `flash` with `limits`.
    pub fn new(flash: FlashImage, limits: DemoLimits) -> Self {
        DemoService {
            flash,
            limits,
            uploads: AtomicU64::new(0),
        }
    }

    /// Total items received by `counter_upload` since start (all connections).
    pub fn uploaded_items(&self) -> u64 {
        self.uploads.load(Ordering::Relaxed)
    }
}

impl Default for DemoService {
    /// A 1 MiB synthetic flash image and the firmware's limits.
    fn default() -> Self {
        DemoService::new(FlashImage::synthetic(1 << 20), DemoLimits::default())
    }
}

impl pb::Blerpc for DemoService {
    async fn echo(&self, request: pb::EchoRequest) -> Result<pb::EchoResponse, Status> {
        if request.message.len() > self.limits.max_echo {
            return Err(Status::decode(format!(
                "echo message of {} bytes, at most {}",
                request.message.len(),
                self.limits.max_echo
            )));
        }
        Ok(pb::EchoResponse {
            message: request.message,
        })
    }

    async fn flash_read(
        &self,
        request: pb::FlashReadRequest,
    ) -> Result<pb::FlashReadResponse, Status> {
        if request.length > self.limits.max_read {
            return Err(Status::handler_failed(format!(
                "read of {} bytes, at most {} per call",
                request.length, self.limits.max_read
            )));
        }
        let data = self
            .flash
            .read(request.address, request.length)
            .ok_or_else(|| {
                let r = self.flash.readable();
                Status::handler_failed(format!(
                    "{:#x}+{} is outside the readable flash {:#x}..{:#x}",
                    request.address, request.length, r.start, r.end
                ))
            })?;
        Ok(pb::FlashReadResponse {
            address: request.address,
            data: data.to_vec().into(),
        })
    }

    async fn data_write(
        &self,
        request: pb::DataWriteRequest,
    ) -> Result<pb::DataWriteResponse, Status> {
        let length = u32::try_from(request.data.len()).unwrap_or(u32::MAX);
        Ok(pb::DataWriteResponse { length })
    }

    fn counter_stream(
        &self,
        request: pb::CounterStreamRequest,
    ) -> impl futures_util::Stream<Item = Result<pb::CounterStreamResponse, Status>> + Send + 'static
    {
        let count = request.count;
        let limit = self.limits.max_stream_items;
        let items: futures_util::stream::BoxStream<'static, _> = if count > limit {
            let err = Status::new(
                blerpc::blerpc_proto::wire::error_code::ErrorCode::StreamLimit,
                format!("{count} items requested, at most {limit}"),
            );
            futures_util::stream::iter([Err(err)]).boxed()
        } else {
            futures_util::stream::iter((0..count).map(|seq| {
                Ok(pb::CounterStreamResponse {
                    seq,
                    value: (seq as i32).wrapping_mul(10),
                })
            }))
            .boxed()
        };
        items
    }

    async fn counter_upload(
        &self,
        mut items: pb::Streaming<pb::CounterUploadRequest>,
    ) -> Result<pb::CounterUploadResponse, Status> {
        let mut received = 0u32;
        while let Some(item) = items.next().await {
            item?;
            received = received.saturating_add(1);
        }
        self.uploads
            .fetch_add(u64::from(received), Ordering::Relaxed);
        Ok(pb::CounterUploadResponse {
            received_count: received,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounds_checked_against_the_readable_range() {
        let f = FlashImage::synthetic(4096)
            .with_readable(1024..2048)
            .unwrap();
        assert!(f.read(1024, 1024).is_some());
        assert!(f.read(1000, 100).is_none());
        assert!(f.read(2000, 100).is_none());
        assert!(f.read(u32::MAX, 2).is_none());
        assert!(FlashImage::synthetic(10).with_readable(0..11).is_err());
    }

    #[test]
    fn an_image_holding_the_identity_key_is_refused() {
        let mut bytes = vec![0u8; 4096];
        let seed = [0x5a; 32];
        bytes[100..132].copy_from_slice(&seed);
        let dir = std::env::temp_dir().join(format!("blerpc-flash-{}", std::process::id()));
        std::fs::write(&dir, &bytes).unwrap();
        let f = FlashImage::from_file(&dir).unwrap();
        assert!(matches!(
            f.ensure_not_exposed(&seed),
            Err(FlashError::SecretExposed { offset: 100 })
        ));
        // Excluding that part of the flash from the readable range makes it safe.
        let f = f.with_readable(1024..4096).unwrap();
        assert!(f.ensure_not_exposed(&seed).is_ok());
        let _ = std::fs::remove_file(dir);
    }
}
