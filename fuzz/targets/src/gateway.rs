//! The device gateway's parsers of what HTTP clients and its workers send: the NDJSON lines of
//! an upload body (as chunks arrive), and the decoding and merging of its nodes' metric sets
//! (Prometheus protobuf) and device lists.

use blerpc_gateway::ndjson::Lines;
use blerpc_gateway::registry::DeviceView;
use blerpc_gateway::routing::fleet::{merge_device_lists, merge_snapshots};
use blerpc_gateway::routing::{MetricSet, Snapshot};

/// `[mode][max_line][4 chunk sizes]` then the body (mode 0: NDJSON), or parts separated by
/// `0xff` (mode 1: metric sets as Prometheus protobuf; mode 2: device lists and snapshots as
/// JSON).
///
/// Invariants: a line handed out is at most `max_line` bytes, has no newline, and comes in
/// order; after every chunk's lines are taken, at most `max_line + 2` bytes are held; merged
/// metrics encode to a text with one `# EOF` line, the last, and a set merged alone encodes as
/// itself; a merged device list has one entry per id and `known` equal to their number, a merged
/// snapshot at most the devices asked for.
pub fn gateway_inputs(data: &[u8]) {
    let [mode, max_line, s0, s1, s2, s3, rest @ ..] = data else {
        return;
    };
    match mode % 3 {
        0 => {
            let max_line = usize::from(*max_line);
            let sizes = [s0, s1, s2, s3].map(|s| usize::from(*s).max(1));
            let mut lines = Lines::new(max_line);
            let (mut at, mut k, mut last) = (0, 0, 0);
            let mut take = |lines: &mut Lines| loop {
                match lines.next_line() {
                    Ok(Some((n, text))) => {
                        assert!(n > last, "line {n} after {last}");
                        last = n;
                        assert!(text.len() <= max_line, "{} > {max_line}", text.len());
                        assert!(!text.contains('\n'));
                    }
                    Ok(None) | Err(_) => return,
                }
            };
            while at < rest.len() {
                let end = (at + sizes[k % 4]).min(rest.len());
                lines.push(&rest[at..end]);
                take(&mut lines);
                assert!(lines.held() <= max_line + 2, "held {}", lines.held());
                at = end;
                k += 1;
            }
            lines.finish();
            take(&mut lines);
        }
        1 => {
            let sets: Vec<MetricSet> = rest
                .split(|&b| b == 0xff)
                .filter_map(|part| MetricSet::decode(part).ok())
                .collect();
            for set in &sets {
                let alone = MetricSet::merge([set.clone()]).to_text();
                assert_eq!(alone, set.clone().to_text(), "a set merged alone changed");
            }
            let merged = MetricSet::merge(sets).to_text();
            assert!(merged.ends_with("# EOF\n"));
            assert_eq!(merged.lines().filter(|l| *l == "# EOF").count(), 1);
        }
        _ => {
            let lists: Vec<Vec<DeviceView>> = rest
                .split(|&b| b == 0xff)
                .filter_map(|t| serde_json::from_slice(t).ok())
                .collect();
            let merged = merge_device_lists(lists);
            assert_eq!(merged.known, merged.devices.len() as u64);
            let mut ids: Vec<&str> = merged.devices.iter().map(|d| d.id.as_str()).collect();
            ids.dedup();
            assert_eq!(ids.len(), merged.devices.len(), "one entry per id");
            let snaps: Vec<Snapshot> = rest
                .split(|&b| b == 0xff)
                .filter_map(|t| serde_json::from_slice(t).ok())
                .collect();
            assert!(merge_snapshots(snaps, 3).devices.len() <= 3);
        }
    }
}

/// Seeds for `gateway_inputs`: an NDJSON body, two nodes' metric sets (the gateway's own
/// registry, Prometheus protobuf), and two nodes' device lists with a device on both.
pub fn seed_inputs() -> Vec<(&'static str, Vec<u8>)> {
    let head = |mode: u8| vec![mode, 64, 3, 7, 1, 200];
    let mut ndjson = head(0);
    ndjson.extend_from_slice(b"{\"seq\":0}\n{\"seq\":1}\r\n\n{\"seq\":2}");
    let mut metrics = head(1);
    let set = MetricSet::of_registry(blerpc_gateway::GatewayMetrics::new().server.registry());
    metrics.extend(set.encode());
    metrics.push(0xff);
    metrics.extend(set.encode());
    let view = |id: &str, online: bool| {
        serde_json::json!({
            "id": id, "name": null, "status": if online { "online" } else { "offline" },
            "link": "tcp", "remote": null, "encrypted": true, "relay": false,
            "connected_since": null, "last_seen": null, "connections": 1, "calls": 2,
            "errors": 0, "in_flight": 0, "queued": 0, "latency_p50_ms": null
        })
    };
    let mut lists = head(2);
    lists.extend(serde_json::to_vec(&[view("a", true), view("b", false)]).unwrap_or_default());
    lists.push(0xff);
    lists.extend(serde_json::to_vec(&[view("b", true)]).unwrap_or_default());
    vec![("ndjson", ndjson), ("metrics", metrics), ("lists", lists)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds decode into what the target merges.
    #[test]
    fn the_seeds_reach_the_merges() {
        let seeds = seed_inputs();
        let part = |name: &str| {
            let data = &seeds.iter().find(|(n, _)| *n == name).unwrap().1[6..];
            data.split(|&b| b == 0xff)
                .map(<[u8]>::to_vec)
                .collect::<Vec<_>>()
        };
        let sets: Vec<MetricSet> = part("metrics")
            .iter()
            .map(|p| MetricSet::decode(p).unwrap())
            .collect();
        assert!(
            MetricSet::merge(sets)
                .to_text()
                .contains("gateway_devices_connected")
        );
        let lists: Vec<Vec<DeviceView>> = part("lists")
            .iter()
            .map(|p| serde_json::from_slice(p).unwrap())
            .collect();
        let merged = merge_device_lists(lists);
        assert_eq!((merged.known, merged.connected), (2, 2));
        for (_, data) in seeds {
            gateway_inputs(&data);
        }
    }
}
