//! A peripheral's diagnostics as a central holds them (the diagnostics extension,
//! `docs/protocol.md` "Diagnostics"): every field either the peripheral's value or the reason it
//! is missing, never left out.
//!
//! [`Client::diagnostics`](crate::Client::diagnostics) asks a peripheral that announces the
//! extension and, for one that does not (a reference peripheral), gives every field as
//! unavailable with that reason. As JSON a field is its value or `{"unavailable": "why"}`.
//!
//! ```
//! use blerpc::diagnostics::{DeviceDiagnostics, Reading};
//! use blerpc::blerpc_proto::wire::diagnostics::{Diagnostics, Field, List};
//!
//! let wire = Diagnostics {
//!     att_mtu: Some(247),
//!     unavailable: List::Items(&[(Field::RssiDbm, "not a BLE link")]),
//!     ..Diagnostics::default()
//! };
//! let d = DeviceDiagnostics::from_wire(&wire);
//! assert_eq!(d.att_mtu, Reading::Value(247));
//! assert_eq!(d.rssi_dbm.reason(), Some("not a BLE link"));
//! let json = serde_json::to_value(&d).unwrap();
//! assert_eq!(json["att_mtu"], 247);
//! assert_eq!(json["rssi_dbm"]["unavailable"], "not a BLE link");
//! ```

use std::collections::BTreeMap;

use blerpc_proto::wire::diagnostics::{Diagnostics, Field};
use blerpc_proto::wire::error_code::ErrorCode;
use serde::{Deserialize, Serialize};

/// The reason every field is unavailable from a peripheral without the extension.
pub const NOT_ANNOUNCED: &str = "the peripheral does not announce DIAGNOSTICS (CAPABILITIES flag \
                                 bit 7): a reference peripheral or an older blerpc-rs";

/// The reason given for a field the peripheral neither sent nor named as unavailable.
pub const NOT_GIVEN: &str = "not given by the peripheral (no reason sent)";

/// A field's value, or why the peripheral did not give it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reading<T> {
    /// The peripheral's value.
    Value(T),
    /// Missing, with the reason.
    Unavailable {
        /// Why.
        unavailable: String,
    },
}

impl<T> Reading<T> {
    /// The value, if given.
    pub fn value(&self) -> Option<&T> {
        match self {
            Reading::Value(v) => Some(v),
            Reading::Unavailable { .. } => None,
        }
    }

    /// Why the value is missing, if it is.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Reading::Value(_) => None,
            Reading::Unavailable { unavailable } => Some(unavailable),
        }
    }

    fn missing(reason: &str) -> Self {
        Reading::Unavailable {
            unavailable: reason.to_string(),
        }
    }
}

impl<T: std::fmt::Display> std::fmt::Display for Reading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reading::Value(v) => v.fmt(f),
            Reading::Unavailable { unavailable } => write!(f, "unavailable: {unavailable}"),
        }
    }
}

/// ERROR answers by code name (`BUSY`, …; `0x..` for a code the protocol does not define).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts(pub BTreeMap<String, u64>);

impl std::fmt::Display for ErrorCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let parts: Vec<String> = self.0.iter().map(|(c, n)| format!("{c} {n}")).collect();
        f.write_str(&parts.join(", "))
    }
}

macro_rules! device_diagnostics {
    ($($field:ident: $ty:ty = $variant:ident, $doc:literal;)*) => {
        /// A peripheral's diagnostics, each field its value or the reason it is missing (see
        /// the [module docs](self)).
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
        pub struct DeviceDiagnostics {
            $(#[doc = $doc] pub $field: Reading<$ty>,)*
        }

        impl DeviceDiagnostics {
            /// Every field unavailable for `reason` (a peripheral that does not announce the
            /// extension, or one that could not be asked).
            pub fn unavailable(reason: &str) -> Self {
                DeviceDiagnostics { $($field: Reading::missing(reason),)* }
            }

            /// The fields by name, in field order, each as text: what a table shows.
            pub fn rows(&self) -> Vec<(&'static str, String)> {
                vec![$((stringify!($field), self.$field.to_string()),)*]
            }

            /// The reason a field is missing in `wire`: what it says, or [`NOT_GIVEN`].
            fn reason_in(wire: &Diagnostics<'_>, field: Field) -> String {
                wire.reason(field).unwrap_or(NOT_GIVEN).to_string()
            }

            /// The names of the fields, in field order.
            pub fn field_names() -> &'static [&'static str] {
                &[$(stringify!($field),)*]
            }

            /// The fields of `wire`, each missing one with its reason.
            pub fn from_wire(wire: &Diagnostics<'_>) -> Self {
                let errors: ErrorCounts = ErrorCounts(
                    wire.errors()
                        .map(|(code, n)| (code_name(code), n))
                        .collect(),
                );
                // `errors` is present when the peripheral named codes or counted none but
                // says nothing of it being unavailable.
                let errors = if errors.0.is_empty() && wire.reason(Field::Errors).is_some() {
                    None
                } else {
                    Some(errors)
                };
                let values = Values {
                    conn_interval_us: wire.conn_interval_us,
                    peripheral_latency: wire.peripheral_latency,
                    supervision_timeout_ms: wire.supervision_timeout_ms,
                    phy: wire.phy,
                    data_length: wire.data_length,
                    att_mtu: wire.att_mtu,
                    rssi_dbm: wire.rssi_dbm,
                    uptime_ms: wire.uptime_ms,
                    build_id: wire.build_id.map(str::to_string),
                    version: wire.version.map(str::to_string),
                    connections: wire.connections,
                    calls: wire.calls,
                    errors,
                    busy: wire.busy,
                    reassembly_drops: wire.reassembly_drops,
                    link_losses: wire.link_losses,
                    ram_high_water: wire.ram_high_water,
                    outbox_high_water: wire.outbox_high_water,
                    reassembly_high_water: wire.reassembly_high_water,
                };
                DeviceDiagnostics {
                    $($field: match values.$field {
                        Some(v) => Reading::Value(v),
                        None => Reading::Unavailable {
                            unavailable: Self::reason_in(wire, Field::$variant),
                        },
                    },)*
                }
            }
        }

        /// The fields as the wire message gave them.
        struct Values {
            $($field: Option<$ty>,)*
        }
    };
}

device_diagnostics! {
    conn_interval_us: u32 = ConnIntervalUs, "The connection interval, µs.";
    peripheral_latency: u32 = PeripheralLatency, "The peripheral latency, in connection events.";
    supervision_timeout_ms: u32 = SupervisionTimeoutMs, "The supervision timeout, ms.";
    phy: u32 = Phy, "The PHY: 1 = LE 1M, 2 = LE 2M, 3 = LE Coded.";
    data_length: u32 = DataLength, "The LL data length (octets a packet carries).";
    att_mtu: u32 = AttMtu, "The ATT MTU.";
    rssi_dbm: i32 = RssiDbm, "The received signal strength, dBm.";
    uptime_ms: u64 = UptimeMs, "Time since the peripheral started, ms.";
    build_id: String = BuildId, "The build's id.";
    version: String = Version, "The software version.";
    connections: u64 = Connections, "Connections accepted since it started.";
    calls: u64 = Calls, "Calls answered since it started.";
    errors: ErrorCounts = Errors, "ERROR answers by code name.";
    busy: u64 = Busy, "BUSY answers.";
    reassembly_drops: u64 = ReassemblyDrops, "Messages dropped while reassembling.";
    link_losses: u64 = LinkLosses, "Connections lost to their link (not closed).";
    ram_high_water: u32 = RamHighWater, "The most RAM in use, bytes.";
    outbox_high_water: u32 = OutboxHighWater, "The most bytes a connection's outbox held.";
    reassembly_high_water: u32 = ReassemblyHighWater, "The most bytes held reassembling.";
}

/// An ERROR code's name: the protocol's, or `0x..`.
fn code_name(code: u8) -> String {
    match ErrorCode::from_byte(code) {
        ErrorCode::Unknown(b) => format!("0x{b:02x}"),
        known => known.as_str().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blerpc_proto::wire::diagnostics::List;

    #[test]
    fn a_field_not_given_says_so_and_errors_are_named() {
        let wire = Diagnostics {
            uptime_ms: Some(5),
            errors: List::Items(&[(0x02, 3), (0xff, 1)]),
            unavailable: List::Items(&[(Field::ConnIntervalUs, "not a BLE link")]),
            ..Diagnostics::default()
        };
        let d = DeviceDiagnostics::from_wire(&wire);
        assert_eq!(d.uptime_ms, Reading::Value(5));
        assert_eq!(d.conn_interval_us.reason(), Some("not a BLE link"));
        assert_eq!(d.phy.reason(), Some(NOT_GIVEN));
        let errors = d.errors.value().unwrap();
        assert_eq!(errors.0.get("BUSY"), Some(&3));
        assert_eq!(errors.0.get("0xff"), Some(&1));
        assert_eq!(errors.to_string(), "0xff 1, BUSY 3");
        let rows = d.rows();
        assert_eq!(rows.len(), DeviceDiagnostics::field_names().len());
        assert_eq!(
            rows[0],
            ("conn_interval_us", "unavailable: not a BLE link".into())
        );
        // JSON both ways.
        let json = serde_json::to_string(&d).unwrap();
        let back: DeviceDiagnostics = serde_json::from_str(&json).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn a_peripheral_without_the_extension_has_every_field_unavailable() {
        let d = DeviceDiagnostics::unavailable("the peripheral does not announce DIAGNOSTICS");
        assert!(
            d.rows()
                .iter()
                .all(|(_, v)| v == "unavailable: the peripheral does not announce DIAGNOSTICS")
        );
    }
}
