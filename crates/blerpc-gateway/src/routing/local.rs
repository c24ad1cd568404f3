//! One process: the gateway's registry is its directory, and a request reaches its device in
//! process (a call straight to its handler, the rest through the device API's router). The same pieces serve a worker's part of a box
//! (its device pages, snapshot and metric families, which its front fetches over HTTP).

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures_util::future::{BoxFuture, ready};
use tokio::sync::watch;

use super::{
    Directory, ForwardError, Forwarder, Holder, ListQuery, MetricSet, NodeId, Page, Presence,
    Snapshot, unix_ms_since,
};
use crate::Gateway;
use crate::http::{MAX_DEVICES_PER_SNAPSHOT, Problem};
use crate::registry::DeviceView;

/// The name of the one node of a single-process gateway.
pub static LOCAL: LazyLock<NodeId> = LazyLock::new(|| NodeId::new("local"));

impl Directory for Gateway {
    fn locate(&self, device: &str) -> Holder {
        match self.registry().get(device) {
            Some(d) => Holder::Node {
                node: LOCAL.clone(),
                online: d.connection().is_some(),
            },
            // The gateway answers for strangers and allow-listed devices itself.
            None => Holder::Nobody,
        }
    }

    fn page(&self, query: &ListQuery) -> Page<Presence> {
        let page = self.registry().page(query);
        Page {
            items: page.items.iter().map(|d| d.presence(&LOCAL)).collect(),
            next: page.next,
        }
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.registry().changes()
    }
}

impl Gateway {
    /// A page of the devices this gateway knows, by id: those it has recorded and those of its
    /// allow-list that have not connected (offline).
    pub fn device_page(&self, query: &ListQuery) -> Page<DeviceView> {
        let size = query.page_size();
        let recorded = self.registry().page(&ListQuery {
            limit: size,
            ..query.clone()
        });
        let listed: Vec<DeviceView> = if query.online == Some(true) {
            Vec::new()
        } else {
            self.inner
                .known
                .after(query.after.as_deref(), size + 1, |id| {
                    self.registry().get(id).is_none()
                })
                .into_iter()
                .map(|(id, name)| self.named(DeviceView::never_seen(id, Some(name))))
                .collect()
        };
        // The first `size` of the two sorted runs; the recorded run is complete up to its
        // cursor, the listed one up to its last id.
        let recorded_end = recorded.next.clone();
        let mut items: Vec<DeviceView> = recorded
            .items
            .iter()
            .map(|d| self.named(d.view()))
            .collect();
        items.extend(listed);
        items.sort_by(|a, b| a.id.cmp(&b.id));
        if let Some(end) = &recorded_end {
            items.retain(|v| v.id <= *end);
        }
        let next = if items.len() > size {
            items.truncate(size);
            items.last().map(|v| v.id.clone())
        } else {
            recorded_end.filter(|_| items.len() == size)
        };
        Page { items, next }
    }

    /// `view` with this gateway's fleet name.
    fn named(&self, mut view: DeviceView) -> DeviceView {
        view.gateway = self.fleet_name().map(str::to_string);
        view
    }

    /// The view of device `id`, if it is known.
    pub fn device_view(&self, id: &str) -> Option<DeviceView> {
        let view = match self.registry().get(id) {
            Some(d) => Some(d.view()),
            None => self
                .inner
                .known
                .name_of(id)
                .map(|name| DeviceView::never_seen(id.to_string(), Some(name))),
        };
        view.map(|v| self.named(v))
    }

    /// The dashboard's snapshot: totals, and at most `max_devices` devices, online first.
    pub fn snapshot(&self, max_devices: usize) -> Snapshot {
        let mut devices = self
            .device_page(&ListQuery {
                online: Some(true),
                after: None,
                limit: max_devices,
            })
            .items;
        if devices.len() < max_devices {
            let offline = self.device_page(&ListQuery {
                online: Some(false),
                after: None,
                limit: max_devices - devices.len(),
            });
            devices.extend(offline.items);
        }
        Snapshot {
            time_ms: unix_ms_since(std::time::SystemTime::now()),
            connected: self.registry().online() as u64,
            known: self.known() as u64,
            calls_ok: self.metrics().calls("ok"),
            devices,
        }
    }

    /// The metric families of this gateway and its device listeners.
    pub fn metric_set(&self) -> MetricSet {
        MetricSet::of_registry(self.metrics().server.registry())
    }
}

/// A request for an unknown node: 404.
pub(crate) fn unknown_node(node: &NodeId) -> Response {
    Problem::new(
        axum::http::StatusCode::NOT_FOUND,
        "not_found",
        "Not found",
        format!("no gateway node {node}"),
    )
    .into_response()
}

/// Delivers requests in process (`http::on_holder`): a call straight to its handler,
/// anything else through the device API's router.
#[derive(Clone, Debug)]
pub struct LocalForwarder {
    gateway: Gateway,
    devices: Router,
}

impl LocalForwarder {
    /// The forwarder of `gateway`.
    pub fn new(gateway: Gateway) -> LocalForwarder {
        LocalForwarder {
            devices: crate::http::device_router(gateway.clone()),
            gateway,
        }
    }

    fn check(&self, node: &NodeId) -> Result<(), ForwardError> {
        if node == &*LOCAL {
            Ok(())
        } else {
            Err(ForwardError::UnknownNode(node.clone()))
        }
    }
}

impl Forwarder for LocalForwarder {
    fn nodes(&self) -> Vec<NodeId> {
        vec![LOCAL.clone()]
    }

    fn forward(&self, to: &Holder, request: Request) -> BoxFuture<'static, Response> {
        if let Holder::Node { node, .. } = to
            && node != &*LOCAL
        {
            return Box::pin(ready(unknown_node(node)));
        }
        let devices = self.devices.clone();
        let gateway = self.gateway.clone();
        Box::pin(async move { crate::http::on_holder(&gateway, devices, request).await })
    }

    fn device_page(
        &self,
        node: &NodeId,
        query: ListQuery,
    ) -> BoxFuture<'static, Result<Page<DeviceView>, ForwardError>> {
        let page = self.check(node).map(|()| self.gateway.device_page(&query));
        Box::pin(ready(page))
    }

    fn snapshot(&self, node: &NodeId) -> BoxFuture<'static, Result<Snapshot, ForwardError>> {
        let snap = self
            .check(node)
            .map(|()| self.gateway.snapshot(MAX_DEVICES_PER_SNAPSHOT));
        Box::pin(ready(snap))
    }

    fn metrics(&self, node: &NodeId) -> BoxFuture<'static, Result<MetricSet, ForwardError>> {
        Box::pin(ready(self.check(node).map(|()| self.gateway.metric_set())))
    }
}
