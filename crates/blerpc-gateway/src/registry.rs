//! The devices a gateway knows: who is connected over which link, since when, and how their
//! calls went.
//!
//! A device is known once it is on the allow-list or has connected; it stays known (offline)
//! after it disconnects, so a call to it is told apart from a call to a device that never
//! existed (503, not 404). Each connected device holds one [`Connection`]: the runtime's
//! [`Client`] on its link and the gates that pipeline calls up to the device's limit and queue
//! the rest first come, first served.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use blerpc::Client;
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, broadcast, watch};

use crate::routing::claims::PresenceMessage;
use crate::routing::{Epoch, ListQuery, NodeId, Page, Presence, unix_ms_since};
use crate::stats::CallStats;

/// Presence messages a slow follower may fall behind by before its stream is cut (it then
/// follows again, from a fresh sync).
const PRESENCE_BACKLOG: usize = 4096;

/// One live connection to a device.
#[derive(Debug)]
pub struct Connection {
    /// The runtime's central on the device's link.
    pub client: Client,
    /// The link's kind: `tcp`, `tls`, `ws`, `wss`, `ble`, ...
    pub link: String,
    /// The device's address as the link sees it (its peer id).
    pub remote: String,
    /// When it connected.
    pub since: SystemTime,
    /// Whether calls are end-to-end encrypted between the gateway and the device.
    pub encrypted: bool,
    /// Whether the device announced that it opens relayed connections (CAPABILITIES flag
    /// RELAY: `blerpc serve --dial` devices do).
    pub relay: bool,
    /// Orders this connection among the device's earlier and later ones (on any node).
    pub epoch: Epoch,
    /// Calls in flight (permits: the device's limit).
    pub(crate) calls: Arc<Semaphore>,
    /// Streams in flight: bleRPC runs one stream at a time per connection.
    pub(crate) streams: Arc<Semaphore>,
    /// Calls waiting for a permit.
    pub(crate) queued: AtomicUsize,
    /// Calls holding a permit.
    pub(crate) in_flight: AtomicUsize,
}

impl Connection {
    /// A connection over `client`, taking `max_in_flight` calls at once.
    pub fn new(
        client: Client,
        link: String,
        remote: String,
        encrypted: bool,
        relay: bool,
        max_in_flight: usize,
    ) -> Connection {
        Connection {
            client,
            link,
            remote,
            since: SystemTime::now(),
            encrypted,
            relay,
            epoch: Epoch::next(),
            calls: Arc::new(Semaphore::new(max_in_flight.max(1))),
            streams: Arc::new(Semaphore::new(1)),
            queued: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// Wakes every call waiting for this connection with "disconnected" (its device went away
    /// or came back on a newer connection).
    pub(crate) fn shut(&self) {
        self.calls.close();
        self.streams.close();
    }
}

/// A device that has connected (the allow-list's others are known without a record).
#[derive(Debug)]
pub struct Device {
    /// Its id: the hex of its Ed25519 identity key (or `plain-` and its peer id).
    pub id: String,
    /// Its name on the allow-list, if any.
    pub name: Option<String>,
    state: Mutex<DeviceState>,
}

#[derive(Debug, Default)]
struct DeviceState {
    connection: Option<Arc<Connection>>,
    /// The latest connection's epoch and start.
    epoch: Epoch,
    since: Option<SystemTime>,
    last_seen: Option<SystemTime>,
    stats: CallStats,
    connections: u64,
    /// The latest connections, newest first (at most [`SESSIONS_KEPT`]).
    sessions: VecDeque<Connected>,
    /// The device's last diagnostics, when it was asked (boxed: most devices nobody asks
    /// cost a pointer).
    diagnostics: Option<Box<Taken>>,
}

/// Connections a device's record keeps (its link report's `sessions`).
pub const SESSIONS_KEPT: usize = 16;

/// One connection of a device, as its link report shows it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Session {
    /// The link's kind (`tcp`, `ble`, ...).
    pub link: String,
    /// When it connected (RFC 3339, UTC).
    pub connected: String,
    /// When it ended (RFC 3339, UTC); `None` while it lasts.
    pub disconnected: Option<String>,
    /// How long it lasted (or has lasted so far), seconds.
    pub seconds: f64,
}

/// What a device's record keeps of one connection; [`Session`] is made from it when asked.
#[derive(Debug)]
struct Connected {
    link: String,
    since: SystemTime,
    until: Option<SystemTime>,
}

impl Connected {
    /// Ends it at `at`, unless it already ended.
    fn end(&mut self, at: SystemTime) {
        self.until.get_or_insert(at);
    }

    /// As the report shows it at `now`.
    fn as_of(&self, now: SystemTime) -> Session {
        let end = self.until.unwrap_or(now);
        Session {
            link: self.link.clone(),
            connected: rfc3339(self.since),
            disconnected: self.until.map(rfc3339),
            seconds: end
                .duration_since(self.since)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }
}

/// Diagnostics a device gave, and when.
#[derive(Clone, Debug)]
pub struct Taken {
    /// When the answer came.
    pub at: SystemTime,
    /// The answer.
    pub diagnostics: blerpc::diagnostics::DeviceDiagnostics,
}

/// Whether a device is connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceStatus {
    /// Connected now.
    Online,
    /// Not connected now.
    Offline,
}

impl DeviceStatus {
    /// `online` or `offline`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceStatus::Online => "online",
            DeviceStatus::Offline => "offline",
        }
    }
}

/// What the API and the dashboard show of a device.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeviceView {
    /// The device id.
    pub id: String,
    /// Its name on the allow-list.
    pub name: Option<String>,
    /// `online` or `offline`.
    pub status: DeviceStatus,
    /// The current (or last) link's kind.
    pub link: Option<String>,
    /// The current link's remote address.
    pub remote: Option<String>,
    /// Whether the current connection is encrypted.
    pub encrypted: Option<bool>,
    /// Whether the device opens relayed links (`GET /v1/devices/{id}/link`).
    pub relay: Option<bool>,
    /// When the current connection was made (RFC 3339, UTC).
    pub connected_since: Option<String>,
    /// When the device was last heard from (connected, or answered a call).
    pub last_seen: Option<String>,
    /// Connections the device has made since the gateway started.
    pub connections: u64,
    /// Calls answered, and those that failed.
    pub calls: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Calls in flight now.
    pub in_flight: usize,
    /// Calls waiting now.
    pub queued: usize,
    /// Median call latency (ms) through the gateway.
    pub latency_p50_ms: Option<f64>,
    /// 99th percentile call latency (ms).
    pub latency_p99_ms: Option<f64>,
    /// In a fleet: the gateway that holds the device, or held it last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

impl DeviceView {
    /// A device on the allow-list that has not connected since the gateway started.
    pub fn never_seen(id: String, name: Option<String>) -> DeviceView {
        DeviceView {
            id,
            name,
            status: DeviceStatus::Offline,
            link: None,
            remote: None,
            encrypted: None,
            relay: None,
            connected_since: None,
            last_seen: None,
            connections: 0,
            calls: 0,
            errors: 0,
            in_flight: 0,
            queued: 0,
            latency_p50_ms: None,
            latency_p99_ms: None,
            gateway: None,
        }
    }
}

impl Device {
    fn new(id: String, name: Option<String>) -> Device {
        Device {
            id,
            name,
            state: Mutex::new(DeviceState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, DeviceState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live connection, if the device is connected.
    pub fn connection(&self) -> Option<Arc<Connection>> {
        self.state().connection.clone()
    }

    /// Records a call's outcome.
    pub fn record_call(&self, latency: Duration, ok: bool) {
        let mut s = self.state();
        s.stats.record(latency, ok);
        if ok {
            s.last_seen = Some(SystemTime::now());
        }
    }

    /// Connections the device has made since the gateway started.
    pub fn connections(&self) -> u64 {
        self.state().connections
    }

    /// Keeps `diagnostics` as the device's last, taken `at`.
    pub fn took_diagnostics(
        &self,
        at: SystemTime,
        diagnostics: blerpc::diagnostics::DeviceDiagnostics,
    ) {
        self.state().diagnostics = Some(Box::new(Taken { at, diagnostics }));
    }

    /// The device's last diagnostics, if it gave any.
    pub fn last_diagnostics(&self) -> Option<Taken> {
        self.state().diagnostics.as_deref().cloned()
    }

    /// The latest connections, newest first, as of now (at most [`SESSIONS_KEPT`]).
    pub fn sessions(&self) -> Vec<Session> {
        let now = SystemTime::now();
        self.state().sessions.iter().map(|s| s.as_of(now)).collect()
    }

    /// The `q` quantile (0 to 1) of its call latencies through the gateway, ms.
    pub fn latency_ms(&self, q: f64) -> Option<f64> {
        self.state().stats.quantile_ms(q)
    }

    /// A snapshot for the API.
    pub fn view(&self) -> DeviceView {
        let s = self.state();
        let c = s.connection.as_ref();
        DeviceView {
            id: self.id.clone(),
            name: self.name.clone(),
            status: if c.is_some() {
                DeviceStatus::Online
            } else {
                DeviceStatus::Offline
            },
            link: c.map(|c| c.link.clone()),
            remote: c.map(|c| c.remote.clone()),
            encrypted: c.map(|c| c.encrypted),
            relay: c.map(|c| c.relay),
            connected_since: c.map(|c| rfc3339(c.since)),
            last_seen: s.last_seen.map(rfc3339),
            connections: s.connections,
            calls: s.stats.calls,
            errors: s.stats.errors,
            in_flight: c.map_or(0, |c| c.in_flight.load(Ordering::Relaxed)),
            queued: c.map_or(0, |c| c.queued.load(Ordering::Relaxed)),
            latency_p50_ms: s.stats.quantile_ms(0.5),
            latency_p99_ms: s.stats.quantile_ms(0.99),
            gateway: None,
        }
    }

    /// The device's directory entry, held by `node`.
    pub fn presence(&self, node: &NodeId) -> Presence {
        let s = self.state();
        Presence {
            device: self.id.clone(),
            node: node.clone(),
            epoch: s.epoch,
            online: s.connection.is_some(),
            since_ms: s.since.map_or(0, unix_ms_since),
        }
    }
}

/// Why a device could not be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterError {
    /// The gateway keeps records of as many devices as configured.
    Full,
}

/// Every known device, by id.
#[derive(Debug)]
pub struct Registry {
    devices: RwLock<BTreeMap<String, Arc<Device>>>,
    max_devices: usize,
    online: AtomicUsize,
    /// Devices recorded without a name (not on an allow-list: open admission, plaintext).
    unnamed: AtomicUsize,
    /// Bumped whenever a device connects or disconnects (the dashboard waits on it).
    changes: watch::Sender<u64>,
    /// Each connect (a claim) and disconnect (a release), for whoever follows them.
    presence: broadcast::Sender<PresenceMessage>,
}

impl Registry {
    /// An empty registry keeping at most `max_devices` records.
    pub fn new(max_devices: usize) -> Registry {
        Registry {
            devices: RwLock::new(BTreeMap::new()),
            max_devices,
            online: AtomicUsize::new(0),
            unnamed: AtomicUsize::new(0),
            changes: watch::Sender::new(0),
            presence: broadcast::Sender::new(PRESENCE_BACKLOG),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Device>>> {
        self.devices.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Device>>> {
        self.devices.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The device `id`, if known.
    pub fn get(&self, id: &str) -> Option<Arc<Device>> {
        self.read().get(id).cloned()
    }

    /// Makes `id` known (offline) with `name`, if it is not already.
    pub fn know(&self, id: &str, name: Option<String>) -> Result<Arc<Device>, RegisterError> {
        if let Some(d) = self.get(id) {
            return Ok(d);
        }
        let mut all = self.write();
        if let Some(d) = all.get(id) {
            return Ok(d.clone());
        }
        if all.len() >= self.max_devices {
            return Err(RegisterError::Full);
        }
        if name.is_none() {
            self.unnamed.fetch_add(1, Ordering::Relaxed);
        }
        let d = Arc::new(Device::new(id.to_string(), name));
        all.insert(id.to_string(), d.clone());
        Ok(d)
    }

    /// Marks `device` connected over `connection` (and claims it); a connection it already had
    /// is returned so the caller closes it (the device reconnected before the gateway noticed
    /// it was gone).
    pub fn connect(&self, device: &Device, connection: Arc<Connection>) -> Option<Arc<Connection>> {
        let claim = PresenceMessage::Claim {
            device: device.id.clone(),
            epoch: connection.epoch,
            since_ms: unix_ms_since(connection.since),
        };
        let old = {
            let mut s = device.state();
            s.connections += 1;
            if let Some(open) = s.sessions.front_mut() {
                open.end(connection.since);
            }
            s.sessions.push_front(Connected {
                link: connection.link.clone(),
                since: connection.since,
                until: None,
            });
            s.sessions.truncate(SESSIONS_KEPT);
            s.last_seen = Some(connection.since);
            s.since = Some(connection.since);
            s.epoch = connection.epoch;
            s.connection.replace(connection)
        };
        if let Some(old) = &old {
            old.shut();
        }
        if old.is_none() {
            self.online.fetch_add(1, Ordering::Relaxed);
        }
        let _ = self.presence.send(claim);
        self.changes.send_modify(|g| *g += 1);
        old
    }

    /// Marks `device` disconnected (and releases it) if `epoch` is still its connection's (a
    /// newer one stays).
    pub fn disconnect(&self, device: &Device, epoch: Epoch) {
        let removed = {
            let mut s = device.state();
            if s.connection.as_ref().map(|c| c.epoch) == Some(epoch) {
                if let Some(c) = s.connection.take() {
                    c.shut();
                }
                if let Some(open) = s.sessions.front_mut() {
                    open.end(SystemTime::now());
                }
                true
            } else {
                false
            }
        };
        if removed {
            self.online.fetch_sub(1, Ordering::Relaxed);
            let _ = self.presence.send(PresenceMessage::Release {
                device: device.id.clone(),
                epoch,
            });
            self.changes.send_modify(|g| *g += 1);
        }
    }

    /// Every claim and release from now on (see [`crate::routing::claims`]).
    pub fn presence(&self) -> broadcast::Receiver<PresenceMessage> {
        self.presence.subscribe()
    }

    /// A claim for every device connected now.
    pub fn claims(&self) -> Vec<PresenceMessage> {
        let devices: Vec<Arc<Device>> = self.read().values().cloned().collect();
        devices
            .iter()
            .filter_map(|d| {
                let s = d.state();
                s.connection.as_ref().map(|c| PresenceMessage::Claim {
                    device: d.id.clone(),
                    epoch: c.epoch,
                    since_ms: unix_ms_since(c.since),
                })
            })
            .collect()
    }

    /// Devices connected now.
    pub fn online(&self) -> usize {
        self.online.load(Ordering::Relaxed)
    }

    /// Devices recorded (every device that has connected).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Devices recorded without a name (not on an allow-list).
    pub fn unnamed(&self) -> usize {
        self.unnamed.load(Ordering::Relaxed)
    }

    /// A page of the recorded devices `query` selects, by id.
    pub fn page(&self, query: &ListQuery) -> Page<Arc<Device>> {
        query.select(&self.read(), |d| d.connection().is_some())
    }

    /// `true` when no device is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A receiver that changes whenever a device connects or disconnects.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// `2026-12-05T15:04:05.123Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_483_045_123);
        assert_eq!(rfc3339(t), "2026-12-05T15:04:05.123Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn the_registry_is_bounded_and_remembers_offline_devices() {
        let r = Registry::new(2);
        let a = r.know("a", Some("kitchen".into())).unwrap();
        r.know("b", None).unwrap();
        assert_eq!(r.know("c", None).unwrap_err(), RegisterError::Full);
        // Known again: the same record.
        assert!(Arc::ptr_eq(&a, &r.know("a", None).unwrap()));
        let page = r.page(&ListQuery::default());
        assert_eq!(page.items[0].view().status, DeviceStatus::Offline);
        assert_eq!(page.items[0].view().name.as_deref(), Some("kitchen"));
        assert_eq!(page.next, None);
        assert_eq!(r.online(), 0);
    }
}
