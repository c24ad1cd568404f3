//! Devices coming in: each link (accepted from a device that dialled out, or made to a BLE
//! peripheral) gets the runtime's central, which runs setup and the key exchange; the device's
//! verified Ed25519 key is its id, and the admission policy decides whether it stays.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blerpc::backoff::Backoff;
use blerpc::client::PinPolicy;
use blerpc::link::{Acceptor, Link};
use blerpc::{Client, ClientConfig};

use crate::Gateway;
use crate::admission::Refusal;
use crate::registry::{Connection, Device, RegisterError};

/// Why a device link was not admitted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// Setup or the key exchange failed or did not finish within the setup deadline.
    #[error("setup with the device failed: {0}")]
    Setup(String),
    /// The device's key is not on the allow-list.
    #[error("device {0} is not on the allow-list")]
    NotAllowed(String),
    /// The device connected without encryption and plaintext devices are not allowed.
    #[error("the device did not encrypt (pass --allow-plaintext to admit such devices)")]
    Plaintext,
    /// The gateway keeps records of as many devices as it may.
    #[error("the gateway knows as many devices as configured (max_devices)")]
    RegistryFull,
}

/// A plaintext device's id: `plain-` and its peer id with every character but letters,
/// digits and `.` turned into `-` (usable in a URL path as it is): `plain-tcp-127.0.0.1-5000`.
pub fn plaintext_id(peer_id: &str) -> String {
    let mut id = String::from("plain-");
    let mut dash = true;
    for c in peer_id.chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            id.push(c);
            dash = false;
        } else if !dash {
            id.push('-');
            dash = true;
        }
    }
    id.trim_end_matches('-').to_string()
}

/// The link kind from a peer id (`tcp://…` → `tcp`).
fn link_kind(peer_id: &str) -> String {
    peer_id
        .split_once("://")
        .map_or("link", |(scheme, _)| scheme)
        .to_string()
}

/// Connections the device listener takes in one turn before it lets the gateway's other tasks
/// run: a bound against a flood that never lets the queue empty, far above what one process
/// holds (its open-file limit). A bound of 4,096 (one full listen queue) put the rest of a
/// reconnecting fleet behind 4,096 setups: failover of 100,000 devices took 10.42 s against
/// 9.40 s (medians of 3).
const ACCEPT_TURN: usize = 65_536;

impl Gateway {
    /// The central's configuration for device links.
    fn device_client_config(&self) -> ClientConfig {
        let c = &self.inner.config;
        let mut config = ClientConfig {
            pinning: PinPolicy::NoPin,
            ..ClientConfig::default()
        };
        // Encryption is checked after setup, so a device that does not encrypt is refused for
        // that reason (and counted as such) rather than as a failed setup.
        config.central.require_encryption = false;
        config.central.setup_timeout = c.setup_timeout;
        config.central.handshake_step_timeout = c.setup_timeout;
        // The gateway's own deadlines (per HTTP call) end calls; the core's must not come first.
        config.central.call_timeout = c.max_deadline;
        config.central.stream_idle_timeout = c.max_deadline;
        config.central.max_calls_in_flight = c
            .max_in_flight
            .clamp(1, blerpc::client::MAX_CALLS_IN_FLIGHT);
        config
    }

    /// Runs setup and the key exchange on a device's `link`, admits the device and registers
    /// it; returns once it is connected (a task watches the connection and marks the device
    /// offline when it closes).
    pub async fn attach<L: Link>(&self, link: L) -> Result<Arc<Device>, AttachError> {
        let peer = link.peer_id();
        let ip = link.peer_ip();
        let kind = link_kind(&peer);
        let metrics = &self.inner.metrics;
        // A connection that fails setup costs its address, as at a server: one that keeps
        // failing is penalized (refused before accept, in the kernel on Linux).
        let offence = |reason| {
            if let Some(ip) = ip {
                self.inner
                    .guard
                    .closed(ip, reason, std::time::Instant::now());
            }
        };
        let setup = tokio::time::timeout(
            self.inner.config.setup_timeout,
            Client::connect(link, self.device_client_config()),
        )
        .await;
        let client = match setup {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                offence(blerpc::metrics::Reason::SetupTimeout);
                let why = e.to_string();
                metrics.device_refused(
                    "setup_failed",
                    &peer,
                    &format!("device setup failed: {why}"),
                );
                return Err(AttachError::Setup(why));
            }
            Err(_) => {
                offence(blerpc::metrics::Reason::SetupTimeout);
                let why = format!(
                    "no key exchange within {:?}",
                    self.inner.config.setup_timeout
                );
                metrics.device_refused(
                    "setup_failed",
                    &peer,
                    &format!("device setup failed: {why}"),
                );
                return Err(AttachError::Setup(why));
            }
        };
        let info = client.info().clone();
        let (id, name) = match info.peer_identity.filter(|_| info.encrypted) {
            Some(key) => match self.inner.known.admit(&key) {
                Ok(name) => (hex::encode(key), name),
                Err(Refusal::NotAllowed | Refusal::Plaintext) => {
                    let id = hex::encode(key);
                    metrics.device_refused(
                        Refusal::NotAllowed.as_str(),
                        &peer,
                        &format!("device {id} refused: its key is not on the allow-list"),
                    );
                    client.close().await;
                    return Err(AttachError::NotAllowed(id));
                }
            },
            None if self.inner.config.allow_plaintext => (plaintext_id(&peer), None),
            None => {
                metrics.device_refused(
                    Refusal::Plaintext.as_str(),
                    &peer,
                    "device refused: it connected without encryption",
                );
                client.close().await;
                return Err(AttachError::Plaintext);
            }
        };
        let device = match self.inner.registry.know(&id, name) {
            Ok(d) => d,
            Err(RegisterError::Full) => {
                metrics.device_refused(
                    "registry_full",
                    &peer,
                    "device refused: the gateway knows max_devices devices",
                );
                client.close().await;
                return Err(AttachError::RegistryFull);
            }
        };
        let connection = Arc::new(Connection::new(
            client.clone(),
            kind,
            peer.clone(),
            info.encrypted,
            info.capabilities.is_some_and(|c| {
                c.flags
                    .contains(blerpc::blerpc_proto::wire::capabilities::CapabilityFlags::RELAY)
            }),
            self.inner.config.max_in_flight,
        ));
        let epoch = connection.epoch;
        if let Some(old) = self.inner.registry.connect(&device, connection.clone()) {
            // The device came back before its old link was noticed gone.
            tokio::spawn(async move { old.client.close().await });
        }
        metrics.device_connected();
        if device.connections() > 1 {
            metrics.device_reconnected();
        }
        self.refresh_gauges();
        tracing::info!(device = %device.id, %peer, "device connected");
        let gateway = self.clone();
        let watched = device.clone();
        tokio::spawn(async move {
            // Its diagnostics on the gateway's schedule, until the connection closes.
            tokio::select! {
                () = client.closed() => {}
                () = gateway.watch_link(watched.clone(), connection.clone()) => {}
            }
            gateway.inner.registry.disconnect(&watched, epoch);
            gateway.refresh_gauges();
            tracing::info!(device = %watched.id, %peer, "device disconnected");
        });
        Ok(device)
    }

    pub(crate) fn refresh_gauges(&self) {
        let r = &self.inner.registry;
        self.inner.metrics.set_devices(r.online(), self.known());
    }

    /// Accepts device links from `acceptor` until `shutdown` completes; each is attached on a
    /// task of its own. The acceptor shares the gateway's per-address guard and counters, as a
    /// server's does.
    pub async fn serve_devices<A: Acceptor>(
        &self,
        mut acceptor: A,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        acceptor.set_guard(self.inner.guard.clone());
        tokio::pin!(shutdown);
        let mut taken = 0usize;
        loop {
            // Outside tokio's cooperative budget: each time this task runs it empties the
            // listen queue, up to ACCEPT_TURN connections (the guard and `max_pending_setups`
            // still bound what is taken). Within the budget it took 128 connections a turn, and
            // a turn came only after every setup task queued before it: when tens of thousands
            // of devices redialled at once (a gateway of the fleet lost), the kernel's queue
            // overflowed and the devices whose handshakes it dropped waited 1 s or more to try
            // again.
            taken += 1;
            if taken.is_multiple_of(ACCEPT_TURN) {
                tokio::task::yield_now().await;
            }
            let link = tokio::select! {
                () = &mut shutdown => return Ok(()),
                link = tokio::task::unconstrained(acceptor.accept()) => link?,
            };
            let Ok(permit) = self.inner.setups.clone().try_acquire_owned() else {
                self.inner.metrics.device_refused(
                    "setup_slots",
                    &link.peer_id(),
                    "device connection closed: max_pending_setups connections are in setup",
                );
                continue;
            };
            let gateway = self.clone();
            tokio::spawn(async move {
                let peer = link.peer_id();
                let attached = gateway.attach(link).await;
                drop(permit);
                if let Err(e) = attached {
                    tracing::debug!(%peer, "device not attached: {e}");
                }
            });
        }
    }

    /// Keeps one device connected through `connect` (a BLE peripheral the gateway reaches as
    /// a central, say): connects, attaches, waits for the connection to close, and connects
    /// again after a capped exponential backoff with jitter, until `shutdown` completes.
    pub async fn keep_connected<L, F, Fut, E>(
        &self,
        what: &str,
        mut connect: F,
        mut backoff: Backoff,
        shutdown: impl Future<Output = ()>,
    ) where
        L: Link,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<L, E>>,
        E: std::fmt::Display,
    {
        tokio::pin!(shutdown);
        loop {
            let started = Instant::now();
            let attempt = async {
                match connect().await {
                    Ok(link) => match self.attach(link).await {
                        Ok(device) => {
                            if let Some(c) = device.connection() {
                                c.client.closed().await;
                            }
                            Ok(())
                        }
                        Err(e) => Err(e.to_string()),
                    },
                    Err(e) => Err(e.to_string()),
                }
            };
            tokio::select! {
                () = &mut shutdown => return,
                r = attempt => {
                    if let Err(e) = r {
                        tracing::warn!(device = %what, "cannot connect: {e}");
                    }
                }
            }
            backoff.connection_ended(started.elapsed());
            let wait = backoff.next_wait();
            tracing::debug!(device = %what, "reconnecting in {wait:?}");
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// The backoff [`Gateway::keep_connected`] uses unless told otherwise: 250 ms doubling to 10 s.
pub fn default_backoff() -> Backoff {
    Backoff::new(Duration::from_millis(250), Duration::from_secs(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_ids_fit_a_url_path() {
        assert_eq!(
            plaintext_id("tcp://127.0.0.1:5000"),
            "plain-tcp-127.0.0.1-5000"
        );
        assert_eq!(
            plaintext_id("ble://AA:BB:CC:DD:EE:FF"),
            "plain-ble-AA-BB-CC-DD-EE-FF"
        );
        assert_eq!(link_kind("ws://[::1]:80/x"), "ws");
        assert_eq!(link_kind("sim"), "link");
    }
}
