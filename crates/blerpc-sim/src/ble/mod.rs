//! The BLE connection model, sans-IO: the link's parameters and the published platform
//! profiles, the connection-event schedule, and [`Air`], which plays connection events and
//! packet pairs. No clock and no runtime: both the tokio link and the harness drive it.

mod air;
pub mod params;
pub mod profile;
pub(crate) mod rng;
mod schedule;

pub use air::{Air, Delivery, Event, LinkStats};
