//! The demo service on the host's `blerpc::Server` (feature `std`): the generated `pb::Blerpc`
//! handlers, each a thin adapter from prost's types to [`DemoService`]'s answers and refusals,
//! so every link the host serves answers exactly as the firmware does.

use blerpc::server::Status;
use futures_util::StreamExt;

use crate::flash::Flash;
use crate::noalloc::codec::BytesField;
use crate::service::{DemoLimits, DemoService, Refusal};
use crate::{FlashImage, noalloc, pb};

impl Default for DemoService<crate::image::ImageBytes> {
    /// A 1 MiB synthetic flash image and the firmware's limits.
    fn default() -> Self {
        DemoService::new(FlashImage::synthetic(1 << 20), DemoLimits::default())
    }
}

fn status(refusal: Refusal) -> Status {
    Status::new(refusal.code(), refusal.to_string())
}

// `DemoService::echo(self, ..)` below is the service's own answer (inherent methods), wrapped
// by the handler of the same name.
impl<F: Flash + Send + Sync + 'static> pb::Blerpc for DemoService<F> {
    async fn echo(&self, request: pb::EchoRequest) -> Result<pb::EchoResponse, Status> {
        let reply = DemoService::echo(
            self,
            noalloc::EchoRequest {
                message: &request.message,
            },
        )
        .map_err(status)?;
        Ok(pb::EchoResponse {
            message: reply.message.to_owned(),
        })
    }

    async fn flash_read(
        &self,
        request: pb::FlashReadRequest,
    ) -> Result<pb::FlashReadResponse, Status> {
        let reply = DemoService::flash_read(
            self,
            noalloc::FlashReadRequest {
                address: request.address,
                length: request.length,
            },
        )
        .map_err(status)?;
        let mut data = vec![0u8; reply.data.field_len()];
        reply.data.write_to(&mut data);
        Ok(pb::FlashReadResponse {
            address: reply.address,
            data: data.into(),
        })
    }

    async fn data_write(
        &self,
        request: pb::DataWriteRequest,
    ) -> Result<pb::DataWriteResponse, Status> {
        let reply = DemoService::data_write(
            self,
            &noalloc::DataWriteRequest {
                data: &request.data[..],
            },
        );
        Ok(pb::DataWriteResponse {
            length: reply.length,
        })
    }

    fn counter_stream(
        &self,
        request: pb::CounterStreamRequest,
    ) -> impl futures_util::Stream<Item = Result<pb::CounterStreamResponse, Status>> + Send + 'static
    {
        let request = noalloc::CounterStreamRequest {
            count: request.count,
        };
        let items: futures_util::stream::BoxStream<'static, _> =
            match DemoService::counter_stream(self, request) {
                Err(refusal) => futures_util::stream::iter([Err(status(refusal))]).boxed(),
                Ok(items) => futures_util::stream::iter(items.map(|item| {
                    Ok(pb::CounterStreamResponse {
                        seq: item.seq,
                        value: item.value,
                    })
                }))
                .boxed(),
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
        let reply = DemoService::counter_upload(self, received);
        Ok(pb::CounterUploadResponse {
            received_count: reply.received_count,
        })
    }
}
