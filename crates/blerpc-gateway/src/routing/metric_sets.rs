//! Metrics as values: a node's Prometheus registry as metric families (prometheus-client's
//! Prometheus protobuf encoding, `io.prometheus.client.MetricFamily`, the format Prometheus
//! itself scrapes), summed across nodes, and encoded once in the text format by
//! prometheus-client (a [`Collector`] that replays the merged families).
//!
//! Summing is right for every series a gateway has: counters and histogram buckets count
//! events (each happened on one node), and its gauges count things held (devices connected,
//! relays open), each by one node.

use std::collections::HashMap;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model as pm;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use prost::Message as _;

/// The media type of [`MetricSet::encode`]: length-delimited `MetricFamily` messages.
pub const PROTOBUF_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// A node's metric families.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricSet {
    /// The families, in the registry's order.
    pub families: Vec<pm::MetricFamily>,
}

impl MetricSet {
    /// The families of `registry`.
    pub fn of_registry(registry: &Registry) -> MetricSet {
        MetricSet {
            // The encoder only fails on a histogram without buckets, which a gateway has not.
            families: prometheus_client::encoding::prometheus_protobuf::encode(registry)
                .unwrap_or_default(),
        }
    }

    /// The families as length-delimited protobuf messages ([`PROTOBUF_TYPE`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for family in &self.families {
            // Writing into a Vec cannot run out of room.
            let _ = family.encode_length_delimited(&mut out);
        }
        out
    }

    /// Reads what [`MetricSet::encode`] wrote.
    pub fn decode(mut bytes: &[u8]) -> Result<MetricSet, prost::DecodeError> {
        let mut families = Vec::new();
        while !bytes.is_empty() {
            families.push(pm::MetricFamily::decode_length_delimited(&mut bytes)?);
        }
        Ok(MetricSet { families })
    }

    /// Sums `sets`: families by name (the first one's type, unit and help), series by label
    /// set; counters, gauges and histograms (count, sum, buckets) add up. A series whose kind
    /// or buckets differ from the first node's (another version) is left as the first gave it.
    pub fn merge(sets: impl IntoIterator<Item = MetricSet>) -> MetricSet {
        let mut families: Vec<pm::MetricFamily> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for family in sets.into_iter().flat_map(|s| s.families) {
            match by_name.get(&family.name).and_then(|&i| families.get_mut(i)) {
                Some(into) => add_family(into, family),
                None => {
                    by_name.insert(family.name.clone(), families.len());
                    families.push(family);
                }
            }
        }
        MetricSet { families }
    }

    /// The families in the OpenMetrics text format (what `GET /metrics` answers), encoded by
    /// prometheus-client.
    pub fn to_text(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Replay(self)));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

fn add_family(into: &mut pm::MetricFamily, from: pm::MetricFamily) {
    for metric in from.metric {
        match into.metric.iter_mut().find(|m| m.label == metric.label) {
            Some(m) => add_metric(m, metric),
            None => into.metric.push(metric),
        }
    }
}

fn add_metric(a: &mut pm::Metric, b: pm::Metric) {
    if let (Some(a), Some(b)) = (&mut a.counter, b.counter) {
        a.value += b.value;
    } else if let (Some(a), Some(b)) = (&mut a.gauge, b.gauge) {
        a.value += b.value;
    } else if let (Some(a), Some(b)) = (&mut a.untyped, b.untyped) {
        a.value += b.value;
    } else if let (Some(a), Some(b)) = (&mut a.histogram, b.histogram) {
        let same_buckets = a.bucket.len() == b.bucket.len()
            && a.bucket
                .iter()
                .zip(&b.bucket)
                .all(|(x, y)| x.upper_bound == y.upper_bound);
        if same_buckets {
            a.sample_count = a.sample_count.saturating_add(b.sample_count);
            a.sample_sum += b.sample_sum;
            for (x, y) in a.bucket.iter_mut().zip(&b.bucket) {
                x.cumulative_count = x.cumulative_count.saturating_add(y.cumulative_count);
            }
        }
    }
}

/// Replays a [`MetricSet`] on each encode.
#[derive(Debug)]
struct Replay(MetricSet);

/// The kind, the name prometheus-client registers (without the unit and the `_total` it adds)
/// and the unit of `family`.
fn descriptor(family: &pm::MetricFamily) -> Option<(MetricType, &str, Option<Unit>)> {
    let kind = match pm::MetricType::try_from(family.r#type).ok()? {
        pm::MetricType::Counter => MetricType::Counter,
        pm::MetricType::Gauge => MetricType::Gauge,
        pm::MetricType::Histogram => MetricType::Histogram,
        pm::MetricType::Untyped => MetricType::Unknown,
        // prometheus-client has no summaries or gauge histograms.
        _ => return None,
    };
    let mut name = family.name.as_str();
    if kind == MetricType::Counter {
        name = name.strip_suffix("_total").unwrap_or(name);
    }
    let unit = (!family.unit.is_empty()).then(|| {
        name = name
            .strip_suffix(family.unit.as_str())
            .and_then(|n| n.strip_suffix('_'))
            .unwrap_or(name);
        Unit::Other(family.unit.clone())
    });
    Some((kind, name, unit))
}

/// `v` as the whole number it is, if it is one a counter (`u64`) or gauge (`i64`) holds: what
/// prometheus-client's integer series were before the protobuf made them doubles.
fn whole<T: TryFrom<i128>>(v: f64) -> Option<T> {
    if v.fract() != 0.0 || v.abs() >= 9.0e18 {
        return None;
    }
    T::try_from(v as i128).ok()
}

impl Collector for Replay {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.0.families {
            let Some((kind, name, unit)) = descriptor(family) else {
                continue;
            };
            let mut metrics = encoder.encode_descriptor(name, &family.help, unit.as_ref(), kind)?;
            for metric in &family.metric {
                let labels: Vec<(String, String)> = metric
                    .label
                    .iter()
                    .map(|l| (l.name.clone(), l.value.clone()))
                    .collect();
                let mut m = metrics.encode_family(&labels)?;
                if let Some(c) = &metric.counter {
                    match whole::<u64>(c.value) {
                        Some(v) => m.encode_counter::<NoLabelSet, _, u64>(&v, None)?,
                        None => m.encode_counter::<NoLabelSet, _, f64>(&c.value, None)?,
                    }
                } else if let Some(value) = metric
                    .gauge
                    .as_ref()
                    .map(|g| g.value)
                    .or(metric.untyped.as_ref().map(|u| u.value))
                {
                    match whole::<i64>(value) {
                        Some(v) => m.encode_gauge(&v)?,
                        None => m.encode_gauge(&value)?,
                    }
                } else if let Some(h) = &metric.histogram {
                    // prometheus-client takes each bucket's own count.
                    let mut below = 0;
                    let buckets: Vec<(f64, u64)> = h
                        .bucket
                        .iter()
                        .map(|b| {
                            let own = b.cumulative_count.saturating_sub(below);
                            below = b.cumulative_count;
                            (b.upper_bound, own)
                        })
                        .collect();
                    m.encode_histogram::<NoLabelSet>(h.sample_sum, h.sample_count, &buckets, None)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use prometheus_client::encoding::EncodeLabelSet;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;

    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct Reason {
        reason: &'static str,
    }

    /// A registry like a node's: prefixes, a labelled counter, gauges, a histogram, a unit.
    fn node(a: u64, b: u64, gauge: i64, observed: &[f64]) -> Registry {
        let mut registry = Registry::with_prefix("blerpc");
        let sub = registry.sub_registry_with_prefix("gateway");
        let calls = Family::<Reason, Counter>::default();
        calls.get_or_create(&Reason { reason: "a" }).inc_by(a);
        if b > 0 {
            calls.get_or_create(&Reason { reason: "b" }).inc_by(b);
        }
        sub.register("calls", "Calls by reason", calls);
        let g = Gauge::<i64>::default();
        g.set(gauge);
        sub.register("devices_connected", "Devices connected now", g);
        let f = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        f.set(0.25 * gauge as f64);
        sub.register_with_unit("load", "A share", Unit::Other("ratio".into()), f);
        let h = Histogram::new([0.1, 1.0]);
        for &v in observed {
            h.observe(v);
        }
        sub.register("call_duration_seconds", "Latency", h);
        registry
    }

    fn text(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    /// The lines of `text` by family, each family's lines in a fixed order (the order of a
    /// family's series is its hash map's).
    fn lines(text: &str) -> Vec<Vec<&str>> {
        let mut families: Vec<Vec<&str>> = Vec::new();
        for line in text.lines() {
            match families.last_mut() {
                Some(f) if !line.starts_with("# HELP") => f.push(line),
                _ => families.push(vec![line]),
            }
        }
        for f in &mut families {
            f.sort_unstable();
        }
        families
    }

    #[test]
    fn one_set_reads_back_and_encodes_as_its_registry_does() {
        let r = node(2, 1, 3, &[0.05, 0.5, 5.0]);
        let set = MetricSet::of_registry(&r);
        let wire = set.encode();
        assert_eq!(MetricSet::decode(&wire).unwrap(), set);
        assert_eq!(lines(&MetricSet::merge([set]).to_text()), lines(&text(&r)));
    }

    #[test]
    fn sets_sum_by_series() {
        let merged = MetricSet::merge([
            MetricSet::of_registry(&node(2, 1, 3, &[0.05])),
            MetricSet::of_registry(&node(5, 0, 4, &[0.5, 5.0])),
        ]);
        let expected = node(7, 1, 7, &[0.05, 0.5, 5.0]);
        assert_eq!(lines(&merged.to_text()), lines(&text(&expected)));
    }

    #[test]
    fn a_series_of_another_kind_is_left_as_the_first_node_gave_it() {
        let mut other = MetricSet::of_registry(&node(1, 0, 1, &[]));
        for f in &mut other.families {
            for m in &mut f.metric {
                m.counter = None;
                m.gauge = None;
                m.histogram = None;
                m.untyped = Some(pm::Untyped { value: 9.0 });
            }
        }
        let r = node(2, 1, 3, &[0.05]);
        let merged = MetricSet::merge([MetricSet::of_registry(&r), other]).to_text();
        assert_eq!(lines(&merged), lines(&text(&r)));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(MetricSet::decode(&[0x05, 0x0a]).is_err());
        assert_eq!(MetricSet::decode(&[]).unwrap(), MetricSet::default());
    }
}
