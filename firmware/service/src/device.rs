//! What the firmware says about itself and its link when a central calls `blerpc.diagnostics`
//! (the diagnostics extension, `docs/protocol.md` "Diagnostics").
//!
//! The application keeps one [`Device`] across connections (boot time, version, build id,
//! connections, link losses, the core's counts since boot) and hands it to each
//! [`Connection`](crate::Connection), which adds its own counts and answers the command with
//! the link as the BLE stack last reported it (the core's [`LinkFields`], set by the
//! application as the stack's events arrive).

use blerpc_proto::Instant;
use blerpc_proto::connection::Counters;
use blerpc_proto::wire::diagnostics::{Diagnostics, Field, LinkFields, List};
use blerpc_proto::wire::error_code::ErrorCode;

/// The longest answer: every field, 17 error codes and every reason (about 600 bytes; the
/// test with every count at its largest checks it fits).
pub const ANSWER_BYTES: usize = 768;

/// Why a link field is missing when the BLE stack has not reported it.
const NOT_REPORTED: &str = "not reported by the BLE stack yet";
/// Why the build id is missing.
const NO_BUILD_ID: &str = "not set at build time (BLERPC_BUILD_ID)";
/// Why the RAM high-water mark is missing.
const NO_RAM_MARK: &str = "not measured by this build (the Cortex-M builds measure it: statics \
                           and the painted stack's deepest point); see outbox_high_water and \
                           reassembly_high_water";

/// The device across connections (see the [module docs](self)).
#[derive(Clone, Copy, Debug)]
pub struct Device {
    /// When it booted (the core's clock).
    pub booted: Instant,
    /// The firmware's version.
    pub version: &'static str,
    /// The build's id, if the build set one.
    pub build_id: Option<&'static str>,
    /// Connections accepted since boot.
    pub connections: u64,
    /// Connections lost to the link (supervision timeout) since boot.
    pub link_losses: u64,
    /// What the core counted since boot (all connections).
    pub counters: Counters,
    /// Reads the most RAM used since boot, bytes (on Cortex-M `ram::high_water`:
    /// the statics and the stack's deepest point); `None`: not measured, said with its reason.
    pub ram_high_water: Option<fn() -> u32>,
}

impl Device {
    /// A device that booted at `booted`.
    pub fn new(booted: Instant, version: &'static str, build_id: Option<&'static str>) -> Self {
        Device {
            booted,
            version,
            build_id,
            connections: 0,
            link_losses: 0,
            counters: Counters::default(),
            ram_high_water: None,
        }
    }
}

/// Writes the diagnostics answer into `out` for a connection at `now` with ATT MTU
/// `att_mtu`; returns its length, or `None` if `out` is too short (never with
/// [`ANSWER_BYTES`]).
pub fn answer(
    device: &Device,
    link: &LinkFields,
    att_mtu: usize,
    now: Instant,
    out: &mut [u8],
) -> Option<usize> {
    let mut unavailable: [(Field, &str); 9] = [(Field::Other(0), ""); 9];
    let mut missing = 0;
    let mut miss = |field: Field, why: &'static str| {
        if let Some(slot) = unavailable.get_mut(missing) {
            *slot = (field, why);
            missing += 1;
        }
    };
    for field in link.missing() {
        miss(field, NOT_REPORTED);
    }
    if device.build_id.is_none() {
        miss(Field::BuildId, NO_BUILD_ID);
    }
    let ram_high_water = device.ram_high_water.map(|read| read());
    if ram_high_water.is_none() {
        miss(Field::RamHighWater, NO_RAM_MARK);
    }
    let mut errors = [(0u8, 0u64); blerpc_proto::connection::COUNTED_ERROR_CODES + 1];
    let mut codes = 0;
    for (slot, entry) in errors.iter_mut().zip(device.counters.error_counts()) {
        *slot = entry;
        codes += 1;
    }
    let busy = device
        .counters
        .errors
        .get(usize::from(ErrorCode::Busy.to_byte()))
        .copied()
        .unwrap_or(0);
    let d = Diagnostics {
        att_mtu: u32::try_from(att_mtu).ok(),
        uptime_ms: Some(
            u64::try_from(now.saturating_duration_since(device.booted).as_millis())
                .unwrap_or(u64::MAX),
        ),
        build_id: device.build_id,
        version: Some(device.version),
        connections: Some(device.connections),
        calls: Some(u64::from(device.counters.requests)),
        errors: List::Items(errors.get(..codes).unwrap_or(&[])),
        busy: Some(u64::from(busy)),
        reassembly_drops: Some(u64::from(device.counters.reassembly_drops)),
        link_losses: Some(device.link_losses),
        ram_high_water,
        outbox_high_water: Some(device.counters.outbox_high_water),
        reassembly_high_water: Some(device.counters.reassembly_high_water),
        unavailable: List::Items(unavailable.get(..missing).unwrap_or(&[])),
        ..Diagnostics::default()
    }
    .with_link(link);
    d.emit(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;

    #[test]
    fn the_answer_fits_with_every_field_and_reason() {
        let mut device = Device::new(Instant::from_millis(0), "0.5.0", None);
        device.counters.errors = [u32::MAX; 16];
        device.counters.other_errors = u32::MAX;
        device.connections = u64::MAX;
        let mut out = [0u8; ANSWER_BYTES];
        let now = Instant::from_millis(0) + Duration::from_secs(3600);
        let n = answer(&device, &LinkFields::default(), 247, now, &mut out).expect("fits");
        let d = Diagnostics::parse(&out[..n]).unwrap();
        assert_eq!(d.uptime_ms, Some(3_600_000));
        assert_eq!(d.errors().count(), 17);
        assert_eq!(d.unavailable().count(), 8);
        assert_eq!(d.reason(Field::RssiDbm), Some(NOT_REPORTED));
        assert_eq!(d.reason(Field::BuildId), Some(NO_BUILD_ID));
    }

    #[test]
    fn a_reported_link_is_answered() {
        let device = Device::new(Instant::from_millis(0), "0.5.0", Some("abc"));
        let link = LinkFields {
            conn_interval_us: Some(15_000),
            peripheral_latency: Some(0),
            supervision_timeout_ms: Some(4_000),
            phy: Some(2),
            data_length: Some(251),
            rssi_dbm: Some(-60),
        };
        let mut out = [0u8; ANSWER_BYTES];
        let n = answer(&device, &link, 247, Instant::from_millis(5), &mut out).unwrap();
        let d = Diagnostics::parse(&out[..n]).unwrap();
        assert_eq!(d.conn_interval_us, Some(15_000));
        assert_eq!(d.rssi_dbm, Some(-60));
        assert_eq!(d.build_id, Some("abc"));
        assert_eq!(d.unavailable().count(), 1, "only the RAM mark");
        assert_eq!(d.reason(Field::RamHighWater), Some(NO_RAM_MARK));
    }

    #[test]
    fn the_ram_mark_is_read_when_the_answer_is_written() {
        fn mark() -> u32 {
            41_234
        }
        let device = Device {
            ram_high_water: Some(mark),
            ..Device::new(Instant::from_millis(0), "0.5.0", Some("abc"))
        };
        let mut out = [0u8; ANSWER_BYTES];
        let n = answer(
            &device,
            &LinkFields::default(),
            247,
            Instant::from_millis(5),
            &mut out,
        )
        .unwrap();
        let d = Diagnostics::parse(&out[..n]).unwrap();
        assert_eq!(d.ram_high_water, Some(41_234));
        assert_eq!(d.reason(Field::RamHighWater), None);
    }
}
