//! The demo server on the peripheral end of a simulated link and a pinned, encrypted client on
//! the central end, shared by the scenario files.
#![allow(clippy::unwrap_used, dead_code)]

use blerpc::client::PinPolicy;
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use blerpc_demo::{DemoService, pb};
use blerpc_sim::{LinkParams, Monitor, pair};

/// Connects over a new simulated link with `params`; `tune` adjusts the client's configuration.
pub async fn connect_with(
    params: LinkParams,
    tune: impl FnOnce(&mut ClientConfig),
) -> (pb::BlerpcClient, Monitor) {
    let server = Server::new(
        pb::BlerpcServer::new(DemoService::default()),
        ServerConfig {
            identity: Some([3; 32]),
            ..Default::default()
        },
    )
    .unwrap();
    let key = server.identity_public().unwrap();
    let (central, peripheral) = pair(params).unwrap();
    let monitor = central.monitor();
    tokio::spawn(async move { server.serve_link(peripheral).await });
    let mut config = ClientConfig {
        pinning: PinPolicy::Trust(key),
        ..Default::default()
    };
    tune(&mut config);
    let client = Client::connect(central, config).await.unwrap();
    (pb::BlerpcClient::new(client), monitor)
}

/// [`connect_with`] with the default client configuration.
pub async fn connect(params: LinkParams) -> (pb::BlerpcClient, Monitor) {
    connect_with(params, |_| {}).await
}
