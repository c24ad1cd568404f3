//! A cancelled 8 KB `flash_read` on the simulated BLE link: how many containers the peripheral
//! still sends after the central drops the call, within two connection intervals and in all,
//! with the cancel extension in force and without it (the central only forgets the call).
//!
//! The runtime's server and client on the link, as in the rest of [`super`]; the call is
//! dropped once 3 of its response's containers have arrived.

use std::time::Duration;

use anyhow::Context as _;
use blerpc::client::PinPolicy;
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use blerpc_demo::{DemoService, pb};
use blerpc_sim::LinkParams;

/// One cancelled read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled {
    /// Containers the peripheral sent from the drop to 1, 2, 3 and 4 connection intervals
    /// after it.
    pub by_interval: [u64; 4],
    /// Containers the peripheral sent after the drop, in all.
    pub in_all: u64,
}

impl Cancelled {
    /// The first whole number of connection intervals after the drop by which the
    /// peripheral had sent everything it sent (5: more than 4).
    pub fn stopped_within(&self) -> usize {
        self.by_interval
            .iter()
            .position(|&n| n == self.in_all)
            .map_or(5, |i| i + 1)
    }
}

/// Drops an 8 KB `flash_read` mid-response on a link with `params`; `cancel` puts the cancel
/// extension in force on both ends (both runtimes' default) or leaves it out.
pub fn flash_read(params: LinkParams, cancel: bool) -> anyhow::Result<Cancelled> {
    let rt = crate::ble::paused_runtime()?;
    rt.block_on(async {
        let mut server_config = ServerConfig {
            identity: Some(blerpc::identity::generate()),
            ..ServerConfig::default()
        };
        server_config.peripheral.cancel = cancel;
        let server = Server::new(pb::BlerpcServer::new(DemoService::default()), server_config)?;
        let key = server.identity_public().context("no identity")?;
        let (central, link) = blerpc_sim::pair(params)?;
        let monitor = central.monitor();
        tokio::spawn(async move { server.serve_link(link).await });
        let mut config = ClientConfig {
            pinning: PinPolicy::Trust(key),
            ..ClientConfig::default()
        };
        config.central.cancel = cancel;
        let client = Client::connect(central, config)
            .await
            .context("connecting over the simulated link")?;
        let c = pb::BlerpcClient::new(client);
        let sent = || monitor.stats().containers[1];
        let before = sent();
        let read = c.flash_read(pb::FlashReadRequest {
            address: 0,
            length: 8192,
        });
        let arrived = async {
            while sent() < before + 3 {
                tokio::time::sleep(Duration::from_micros(100)).await;
            }
        };
        tokio::select! {
            r = read => anyhow::bail!("the read ended before it was cancelled: {r:?}"),
            () = arrived => {}
        }
        // The read's future is dropped here: the call is cancelled.
        let at_drop = sent();
        let mut by_interval = [0; 4];
        for n in &mut by_interval {
            tokio::time::sleep(params.conn_interval).await;
            *n = sent() - at_drop;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let in_all = sent() - at_drop;
        // The connection goes on.
        let echo = c
            .echo(pb::EchoRequest {
                message: "after".into(),
            })
            .await?;
        anyhow::ensure!(echo.message == "after", "echo after the cancel: {echo:?}");
        c.inner().close().await;
        Ok(Cancelled {
            by_interval,
            in_all,
        })
    })
}
