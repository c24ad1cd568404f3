//! Combining what several workers answer into what one gateway answers: the device lists, the
//! dashboard snapshots, and the Prometheus texts (series with the same name and labels summed).

use std::collections::{BTreeMap, HashMap};

/// Merges device lists (`GET /v1/devices` bodies): one entry per id, an online one preferred
/// (every worker knows the allow-list's devices, offline, but only one holds a device's
/// connection), sorted by id; `connected` summed, `known` the number of distinct ids.
pub fn device_lists(bodies: &[serde_json::Value]) -> serde_json::Value {
    let mut by_id: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    let mut connected = 0u64;
    for body in bodies {
        connected += body["connected"].as_u64().unwrap_or(0);
        for d in body["devices"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let Some(id) = d["id"].as_str() else { continue };
            let online = d["status"] == "online";
            match by_id.get(id) {
                Some(existing) if existing["status"] == "online" || !online => {
                    // Keep the online entry (or the first offline one), but count the calls an
                    // earlier connection made through another worker.
                    if let Some(e) = by_id.get_mut(id) {
                        add_counts(e, d);
                    }
                }
                Some(offline) => {
                    let mut d = d.clone();
                    add_counts(&mut d, offline);
                    by_id.insert(id.to_string(), d);
                }
                None => {
                    by_id.insert(id.to_string(), d.clone());
                }
            }
        }
    }
    let known = by_id.len();
    serde_json::json!({
        "devices": by_id.into_values().collect::<Vec<_>>(),
        "connected": connected,
        "known": known,
    })
}

fn add_counts(into: &mut serde_json::Value, from: &serde_json::Value) {
    for key in ["calls", "errors", "connections"] {
        let sum = into[key].as_u64().unwrap_or(0) + from[key].as_u64().unwrap_or(0);
        into[key] = sum.into();
    }
}

/// Merges dashboard snapshots (`/v1/events` data): totals summed, devices merged as
/// [`device_lists`] does and cut to `max_devices` (online first).
pub fn snapshots(snaps: &[serde_json::Value], max_devices: usize) -> serde_json::Value {
    let lists = device_lists(snaps);
    let mut devices: Vec<serde_json::Value> =
        lists["devices"].as_array().cloned().unwrap_or_default();
    devices.sort_by(|a, b| {
        (b["status"] == "online")
            .cmp(&(a["status"] == "online"))
            .then_with(|| a["id"].as_str().cmp(&b["id"].as_str()))
    });
    devices.truncate(max_devices);
    let sum = |key: &str| {
        snaps
            .iter()
            .map(|s| s[key].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let time = snaps
        .iter()
        .filter_map(|s| s["time_ms"].as_u64())
        .max()
        .unwrap_or(0);
    serde_json::json!({
        "time_ms": time,
        "connected": sum("connected"),
        "known": sum("known").max(lists["known"].as_u64().unwrap_or(0)),
        "calls_ok": sum("calls_ok"),
        "devices": devices,
    })
}

/// Sums Prometheus text expositions: every sample line with the same name and labels is added
/// up (counters, gauges and histogram buckets all sum across workers); `# HELP` / `# TYPE` lines
/// are kept once, in first-seen order (other comments are dropped); one `# EOF` at the end.
pub fn metrics(texts: &[String]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut meta: HashMap<String, Vec<String>> = HashMap::new();
    let mut samples: HashMap<String, Vec<(String, f64)>> = HashMap::new();
    let mut seen_sample: HashMap<(String, String), usize> = HashMap::new();
    let mut family = String::new();
    for text in texts {
        for line in text.lines() {
            // A lone `\r` at the end of a text's last line is no part of it either.
            let line = line.trim_end_matches('\r');
            if line == "# EOF" || line.is_empty() {
                continue;
            }
            if line.starts_with('#') {
                // `# HELP name ...`, `# TYPE name ...`, `# UNIT name ...`; other comments go.
                let mut words = line.split_whitespace().skip(1);
                let (Some(kind), Some(name)) = (words.next(), words.next()) else {
                    continue;
                };
                if !matches!(kind, "HELP" | "TYPE" | "UNIT") {
                    continue;
                }
                let name = name.to_string();
                family = name.clone();
                if !meta.contains_key(&name) {
                    order.push(name.clone());
                }
                let m = meta.entry(name).or_default();
                if !m.iter().any(|l| l == line) {
                    m.push(line.to_string());
                }
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            if !meta.contains_key(&family) {
                family = series.split('{').next().unwrap_or(series).to_string();
                order.push(family.clone());
                meta.insert(family.clone(), Vec::new());
            }
            let list = samples.entry(family.clone()).or_default();
            match seen_sample.get(&(family.clone(), series.to_string())) {
                Some(&i) => list[i].1 += value,
                None => {
                    seen_sample.insert((family.clone(), series.to_string()), list.len());
                    list.push((series.to_string(), value));
                }
            }
        }
    }
    let mut out = String::new();
    for name in order {
        for l in meta.get(&name).map(Vec::as_slice).unwrap_or(&[]) {
            out.push_str(l);
            out.push('\n');
        }
        for (series, value) in samples.get(&name).map(Vec::as_slice).unwrap_or(&[]) {
            out.push_str(&format!("{series} {value}\n"));
        }
    }
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn device_lists_prefer_the_online_entry_and_count_distinct_ids() {
        let a = json!({"connected": 1, "known": 2, "devices": [
            {"id": "aa", "status": "online", "calls": 5, "errors": 0, "connections": 1},
            {"id": "bb", "status": "offline", "calls": 1, "errors": 1, "connections": 1},
        ]});
        let b = json!({"connected": 1, "known": 2, "devices": [
            {"id": "aa", "status": "offline", "calls": 2, "errors": 0, "connections": 1},
            {"id": "bb", "status": "online", "calls": 3, "errors": 0, "connections": 1},
        ]});
        let m = device_lists(&[a, b]);
        assert_eq!(m["connected"], 2);
        assert_eq!(m["known"], 2);
        let d = m["devices"].as_array().unwrap_or_else(|| panic!("{m}"));
        assert_eq!(d[0]["id"], "aa");
        assert_eq!(d[0]["status"], "online");
        assert_eq!(d[0]["calls"], 7);
        assert_eq!(d[1]["status"], "online");
        assert_eq!(d[1]["calls"], 4);
        assert_eq!(d[1]["errors"], 1);
    }

    #[test]
    fn metrics_sum_by_series_and_keep_one_header() {
        let w1 = "# HELP x_total Things.\n# TYPE x_total counter\nx_total{reason=\"a\"} 2\nx_total{reason=\"b\"} 1\n# HELP g Now.\n# TYPE g gauge\ng 3\n# EOF\n";
        let w2 = "# HELP x_total Things.\n# TYPE x_total counter\nx_total{reason=\"a\"} 5\n# HELP g Now.\n# TYPE g gauge\ng 4\n# EOF\n";
        let m = metrics(&[w1.to_string(), w2.to_string()]);
        assert_eq!(
            m,
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{reason=\"a\"} 7\nx_total{reason=\"b\"} 1\n# HELP g Now.\n# TYPE g gauge\ng 7\n# EOF\n"
        );
    }

    #[test]
    fn snapshots_sum_totals_and_cut_the_list() {
        let s1 = json!({"time_ms": 5, "connected": 1, "known": 1, "calls_ok": 3,
            "devices": [{"id": "b", "status": "online"}]});
        let s2 = json!({"time_ms": 7, "connected": 0, "known": 1, "calls_ok": 4,
            "devices": [{"id": "a", "status": "offline"}]});
        let m = snapshots(&[s1, s2], 1);
        assert_eq!(m["time_ms"], 7);
        assert_eq!(m["calls_ok"], 7);
        assert_eq!(m["connected"], 1);
        assert_eq!(m["devices"].as_array().map(Vec::len), Some(1));
        assert_eq!(m["devices"][0]["id"], "b");
    }
}
