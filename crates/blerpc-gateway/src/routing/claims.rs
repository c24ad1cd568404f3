//! Claims: which node holds which device, ordered by epoch, and the typed messages that carry
//! them from a node to a directory.
//!
//! A node reports its devices as a stream of [`PresenceMessage`]s (one JSON object per line of
//! `GET /internal/v1/presence` on one box): a [`Hello`](PresenceMessage::Hello) with the
//! version, a [`Claim`](PresenceMessage::Claim) for every device it holds, a
//! [`Synced`](PresenceMessage::Synced), then a claim or a
//! [`Release`](PresenceMessage::Release) as devices come and go. A [`ClaimTable`] applies them:
//!
//! - a claim wins unless the table holds one with a larger epoch (the device has reconnected
//!   since, wherever it did);
//! - a release takes the device offline only if it is about the claim in force (the same
//!   epoch): the node a device left cannot take it offline on the node it moved to;
//! - a released device stays in the table, offline, with the node that held it last;
//! - after `Synced`, every device the node had claimed and did not claim again is gone from it,
//!   and when its stream ends, all of them are.

use std::collections::{BTreeMap, HashSet};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::{Directory, Epoch, Holder, ListQuery, NodeId, Page, Presence};

/// The version of the presence messages.
pub const PRESENCE_VERSION: u32 = 1;

/// What a node tells a directory about its devices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PresenceMessage {
    /// The first message: the version of the messages that follow ([`PRESENCE_VERSION`]).
    Hello {
        /// The version.
        version: u32,
    },
    /// The node holds `device` over the connection made at `epoch`.
    Claim {
        /// The device id.
        device: String,
        /// The connection's epoch.
        epoch: Epoch,
        /// When the connection was made (ms since the Unix epoch).
        since_ms: u64,
    },
    /// The connection of `device` made at `epoch` has ended.
    Release {
        /// The device id.
        device: String,
        /// The connection's epoch.
        epoch: Epoch,
    },
    /// The node has claimed every device it holds: the ones it claimed before `Hello` and not
    /// since are gone.
    Synced,
    /// A message of a later version (ignored).
    #[serde(other)]
    Unknown,
}

/// Every device's claim in force, by device id (see the [module docs](self)).
#[derive(Debug)]
pub struct ClaimTable {
    entries: RwLock<BTreeMap<String, Presence>>,
    changes: watch::Sender<u64>,
    /// The node that answers for devices nobody has claimed.
    first: Option<NodeId>,
}

impl ClaimTable {
    /// An empty table; devices nobody has claimed are located at `first` (the node that answers
    /// for strangers), or at [`Holder::Nobody`].
    pub fn new(first: Option<NodeId>) -> ClaimTable {
        ClaimTable {
            entries: RwLock::new(BTreeMap::new()),
            changes: watch::Sender::new(0),
            first,
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Presence>> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Presence>> {
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.changes.send_modify(|g| *g += 1);
    }

    /// `node` holds `device` over the connection of `epoch`; `false` if the table has a newer
    /// claim.
    pub fn claim(&self, node: &NodeId, device: &str, epoch: Epoch, since_ms: u64) -> bool {
        let won = {
            let mut entries = self.write();
            match entries.get(device) {
                // A newer connection's claim is in force, or this one has ended.
                Some(e) if e.epoch > epoch || (e.epoch == epoch && !e.online) => false,
                Some(e) if e.epoch == epoch => return true,
                _ => {
                    enter(&mut entries, node, device, epoch, Some(since_ms));
                    true
                }
            }
        };
        if won {
            self.changed();
        }
        won
    }

    /// `node`'s connection of `device` made at `epoch` has ended; `false` if that is not the
    /// claim in force (a newer one is). A device the table has not seen is recorded offline at
    /// `node`.
    pub fn release(&self, node: &NodeId, device: &str, epoch: Epoch) -> bool {
        let released = {
            let mut entries = self.write();
            match entries.get_mut(device) {
                Some(e) if e.epoch == epoch && e.node == *node && e.online => {
                    e.online = false;
                    true
                }
                Some(_) => false,
                None => {
                    enter(&mut entries, node, device, epoch, None);
                    true
                }
            }
        };
        if released {
            self.changed();
        }
        released
    }

    /// Takes offline every device `node` holds but `keep`.
    pub fn release_all_but(&self, node: &NodeId, keep: &HashSet<String>) -> usize {
        let mut n = 0;
        {
            let mut entries = self.write();
            for e in entries.values_mut() {
                if e.online && e.node == *node && !keep.contains(&e.device) {
                    e.online = false;
                    n += 1;
                }
            }
        }
        if n > 0 {
            self.changed();
        }
        n
    }

    /// Takes offline every device held by a node not in `alive`; returns each device, node and
    /// epoch it took offline.
    pub fn release_nodes_but(&self, alive: &HashSet<NodeId>) -> Vec<(String, NodeId, Epoch)> {
        let mut released = Vec::new();
        {
            let mut entries = self.write();
            for e in entries.values_mut() {
                if e.online && !alive.contains(&e.node) {
                    e.online = false;
                    released.push((e.device.clone(), e.node.clone(), e.epoch));
                }
            }
        }
        if !released.is_empty() {
            self.changed();
        }
        released
    }

    /// Applies what `node` said in `message`; `synced` collects the devices claimed since its
    /// `Hello` until its `Synced`.
    pub fn apply(
        &self,
        node: &NodeId,
        message: PresenceMessage,
        synced: &mut Option<HashSet<String>>,
    ) {
        match message {
            PresenceMessage::Hello { .. } => *synced = Some(HashSet::new()),
            PresenceMessage::Claim {
                device,
                epoch,
                since_ms,
            } => {
                self.claim(node, &device, epoch, since_ms);
                if let Some(seen) = synced {
                    seen.insert(device);
                }
            }
            PresenceMessage::Release { device, epoch } => {
                self.release(node, &device, epoch);
            }
            PresenceMessage::Synced => {
                if let Some(seen) = synced.take() {
                    self.release_all_but(node, &seen);
                }
            }
            PresenceMessage::Unknown => {}
        }
    }

    /// Devices online.
    pub fn online(&self) -> usize {
        self.read().values().filter(|e| e.online).count()
    }

    /// The entry of `device`.
    pub fn get(&self, device: &str) -> Option<Presence> {
        self.read().get(device).cloned()
    }
}

/// Records `node`'s claim of `device` at `epoch`: online since `since_ms`, or (`None`)
/// already released.
fn enter(
    entries: &mut BTreeMap<String, Presence>,
    node: &NodeId,
    device: &str,
    epoch: Epoch,
    since_ms: Option<u64>,
) {
    let entry = Presence {
        device: device.to_string(),
        node: node.clone(),
        epoch,
        online: since_ms.is_some(),
        since_ms: since_ms.unwrap_or(0),
    };
    entries.insert(device.to_string(), entry);
}

impl Directory for ClaimTable {
    fn locate(&self, device: &str) -> Holder {
        match self.read().get(device) {
            Some(e) => Holder::Node {
                node: e.node.clone(),
                online: e.online,
            },
            None => match &self.first {
                Some(node) => Holder::Node {
                    node: node.clone(),
                    online: false,
                },
                None => Holder::Nobody,
            },
        }
    }

    fn page(&self, query: &ListQuery) -> Page<Presence> {
        query.select(&self.read(), |e| e.online)
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn node(n: &str) -> NodeId {
        NodeId::new(n)
    }

    fn at(t: &ClaimTable, device: &str) -> Holder {
        t.locate(device)
    }

    fn on(n: &str) -> Holder {
        Holder::Node {
            node: node(n),
            online: true,
        }
    }

    fn off(n: &str) -> Holder {
        Holder::Node {
            node: node(n),
            online: false,
        }
    }

    #[test]
    fn a_stale_claim_or_release_never_wins() {
        let t = ClaimTable::new(None);
        assert_eq!(at(&t, "d"), Holder::Nobody);
        // The device connects to w0, then to w1; w0's news of its older connection come late.
        assert!(t.claim(&node("w1"), "d", Epoch(20), 2));
        assert!(!t.claim(&node("w0"), "d", Epoch(10), 1));
        assert!(!t.release(&node("w0"), "d", Epoch(10)));
        assert_eq!(at(&t, "d"), on("w1"));
        // A release of the claim in force takes it offline, at the node that held it.
        assert!(t.release(&node("w1"), "d", Epoch(20)));
        assert_eq!(at(&t, "d"), off("w1"));
        assert_eq!(t.online(), 0);
        // An old claim does not come back after the release either, nor the ended one; a
        // newer one does.
        assert!(!t.claim(&node("w0"), "d", Epoch(10), 1));
        assert!(!t.claim(&node("w1"), "d", Epoch(20), 2));
        assert_eq!(at(&t, "d"), off("w1"));
        assert!(t.claim(&node("w0"), "d", Epoch(30), 3));
        assert_eq!(at(&t, "d"), on("w0"));
        // A device released before the table heard of it is known, offline, where it was.
        assert!(t.release(&node("w1"), "e", Epoch(5)));
        assert_eq!(at(&t, "e"), off("w1"));
        assert_eq!(t.get("e").map(|p| p.epoch), Some(Epoch(5)));
    }

    #[test]
    fn a_resync_takes_off_what_the_node_no_longer_claims() {
        let t = ClaimTable::new(Some(node("w0")));
        assert_eq!(at(&t, "stranger"), off("w0"));
        t.claim(&node("w1"), "a", Epoch(1), 0);
        t.claim(&node("w1"), "b", Epoch(2), 0);
        t.claim(&node("w0"), "c", Epoch(3), 0);
        let mut synced = None;
        let w1 = node("w1");
        for line in [
            r#"{"type":"hello","version":1}"#,
            r#"{"type":"claim","device":"b","epoch":2,"since_ms":0}"#,
            r#"{"type":"a_later_kind","x":1}"#,
            r#"{"type":"synced"}"#,
        ] {
            t.apply(&w1, serde_json::from_str(line).unwrap(), &mut synced);
        }
        assert_eq!(at(&t, "a"), off("w1"));
        assert_eq!(at(&t, "b"), on("w1"));
        assert_eq!(at(&t, "c"), on("w0"));
        assert_eq!(t.release_all_but(&w1, &HashSet::new()), 1);
        assert_eq!(t.online(), 1);
    }

    #[test]
    fn messages_are_tagged_json() {
        let m = PresenceMessage::Claim {
            device: "ab".into(),
            epoch: Epoch(7),
            since_ms: 9,
        };
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(
            text,
            r#"{"type":"claim","device":"ab","epoch":7,"since_ms":9}"#
        );
        assert_eq!(serde_json::from_str::<PresenceMessage>(&text).unwrap(), m);
        assert_eq!(
            serde_json::to_string(&PresenceMessage::Hello { version: 1 }).unwrap(),
            r#"{"type":"hello","version":1}"#
        );
    }

    #[test]
    fn pages_filter_and_follow_the_cursor() {
        let t = ClaimTable::new(None);
        for (i, d) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            t.claim(&node("w0"), d, Epoch(i as u64 + 1), 0);
        }
        t.release(&node("w0"), "c", Epoch(3));
        let mut q = ListQuery {
            online: Some(true),
            after: None,
            limit: 2,
        };
        let mut seen = Vec::new();
        loop {
            let p = t.page(&q);
            seen.extend(p.items.iter().map(|e| e.device.clone()));
            match p.next {
                Some(next) => q.after = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, ["a", "b", "d", "e"]);
        let offline = t.page(&ListQuery {
            online: Some(false),
            ..ListQuery::default()
        });
        assert_eq!(offline.items.len(), 1);
        assert_eq!(offline.items[0].device, "c");
        assert_eq!(offline.next, None);
    }
}
