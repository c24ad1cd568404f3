//! The fleet's views: what `GET /v1/devices`, the dashboard's snapshots and `GET /metrics`
//! answer, gathered node by node through the [`Forwarder`](super::Forwarder) and merged as
//! typed values: device lists (one entry per id, the online one preferred, every node's counts
//! of it added up), snapshots (totals summed) and metric families (summed by series,
//! [`MetricSet`]). A node that does not answer is left out, and logged.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use super::{ListQuery, MetricSet, NodeId, Page, Routing};
use crate::registry::{DeviceStatus, DeviceView};

/// `GET /v1/devices`: every known device, sorted by id, with totals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceList {
    /// The devices.
    pub devices: Vec<DeviceView>,
    /// Devices connected.
    pub connected: u64,
    /// Devices known.
    pub known: u64,
}

/// One dashboard snapshot (`GET /v1/events`): totals, and some devices, online first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When it was taken (ms since the Unix epoch).
    pub time_ms: u64,
    /// Devices connected.
    pub connected: u64,
    /// Devices known.
    pub known: u64,
    /// Calls answered successfully so far.
    pub calls_ok: u64,
    /// At most a page of devices: online first, each group by id.
    pub devices: Vec<DeviceView>,
}

fn online(v: &DeviceView) -> bool {
    v.status == DeviceStatus::Online
}

/// Merges device lists into one: one entry per id, an online one preferred (every node knows
/// the allow-list's devices, offline, but one holds a device's connection), sorted by id; the
/// calls, errors and connections an earlier connection made through another node are added to
/// it. `connected` counts the devices online, `known` the ids.
pub fn merge_device_lists(lists: impl IntoIterator<Item = Vec<DeviceView>>) -> DeviceList {
    let mut by_id: BTreeMap<String, DeviceView> = BTreeMap::new();
    for view in lists.into_iter().flatten() {
        match by_id.get_mut(&view.id) {
            Some(kept) if online(kept) || !online(&view) => add_counts(kept, &view),
            Some(kept) => {
                let mut view = view;
                add_counts(&mut view, kept);
                *kept = view;
            }
            None => {
                by_id.insert(view.id.clone(), view);
            }
        }
    }
    let devices: Vec<DeviceView> = by_id.into_values().collect();
    DeviceList {
        connected: devices.iter().filter(|v| online(v)).count() as u64,
        known: devices.len() as u64,
        devices,
    }
}

fn add_counts(into: &mut DeviceView, from: &DeviceView) {
    into.calls = into.calls.saturating_add(from.calls);
    into.errors = into.errors.saturating_add(from.errors);
    into.connections = into.connections.saturating_add(from.connections);
}

/// Merges snapshots: totals summed (`known` at least the distinct ids listed), devices merged
/// as [`merge_device_lists`] does, online first, cut to `max_devices`.
pub fn merge_snapshots(snaps: Vec<Snapshot>, max_devices: usize) -> Snapshot {
    let time_ms = snaps.iter().map(|s| s.time_ms).max().unwrap_or(0);
    let connected = snaps.iter().map(|s| s.connected).sum();
    let known: u64 = snaps.iter().map(|s| s.known).sum();
    let calls_ok = snaps.iter().map(|s| s.calls_ok).sum();
    let list = merge_device_lists(snaps.into_iter().map(|s| s.devices));
    let mut devices = list.devices;
    devices.sort_by(|a, b| online(b).cmp(&online(a)).then_with(|| a.id.cmp(&b.id)));
    devices.truncate(max_devices);
    Snapshot {
        time_ms,
        connected,
        known: known.max(list.known),
        calls_ok,
        devices,
    }
}

impl Routing {
    /// Every node's devices, page by page, merged (`GET /v1/devices`).
    pub async fn device_list(&self) -> DeviceList {
        let nodes = self.forwarder.nodes();
        let lists = join_all(nodes.iter().map(|n| self.node_devices(n))).await;
        merge_device_lists(lists.into_iter().flatten())
    }

    /// One page of the fleet's devices (`GET /v1/devices?online=&after=&limit=`): each node's
    /// page for `query`, merged by id as [`merge_device_lists`] does, cut to the page size.
    /// Every device in the fleet's first page is in some node's first page, so the merge is
    /// exact; a device offline at one node but online at another (the directory says) is not an
    /// offline one.
    pub async fn device_page(&self, query: &ListQuery) -> Page<DeviceView> {
        let size = query.page_size();
        let nodes = self.forwarder.nodes();
        let pages = join_all(
            nodes
                .iter()
                .map(|n| self.forwarder.device_page(n, query.clone())),
        )
        .await;
        let mut more = false;
        let lists = pages.into_iter().filter_map(|p| match p {
            Ok(page) => {
                more |= page.next.is_some();
                Some(page.items)
            }
            Err(e) => {
                tracing::warn!("the device page leaves out a node: {e}");
                None
            }
        });
        let mut devices = merge_device_lists(lists.collect::<Vec<_>>()).devices;
        if query.online == Some(false) {
            devices.retain(|v| {
                !matches!(
                    self.directory.locate(&v.id),
                    super::Holder::Node { online: true, .. }
                )
            });
        }
        if devices.len() > size {
            devices.truncate(size);
            more = true;
        }
        Page {
            next: devices.last().filter(|_| more).map(|v| v.id.clone()),
            items: devices,
        }
    }

    async fn node_devices(&self, node: &NodeId) -> Option<Vec<DeviceView>> {
        let mut all = Vec::new();
        let mut query = ListQuery::default();
        loop {
            match self.forwarder.device_page(node, query.clone()).await {
                Ok(page) => {
                    all.extend(page.items);
                    match page.next {
                        Some(next) => query.after = Some(next),
                        None => return Some(all),
                    }
                }
                Err(e) => {
                    tracing::warn!("the device list leaves out a node: {e}");
                    return None;
                }
            }
        }
    }

    /// Every node's snapshot, merged (`GET /v1/events`).
    pub async fn snapshot(&self, max_devices: usize) -> Snapshot {
        let nodes = self.forwarder.nodes();
        let snaps = join_all(nodes.iter().map(|n| self.forwarder.snapshot(n))).await;
        let snaps = snaps
            .into_iter()
            .filter_map(|s| {
                s.inspect_err(|e| tracing::debug!("a snapshot leaves out a node: {e}"))
                    .ok()
            })
            .collect();
        merge_snapshots(snaps, max_devices)
    }

    /// Every node's metric families, summed (`GET /metrics`).
    pub async fn metric_set(&self) -> MetricSet {
        let nodes = self.forwarder.nodes();
        let sets = join_all(nodes.iter().map(|n| self.forwarder.metrics(n))).await;
        MetricSet::merge(sets.into_iter().filter_map(|s| {
            s.inspect_err(|e| tracing::warn!("the metrics leave out a node: {e}"))
                .ok()
        }))
    }

    /// [`Routing::metric_set`] in the OpenMetrics text format.
    pub async fn metrics_text(&self) -> String {
        self.metric_set().await.to_text()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn view(id: &str, status: DeviceStatus, calls: u64, errors: u64) -> DeviceView {
        DeviceView {
            status,
            calls,
            errors,
            connections: 1,
            ..DeviceView::never_seen(id.to_string(), None)
        }
    }

    #[test]
    fn device_lists_prefer_the_online_entry_and_count_distinct_ids() {
        use DeviceStatus::{Offline, Online};
        let a = vec![view("aa", Online, 5, 0), view("bb", Offline, 1, 1)];
        let b = vec![view("aa", Offline, 2, 0), view("bb", Online, 3, 0)];
        let m = merge_device_lists([a, b]);
        assert_eq!((m.connected, m.known), (2, 2));
        assert_eq!(m.devices[0].id, "aa");
        assert_eq!(m.devices[0].status, Online);
        assert_eq!((m.devices[0].calls, m.devices[0].connections), (7, 2));
        assert_eq!(m.devices[1].status, Online);
        assert_eq!((m.devices[1].calls, m.devices[1].errors), (4, 1));
    }

    #[test]
    fn snapshots_sum_totals_and_cut_the_list() {
        let snap = |time_ms, connected, calls_ok, device| Snapshot {
            time_ms,
            connected,
            known: 1,
            calls_ok,
            devices: vec![device],
        };
        let s1 = snap(5, 1, 3, view("b", DeviceStatus::Online, 0, 0));
        let s2 = snap(7, 0, 4, view("a", DeviceStatus::Offline, 0, 0));
        let m = merge_snapshots(vec![s1, s2], 1);
        assert_eq!((m.time_ms, m.calls_ok, m.connected, m.known), (7, 7, 1, 2));
        assert_eq!(m.devices.len(), 1);
        assert_eq!(m.devices[0].id, "b");
    }

    #[test]
    fn the_bodies_keep_the_api_s_json() {
        let list = merge_device_lists([vec![view("aa", DeviceStatus::Online, 1, 0)]]);
        let json = serde_json::to_value(&list).unwrap();
        assert_eq!(json["devices"][0]["status"], "online");
        assert_eq!(json["connected"], 1);
        assert_eq!(json["known"], 1);
        let back: DeviceList = serde_json::from_value(json).unwrap();
        assert_eq!(back, list);
    }
}
