//! Platform profiles: the centrals of the published bleRPC figures, as a few physical
//! parameters each.
//!
//! A profile is what the central's controller and OS do with a connection: the PHY, how long
//! the controller lets a connection event run (which sets packets per event), how many
//! write-without-response packets the OS gets into the controller per event, how long a write
//! takes through the OS stack, and the interval the central starts with. The link itself (the
//! interval the peripheral asks for, the ATT MTU) is set separately.
//!
//! ## How the numbers were derived
//! From public facts (`benchmarks.md` §4: time on air, 2M support, platform throughput reports,
//! initial intervals) and the CI 15 ms tables (§1.1), one parameter per mechanism, never one per
//! table cell. At 2M a full packet pair (244-byte container: 251-byte PDU, 1,048 µs, an empty
//! PDU back, two T_IFS) takes 1,392 µs; a pair with a small container (a stream item, ~55 LL
//! bytes) takes ~610 µs. A sequential call costs one event for the request plus
//! `ceil(containers / packets per event)` events for the response.
//!
//! - **Apple (macOS, iOS, Chrome on macOS)**: the 8 KB read (35 containers) takes 141–144 ms,
//!   ≈ 9.5 events, i.e. ~4 full packets per event: an event budget of 6.5 ms (4 × 1,392 µs fits,
//!   5 does not). Public reports of ~300–400 kbit/s for iPhones at 2M, CI 15 ms agree
//!   (4 × 244 B per 15 ms = 520 kbit/s on air, minus the request events).
//! - **iOS writes**: the 20-item upload (21 writes) takes 75 ms = 5 events: 4 events of writes,
//!   so the iPhone gets 6 writes without response into its controller per event
//!   (CoreBluetooth's flow control); macOS and Chrome are limited by the event budget only
//!   (59 / 56 ms = 4 events).
//! - **Chrome on macOS** talks to the same CoreBluetooth stack and controller as bleak on macOS,
//!   so it has the same radio parameters; its figures match macOS's to within 2 ms.
//! - **Android (Pixel 5)**: the 8 KB read in 95.8 ms (6.4 events) needs 7–8 full packets per
//!   event: a 12 ms budget (8 × 1,392 µs). The round trip of 38.2 ms (2.55 events) says that a
//!   write crosses the Android stack (app → binder → Bluetooth process → controller) in a time
//!   that misses the next event a bit more than half the time: a host delay uniform in
//!   8–22 ms (P(> 14 ms) = 0.57). The upload (118 ms, 7.9 events) says 4 writes per event
//!   (the app waits for `onCharacteristicWrite` after each write).
//! - **Initial intervals** (published): 30 ms on macOS and iOS (and Chrome on macOS), 45 ms on
//!   the Pixel 5; the peripheral asks for 15 ms 5 s after connect.
//! - **nRF54L15 as central** (the "full-event" profile, no published figures): a Nordic
//!   SoftDevice controller lets the event run to the end of the interval when both sides have
//!   data, with no OS in between; it starts at the 15 ms the C central asks for
//!   (`BT_LE_CONN_PARAM_INIT(12, 24, 0, 100)`).

use std::time::Duration;

use super::params::{DelayRange, LinkParams, Phy};

/// A central platform.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    /// Short name (`--profile`): `macos`, `ios`, `android`, `web`, `nrf54l15`.
    pub name: &'static str,
    /// The name the publication uses.
    pub label: &'static str,
    /// The PHY the central uses.
    pub phy: Phy,
    /// How long the central's controller lets one event run (`None`: the whole interval).
    pub event_budget: Option<Duration>,
    /// Writes without response the OS gets into the controller per event (`None`: no cap).
    pub central_writes_per_event: Option<usize>,
    /// The OS stack's delay from a write to the controller.
    pub central_host_delay: DelayRange,
    /// The interval the central connects with, before the peripheral's request applies.
    pub initial_interval: Duration,
    /// Whether the publication has figures for this central.
    pub published: bool,
}

impl Profile {
    /// The link for this central with the peripheral's requested `interval` and `att_mtu`
    /// (everything else at its default).
    pub fn link_params(&self, interval: Duration, att_mtu: usize) -> LinkParams {
        LinkParams {
            conn_interval: interval,
            initial_interval: Some(self.initial_interval),
            att_mtu,
            phy: self.phy,
            event_budget: self.event_budget.unwrap_or(interval),
            central_writes_per_event: self.central_writes_per_event,
            central_host_delay: self.central_host_delay,
            ..LinkParams::default()
        }
    }
}

/// Python + bleak on macOS (CoreBluetooth).
pub const MACOS: Profile = Profile {
    name: "macos",
    label: "Python/macOS (bleak)",
    phy: Phy::Le2M,
    event_budget: Some(Duration::from_micros(6500)),
    central_writes_per_event: None,
    central_host_delay: DelayRange::ZERO,
    initial_interval: Duration::from_millis(30),
    published: true,
};

/// iPhone 16 (CoreBluetooth).
pub const IOS: Profile = Profile {
    name: "ios",
    label: "iOS (iPhone 16)",
    central_writes_per_event: Some(6),
    ..MACOS
};

/// Pixel 5 (Android).
pub const ANDROID: Profile = Profile {
    name: "android",
    label: "Android (Pixel 5)",
    phy: Phy::Le2M,
    event_budget: Some(Duration::from_millis(12)),
    central_writes_per_event: Some(4),
    central_host_delay: DelayRange::micros(8_000, 22_000),
    initial_interval: Duration::from_millis(45),
    published: true,
};

/// Chrome's Web Bluetooth on macOS: the CoreBluetooth radio of [`MACOS`].
pub const WEB: Profile = Profile {
    name: "web",
    label: "Web (Chrome/macOS)",
    ..MACOS
};

/// An nRF54L15 as central: full connection events, no OS between app and controller.
pub const NRF54L15: Profile = Profile {
    name: "nrf54l15",
    label: "nRF54L15 central (full events)",
    phy: Phy::Le2M,
    event_budget: None,
    central_writes_per_event: None,
    central_host_delay: DelayRange::ZERO,
    initial_interval: Duration::from_millis(15),
    published: false,
};

/// Every profile, the published ones first, in the publication's column order.
pub const ALL: [Profile; 5] = [MACOS, IOS, ANDROID, WEB, NRF54L15];

/// The profile with this short name (case-insensitive).
pub fn by_name(name: &str) -> Option<Profile> {
    ALL.into_iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_valid_links() {
        for p in ALL {
            let l = p.link_params(Duration::from_millis(15), 247);
            assert!(l.validate().is_ok(), "{}", p.name);
            assert_eq!(by_name(p.name), Some(p));
        }
        assert_eq!(by_name("Android"), Some(ANDROID));
        assert_eq!(by_name("zx81"), None);
    }

    #[test]
    fn the_apple_budget_fits_four_full_pairs_and_android_eight() {
        let l = MACOS.link_params(Duration::from_millis(15), 247);
        let full = l.pair_time(0, 251);
        assert_eq!(full, Duration::from_micros(1392));
        let fits = |b: Duration| (b.as_nanos() / full.as_nanos()) as usize;
        assert_eq!(fits(l.event_budget), 4);
        let a = ANDROID.link_params(Duration::from_millis(15), 247);
        assert_eq!(fits(a.event_budget), 8);
    }
}
