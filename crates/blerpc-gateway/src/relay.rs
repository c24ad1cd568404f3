//! End to end through the gateway: a backend's own central talks to a device over a relayed
//! link, and the gateway carries the device's containers verbatim without being able to read
//! or alter a call.
//!
//! A device's gateway connection carries the gateway's own session (the gateway is its central),
//! and bleRPC has one session per link with no rekey, so a relayed session needs a link of its
//! own: the **second device connection**. When a backend opens `GET /v1/devices/{id}/link`, the
//! gateway calls the built-in command [`RELAY_COMMAND`] on the device over its authenticated
//! session with a one-time URL (`{relay base}/v1/relay/{token}`, a 128-bit random token that
//! expires with [`GatewayConfig::relay_timeout`]); the device (`blerpc serve --dial`) dials that
//! URL as a WebSocket and serves a fresh peripheral connection on it; the gateway pairs it with
//! the backend's WebSocket and copies each binary message (one container) across, both ways,
//! until either side closes. The backend's central then runs setup and its own key exchange with
//! the device, pinning the device's key (`--trust-key`): the gateway only ever sees ciphertext,
//! and cannot pose as the device (it does not hold the device's identity key). Multiplexing
//! both sessions on one device link would need a framing the reference protocol does not have;
//! the second connection costs the device one more socket only while a relay is open.
//!
//! [`GatewayConfig::relay_timeout`]: crate::GatewayConfig::relay_timeout

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::WebSocket;
use rand_core::{OsRng, RngCore};
use tokio::sync::oneshot;

/// The command a gateway calls on a device to have it open a relayed connection: the request is
/// the URL to dial (UTF-8), the response empty once the device has connected. The dot keeps it
/// apart from every protobuf rpc name.
pub const RELAY_COMMAND: &str = "blerpc.relay";

/// The path prefix of the device side of a relay.
pub const RELAY_PATH: &str = "/v1/relay/";

/// Relays waiting for their device, and the number open.
#[derive(Debug, Default)]
pub struct Relays {
    pending: Mutex<HashMap<String, Pending>>,
    open: AtomicUsize,
}

#[derive(Debug)]
struct Pending {
    expires: Instant,
    device: String,
    tx: oneshot::Sender<WebSocket>,
}

/// A relay waiting for its device's connection; dropping it withdraws the token.
#[derive(Debug)]
pub struct Waiting {
    relays: Arc<Relays>,
    /// The one-time token.
    pub token: String,
    rx: oneshot::Receiver<WebSocket>,
}

impl Waiting {
    /// The device's WebSocket, once it has dialled in.
    pub async fn device(&mut self) -> Option<WebSocket> {
        (&mut self.rx).await.ok()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.relays.lock().remove(&self.token);
    }
}

/// Counts an open relay while it lives.
#[derive(Debug)]
pub struct OpenRelay(Arc<Relays>);

impl Drop for OpenRelay {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Relays {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Relays open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Counts a relay as open, unless `max` are already.
    pub fn try_open(self: &Arc<Self>, max: usize) -> Option<OpenRelay> {
        let mut now = self.open.load(Ordering::Relaxed);
        loop {
            if now >= max {
                return None;
            }
            match self
                .open
                .compare_exchange(now, now + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Some(OpenRelay(self.clone())),
                Err(actual) => now = actual,
            }
        }
    }

    /// A new token for `device`, valid for `ttl`.
    pub fn wait_for(self: &Arc<Self>, device: &str, ttl: Duration) -> Waiting {
        let mut bytes = [0u8; 16];
        OsRng.fill_bytes(&mut bytes);
        let token = hex::encode(bytes);
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        let mut pending = self.lock();
        pending.retain(|_, p| p.expires > now);
        pending.insert(
            token.clone(),
            Pending {
                expires: now + ttl,
                device: device.to_string(),
                tx,
            },
        );
        Waiting {
            relays: self.clone(),
            token,
            rx,
        }
    }

    /// Takes the pending relay of `token` (once), if it has not expired: the device it is for,
    /// and where its WebSocket goes.
    pub fn claim(&self, token: &str) -> Option<(String, oneshot::Sender<WebSocket>)> {
        let p = self.lock().remove(token)?;
        (p.expires > Instant::now()).then_some((p.device, p.tx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_claimed_once_and_withdrawn_with_its_waiter() {
        let r = Arc::new(Relays::default());
        let w = r.wait_for("dev", Duration::from_secs(10));
        assert_eq!(w.token.len(), 32);
        let token = w.token.clone();
        assert!(r.claim("nope").is_none());
        let (device, _tx) = r.claim(&token).unwrap_or_else(|| panic!("not claimed"));
        assert_eq!(device, "dev");
        assert!(r.claim(&token).is_none());
        let w2 = r.wait_for("dev", Duration::from_secs(10));
        let t2 = w2.token.clone();
        drop(w2);
        assert!(r.claim(&t2).is_none());
        drop(w);
    }

    #[test]
    fn expired_tokens_are_refused_and_opens_are_capped() {
        let r = Arc::new(Relays::default());
        let w = r.wait_for("dev", Duration::ZERO);
        assert!(r.claim(&w.token).is_none());
        let a = r.try_open(2);
        let b = r.try_open(2);
        assert!(a.is_some() && b.is_some());
        assert!(r.try_open(2).is_none());
        drop(a);
        assert_eq!(r.open(), 1);
        assert!(r.try_open(2).is_some());
    }
}
