//! The demo service as a ready server and the client configuration that trusts it: what a
//! program needs to try bleRPC over any link in one process.
//!
//! ```
//! use blerpc::link::mem;
//! use blerpc_demo::pb::{BlerpcClient, EchoRequest};
//! use blerpc_demo::server::{client_config, demo_server};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (server, key) = demo_server()?;
//! let (central, peripheral) = mem::pair(247);
//! tokio::spawn(async move { server.serve_link(peripheral).await });
//! let client = BlerpcClient::new(blerpc::Client::connect(central, client_config(key)).await?);
//! let reply = client.echo(EchoRequest { message: "hi".into() }).await?;
//! assert_eq!(reply.message, "hi");
//! # Ok(())
//! # }
//! ```

use blerpc::client::PinPolicy;
use blerpc::server::ServerError;
use blerpc::{ClientConfig, Server, ServerConfig};

use crate::{DemoService, pb};

/// The demo service (default limits, a synthetic flash image, and [`chat`](crate::chat))
/// with a fresh identity, and that identity's public key. Encryption is required, as by default.
pub fn demo_server() -> Result<(Server, [u8; 32]), ServerError> {
    let server = Server::new(
        crate::chat::WithChat(pb::BlerpcServer::new(DemoService::default())),
        ServerConfig {
            identity: Some(blerpc::identity::generate()),
            ..Default::default()
        },
    )?;
    let key = server
        .identity_public()
        .ok_or_else(|| ServerError::Identity("the demo server has no identity".into()))?;
    Ok((server, key))
}

/// A client configuration that trusts exactly `key` (the server's identity pinned).
pub fn client_config(key: [u8; 32]) -> ClientConfig {
    ClientConfig {
        pinning: PinPolicy::Trust(key),
        ..Default::default()
    }
}
