//! The gRPC baseline: what users reach for instead of bleRPC, at its defaults. tonic 0.14 over
//! HTTP/2 (h2c on TCP, TLS 1.3 through rustls and *ring* on TLS, with the same RSA-2048
//! certificate), generated from `proto/loopback.proto` as tonic's users generate it: one unary
//! `DataWrite` whose response acknowledges the length received, as bleRPC's `data_write` does.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity, Server, ServerTlsConfig};

/// The generated messages, client and server.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("loopback");
}

use pb::loopback_client::LoopbackClient;
use pb::loopback_server::{Loopback, LoopbackServer};
use pb::{DataWriteRequest, DataWriteResponse};

/// The service: acknowledges the length of the data.
#[derive(Debug, Default)]
pub struct Ack;

#[tonic::async_trait]
impl Loopback for Ack {
    async fn data_write(
        &self,
        request: tonic::Request<DataWriteRequest>,
    ) -> Result<tonic::Response<DataWriteResponse>, tonic::Status> {
        let length = u32::try_from(request.get_ref().data.len())
            .map_err(|_| tonic::Status::invalid_argument("data longer than 4 GiB"))?;
        Ok(tonic::Response::new(DataWriteResponse { length }))
    }
}

/// The largest message either side accepts: tonic's default of 4 MiB would refuse nothing the
/// matrix sends (64 KiB at most), but the bleRPC server accepts 16 MiB, so gRPC gets as much.
const MAX_MESSAGE: usize = 16 << 20;

/// Serves gRPC on `listener` until it fails, with TLS when `tls` holds a PEM certificate chain
/// and key.
pub async fn serve(listener: TcpListener, tls: Option<(&str, &str)>) -> anyhow::Result<()> {
    let mut builder = Server::builder();
    if let Some((cert, key)) = tls {
        builder =
            builder.tls_config(ServerTlsConfig::new().identity(Identity::from_pem(cert, key)))?;
    }
    let service = LoopbackServer::new(Ack)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    // `Server::serve` binds with TCP_NODELAY; serving a listener of ours, the incoming stream
    // sets it (without it, Nagle holds the last segment of a 64 KiB message for a delayed ACK:
    // 40 ms calls).
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    builder
        .add_service(service)
        .serve_with_incoming(incoming)
        .await?;
    Ok(())
}

/// A connected gRPC client of the loopback service.
#[derive(Debug, Clone)]
pub struct GrpcClient {
    client: LoopbackClient<Channel>,
    payload: Bytes,
}

impl GrpcClient {
    /// Connects to `addr` (over TLS, verifying the certificate against `ca_pem` for the name
    /// `localhost`, as the other TLS clients do, when given), sending `payload` on every call.
    pub async fn connect(
        addr: SocketAddr,
        ca_pem: Option<&str>,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<GrpcClient, String> {
        let uri = match ca_pem {
            Some(_) => format!("https://{addr}"),
            None => format!("http://{addr}"),
        };
        let mut endpoint = Channel::from_shared(uri)
            .map_err(|e| e.to_string())?
            .tcp_nodelay(true)
            .connect_timeout(timeout);
        if let Some(ca) = ca_pem {
            let tls = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .domain_name("localhost");
            endpoint = endpoint.tls_config(tls).map_err(|e| e.to_string())?;
        }
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| format!("gRPC connect: {e}"))?;
        let client = LoopbackClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        Ok(GrpcClient { client, payload })
    }

    /// One call, checked against its acknowledgement.
    pub async fn call(&self) -> Result<(), String> {
        let mut client = self.client.clone();
        let request = DataWriteRequest {
            data: self.payload.clone(),
        };
        let ack = client
            .data_write(request)
            .await
            .map_err(|e| format!("gRPC: {e}"))?
            .into_inner();
        if ack.length as usize == self.payload.len() {
            Ok(())
        } else {
            Err(format!(
                "ACK for {} bytes, sent {}",
                ack.length,
                self.payload.len()
            ))
        }
    }
}
