//! The physical parameters of a simulated connection.

use std::time::Duration;

/// The inter-frame space between two packets of a connection event: 150 µs.
pub const T_IFS: Duration = Duration::from_micros(150);

/// Bytes the link layer carries per container on top of the bleRPC data: 3 bytes of ATT header
/// and 4 bytes of L2CAP header. A 244-byte container (ATT MTU 247) is a full 251-byte LL PDU.
pub const LL_OVERHEAD: usize = 7;

/// The largest link-layer payload (Data Length Extension): 251 bytes.
pub const MAX_DATA_LENGTH: usize = 251;

/// The link-layer payload without Data Length Extension: 27 bytes.
pub const MIN_DATA_LENGTH: usize = 27;

/// The smallest ATT MTU (Core spec): 23 bytes.
pub const MIN_ATT_MTU: usize = 23;

/// The largest ATT MTU: 517 bytes.
pub const MAX_ATT_MTU: usize = 517;

/// The shortest connection interval this model accepts: 375 µs (Core 6.2 shorter connection
/// intervals; 7.5 ms before).
pub const MIN_CONN_INTERVAL: Duration = Duration::from_micros(375);

/// The longest connection interval: 4 s.
pub const MAX_CONN_INTERVAL: Duration = Duration::from_secs(4);

/// The physical layer of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phy {
    /// LE 1M: 1 bit/µs, 1-byte preamble.
    Le1M,
    /// LE 2M: 2 bits/µs, 2-byte preamble.
    #[default]
    Le2M,
}

impl Phy {
    /// Time on air of a data PDU with `ll_payload` link-layer payload bytes:
    /// `8 × (preamble + 4 access address + 2 header + L + 3 CRC (+ 4 MIC)) / R` µs, where the
    /// preamble is 1 byte at 1M and 2 at 2M and R is 1 or 2 bits/µs. The 4-byte MIC is added
    /// when `encrypted` (link-layer encryption) and the PDU is not empty. A full 251-byte PDU
    /// takes 2,088 µs at 1M and 1,048 µs at 2M; an empty PDU 80 µs at 1M and 44 µs at 2M.
    pub fn time_on_air(self, ll_payload: usize, encrypted: bool) -> Duration {
        let (preamble, rate) = match self {
            Phy::Le1M => (1u64, 1u64),
            Phy::Le2M => (2, 2),
        };
        let mic = if encrypted && ll_payload > 0 { 4 } else { 0 };
        let bytes = preamble + 4 + 2 + ll_payload as u64 + 3 + mic;
        Duration::from_nanos(8 * bytes * 1000 / rate)
    }

    /// The PHY's name as the Core spec writes it: `LE 1M`, `LE 2M`.
    pub fn name(self) -> &'static str {
        match self {
            Phy::Le1M => "LE 1M",
            Phy::Le2M => "LE 2M",
        }
    }
}

impl std::str::FromStr for Phy {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<Self, ParamError> {
        match s.to_ascii_lowercase().replace([' ', '_', '-'], "").as_str() {
            "1m" | "le1m" => Ok(Phy::Le1M),
            "2m" | "le2m" => Ok(Phy::Le2M),
            _ => Err(ParamError::Phy(s.to_string())),
        }
    }
}

/// A delay drawn uniformly from `[min, max]` for each use (the seeded RNG of the link).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DelayRange {
    /// The shortest delay.
    pub min: Duration,
    /// The longest delay (at least `min`).
    pub max: Duration,
}

impl DelayRange {
    /// No delay.
    pub const ZERO: DelayRange = DelayRange {
        min: Duration::ZERO,
        max: Duration::ZERO,
    };

    /// A delay uniform in `[min_us, max_us]` microseconds.
    pub const fn micros(min_us: u64, max_us: u64) -> DelayRange {
        DelayRange {
            min: Duration::from_micros(min_us),
            max: Duration::from_micros(max_us),
        }
    }

    /// The mean delay.
    pub fn mean(&self) -> Duration {
        (self.min + self.max) / 2
    }
}

/// The parameters of a simulated connection. Every limit is here, with its default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkParams {
    /// The connection interval in force once the peripheral's update request has been applied
    /// (default 15 ms, what the bleRPC firmware asks for). One connection event per interval.
    pub conn_interval: Duration,
    /// The central's initial interval, in force from connect until the peripheral's update
    /// request takes effect (`None`: `conn_interval` from the start). Published: 30 ms on macOS
    /// and iOS, 45 ms on the Pixel 5.
    pub initial_interval: Option<Duration>,
    /// When the peripheral asks for `conn_interval` (default 5 s after connect, Zephyr's
    /// `CONFIG_BT_CONN_PARAM_UPDATE_TIMEOUT`). The new interval takes effect at the first event
    /// at least [`UPDATE_INSTANT_EVENTS`] events later (the LL connection-update instant).
    pub interval_update_after: Duration,
    /// The negotiated ATT MTU; containers are at most `att_mtu - 3` bytes (default 247).
    pub att_mtu: usize,
    /// The link layer's maximum payload per packet (Data Length Extension; default 251, the
    /// most; 27 without DLE). A container plus [`LL_OVERHEAD`] bytes longer than this is sent as
    /// several packets.
    pub data_length: usize,
    /// The PHY, which sets the time on air of each packet (default LE 2M).
    pub phy: Phy,
    /// How long the central lets one connection event run (default 7.5 ms, capped at the
    /// connection interval). A packet pair starts only if it ends within the budget; this is
    /// what sets how many packets fit in one event on a given platform.
    pub event_budget: Duration,
    /// An optional cap on packet pairs per connection event (at least 1), on top of the budget.
    pub max_pdus_per_event: Option<usize>,
    /// How many write-without-response containers the central's host gets into its controller
    /// per connection event (`None`: as many as the budget allows). Models the OS's
    /// write-without-response flow control (CoreBluetooth's `canSendWriteWithoutResponse`,
    /// Android's `onCharacteristicWrite` pacing): the host refills the controller between
    /// events.
    pub central_writes_per_event: Option<usize>,
    /// The central host's delay from a write to its controller (the OS stack between the app
    /// and the radio), drawn per write from the link's seeded RNG (default none). Writes stay
    /// in order.
    pub central_host_delay: DelayRange,
    /// Whether the link layer is encrypted (paired), adding a 4-byte MIC to non-empty PDUs
    /// (default off; bleRPC encrypts end to end).
    pub ll_encryption: bool,
    /// PDUs each direction's controller buffer holds before `flush` waits (default 20, the firmware's `CONFIG_BT_L2CAP_TX_BUF_COUNT`).
    pub queue_limit: usize,
    /// Probability that a packet is lost on air (CRC error), in `[0, 1)` (default 0). The link
    /// layer retransmits it in a later event, so data is delayed, never lost or reordered; the
    /// event closes after a lost packet.
    pub loss: f64,
    /// Probability that the central's host silently drops a write without response, in
    /// `[0, 1]` (default 0). The reference iOS central writes without checking
    /// `canSendWriteWithoutResponse`, so large requests can be dropped this way.
    pub central_write_drop: f64,
    /// The supervision timeout (default 1 s, the firmware's 100 × 10 ms): the connection is
    /// lost when no packet has got through for this long.
    pub supervision_timeout: Duration,
    /// Drop the connection at this time after connect (default never).
    pub disconnect_at: Option<Duration>,
    /// The seed of the link's RNG (loss, host delay, write drops).
    pub seed: u64,
}

/// Events between the peripheral's connection-parameter request and the new interval taking
/// effect: the LL connection-update instant is at least 6 events ahead.
pub const UPDATE_INSTANT_EVENTS: u32 = 6;

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            conn_interval: Duration::from_millis(15),
            initial_interval: None,
            interval_update_after: Duration::from_secs(5),
            att_mtu: 247,
            data_length: MAX_DATA_LENGTH,
            phy: Phy::Le2M,
            event_budget: Duration::from_micros(7500),
            max_pdus_per_event: None,
            central_writes_per_event: None,
            central_host_delay: DelayRange::ZERO,
            ll_encryption: false,
            queue_limit: 20,
            loss: 0.0,
            central_write_drop: 0.0,
            supervision_timeout: Duration::from_secs(1),
            disconnect_at: None,
            seed: 1,
        }
    }
}

/// A parameter out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamError {
    /// A connection interval outside 375 µs ..= 4 s.
    #[error("connection interval {0:?} is outside 375 µs ..= 4 s")]
    Interval(Duration),
    /// An ATT MTU outside 23 ..= 517.
    #[error("ATT MTU {0} is outside 23 ..= 517")]
    AttMtu(usize),
    /// A data length outside 27 ..= 251.
    #[error("data length {0} is outside 27 ..= 251")]
    DataLength(usize),
    /// A probability outside its range.
    #[error("{name} = {value} is not a probability in [0, 1)")]
    Probability {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// A delay range with `min > max`.
    #[error("central host delay {min:?} is more than its maximum {max:?}")]
    Delay {
        /// The minimum.
        min: Duration,
        /// The maximum.
        max: Duration,
    },
    /// A zero queue limit or event cap.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// An unknown PHY name.
    #[error("unknown PHY {0:?} (expected 1M or 2M)")]
    Phy(String),
    /// A zero supervision timeout or event budget.
    #[error("{0} must be longer than zero")]
    ZeroDuration(&'static str),
}

impl LinkParams {
    /// Checks every parameter against its range.
    pub fn validate(&self) -> Result<(), ParamError> {
        for ci in [Some(self.conn_interval), self.initial_interval]
            .into_iter()
            .flatten()
        {
            if !(MIN_CONN_INTERVAL..=MAX_CONN_INTERVAL).contains(&ci) {
                return Err(ParamError::Interval(ci));
            }
        }
        if !(MIN_ATT_MTU..=MAX_ATT_MTU).contains(&self.att_mtu) {
            return Err(ParamError::AttMtu(self.att_mtu));
        }
        if !(MIN_DATA_LENGTH..=MAX_DATA_LENGTH).contains(&self.data_length) {
            return Err(ParamError::DataLength(self.data_length));
        }
        let prob = |name, value: f64, max_incl: bool| {
            let ok = value >= 0.0 && if max_incl { value <= 1.0 } else { value < 1.0 };
            if ok {
                Ok(())
            } else {
                Err(ParamError::Probability { name, value })
            }
        };
        prob("loss", self.loss, false)?;
        prob("central_write_drop", self.central_write_drop, true)?;
        let d = self.central_host_delay;
        if d.min > d.max {
            return Err(ParamError::Delay {
                min: d.min,
                max: d.max,
            });
        }
        if self.queue_limit == 0 {
            return Err(ParamError::Zero("queue_limit"));
        }
        if self.max_pdus_per_event == Some(0) {
            return Err(ParamError::Zero("max_pdus_per_event"));
        }
        if self.central_writes_per_event == Some(0) {
            return Err(ParamError::Zero("central_writes_per_event"));
        }
        if self.supervision_timeout.is_zero() {
            return Err(ParamError::ZeroDuration("supervision_timeout"));
        }
        if self.event_budget.is_zero() {
            return Err(ParamError::ZeroDuration("event_budget"));
        }
        Ok(())
    }

    /// Link-layer packets a container of `len` bytes takes (at least 1).
    pub fn fragments(&self, len: usize) -> usize {
        (len + LL_OVERHEAD).div_ceil(self.data_length.max(1)).max(1)
    }

    /// Link-layer payload of fragment `i` (0-based) of a container of `len` bytes.
    pub fn fragment_len(&self, len: usize, i: usize) -> usize {
        let total = len + LL_OVERHEAD;
        let dl = self.data_length.max(1);
        total.saturating_sub(i * dl).min(dl)
    }

    /// Duration of one packet pair: central PDU, T_IFS, peripheral PDU, T_IFS, with link-layer
    /// payloads `central` and `peripheral` bytes (0 = empty PDU).
    pub fn pair_time(&self, central: usize, peripheral: usize) -> Duration {
        self.pdu_time(central) + T_IFS + self.pdu_time(peripheral) + T_IFS
    }

    /// Time on air of one packet with `ll_payload` bytes on this link.
    pub fn pdu_time(&self, ll_payload: usize) -> Duration {
        self.phy.time_on_air(ll_payload, self.ll_encryption)
    }

    /// The same link with full connection events: the whole interval as budget, no per-event
    /// caps, no host delay, no loss. The model's best case for the link (its physical limit).
    pub fn full_event(&self) -> LinkParams {
        LinkParams {
            event_budget: self.conn_interval,
            max_pdus_per_event: None,
            central_writes_per_event: None,
            central_host_delay: DelayRange::ZERO,
            loss: 0.0,
            central_write_drop: 0.0,
            disconnect_at: None,
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn time_on_air_matches_the_core_spec() {
        assert_eq!(
            Phy::Le1M.time_on_air(251, false),
            Duration::from_micros(2088)
        );
        assert_eq!(
            Phy::Le2M.time_on_air(251, false),
            Duration::from_micros(1048)
        );
        assert_eq!(Phy::Le1M.time_on_air(0, true), Duration::from_micros(80));
        assert_eq!(Phy::Le2M.time_on_air(0, false), Duration::from_micros(44));
        assert_eq!(Phy::Le2M.time_on_air(27, true), Duration::from_micros(168));
    }

    #[test]
    fn containers_fragment_by_data_length() {
        let p = LinkParams::default();
        assert_eq!(p.fragments(244), 1);
        assert_eq!(p.fragments(245), 2);
        assert_eq!(p.fragment_len(245, 0), 251);
        assert_eq!(p.fragment_len(245, 1), 1);
        let small = LinkParams {
            att_mtu: 512,
            data_length: 27,
            ..p
        };
        assert_eq!(small.fragments(20), 1);
        assert_eq!(small.fragments(509), 20);
        assert_eq!(p.fragments(0), 1);
    }

    #[test]
    fn bad_parameters_are_named() {
        let p = LinkParams::default();
        assert!(p.validate().is_ok());
        let bad = |q: LinkParams| q.validate().unwrap_err().to_string();
        assert!(bad(LinkParams { att_mtu: 22, ..p }).contains("ATT MTU 22"));
        assert!(bad(LinkParams { loss: 1.0, ..p }).contains("loss"));
        assert!(
            bad(LinkParams {
                conn_interval: Duration::from_secs(5),
                ..p
            })
            .contains("interval")
        );
        assert!(
            bad(LinkParams {
                data_length: 300,
                ..p
            })
            .contains("data length")
        );
        assert_eq!("2m".parse::<Phy>(), Ok(Phy::Le2M));
        assert_eq!("LE 1M".parse::<Phy>(), Ok(Phy::Le1M));
        assert!("3m".parse::<Phy>().is_err());
    }

    #[test]
    fn full_event_keeps_the_radio_and_drops_the_caps() {
        let p = LinkParams {
            central_writes_per_event: Some(3),
            loss: 0.1,
            ..LinkParams::default()
        };
        let f = p.full_event();
        assert_eq!(f.event_budget, p.conn_interval);
        assert_eq!(f.central_writes_per_event, None);
        assert_eq!(f.loss, 0.0);
        assert_eq!(f.phy, p.phy);
    }
}
