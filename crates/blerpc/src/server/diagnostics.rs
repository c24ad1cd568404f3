//! The server's answer to `blerpc.diagnostics` (`docs/protocol.md` "Diagnostics"): the
//! connection's link as the link reports it, the server's uptime, version and build id, and
//! what all its connections counted since it started ([`Metrics::totals`](crate::metrics::Metrics::totals)).

use blerpc_proto::wire::diagnostics::{Diagnostics, Field, List};
use blerpc_proto::wire::error_code::ErrorCode;

use super::connection::Connection;

/// What the answer says of the server itself.
#[derive(Debug)]
pub(super) struct Facts {
    pub(super) version: String,
    pub(super) build_id: Option<String>,
}

/// Why the link fields are missing on a link without a BLE link layer.
const NOT_BLE: &str = "not a BLE link: no link layer to report";
/// Why a link field is missing on a BLE link whose stack does not give it.
const NOT_REPORTED: &str = "not reported by this link's BLE stack";
/// Why the memory high-water mark is missing.
const NO_RAM_MARK: &str =
    "not measured by the runtime server: a process's memory is for the OS to report";
/// Why the build id is missing.
const NO_BUILD_ID: &str = "not set (ServerConfig::build_id)";

impl Drop for Connection {
    /// What the connection counted in its last turn reaches the metrics too, however it ends.
    fn drop(&mut self) {
        self.add_counters();
    }
}

impl Connection {
    /// Adds what the core counted since the last time to the server's metrics (every turn of
    /// the connection's loop, so `/metrics` is current).
    pub(super) fn add_counters(&mut self) {
        let counted = self.peripheral.take_counters();
        self.ticket.metrics().add_counters(&counted);
    }

    /// The diagnostics answer's protobuf bytes.
    pub(super) fn diagnostics(&self) -> Vec<u8> {
        let totals = self.ticket.metrics().totals();
        let link = self.link.as_ref().map(|probe| probe());
        let why = if link.is_some() {
            NOT_REPORTED
        } else {
            NOT_BLE
        };
        let link = link.unwrap_or_default();
        let mut unavailable: Vec<(Field, &str)> = link.missing().map(|f| (f, why)).collect();
        if self.facts.build_id.is_none() {
            unavailable.push((Field::BuildId, NO_BUILD_ID));
        }
        unavailable.push((Field::RamHighWater, NO_RAM_MARK));
        let busy = totals
            .errors
            .iter()
            .find(|(code, _)| *code == ErrorCode::Busy.to_byte())
            .map_or(0, |(_, n)| *n);
        let mark = |v: u64| Some(u32::try_from(v).unwrap_or(u32::MAX));
        let answer = Diagnostics {
            att_mtu: u32::try_from(self.peripheral.config().att_mtu).ok(),
            uptime_ms: Some(u64::try_from(totals.uptime.as_millis()).unwrap_or(u64::MAX)),
            build_id: self.facts.build_id.as_deref(),
            version: Some(&self.facts.version),
            connections: Some(totals.connections),
            calls: Some(totals.calls),
            errors: List::Items(&totals.errors),
            busy: Some(busy),
            reassembly_drops: Some(totals.reassembly_drops),
            link_losses: Some(totals.link_losses),
            ram_high_water: None,
            outbox_high_water: mark(totals.outbox_high_water),
            reassembly_high_water: mark(totals.reassembly_high_water),
            unavailable: List::Items(&unavailable),
            ..Diagnostics::default()
        }
        .with_link(&link);
        // 1 KiB holds it with every field and reason; longer configured strings grow it.
        let mut out = vec![0u8; 1024];
        loop {
            match answer.emit(&mut out) {
                Ok(len) => {
                    out.truncate(len);
                    return out;
                }
                Err(_) => out.resize(out.len() * 2, 0),
            }
        }
    }
}
