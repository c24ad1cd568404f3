//! The device gateway's parsers of what HTTP clients and its workers send: the NDJSON lines of
//! an upload body (as chunks arrive), and the merging of its workers' Prometheus texts and device
//! lists.

use blerpc_gateway::cluster::merge;
use blerpc_gateway::ndjson::Lines;

/// `[mode][max_line][4 chunk sizes]` then the body (mode 0: NDJSON), or texts separated by
/// `0xff` (mode 1: metrics; mode 2: device lists as JSON).
///
/// Invariants: a line handed out is at most `max_line` bytes, has no newline, and comes in
/// order; after every chunk's lines are taken, at most `max_line + 2` bytes are held; merged
/// metrics have one `# EOF` line, the last, and merge again to themselves; a merged device list has one
/// entry per id and `known` equal to their number.
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
            let texts: Vec<String> = rest
                .split(|&b| b == 0xff)
                .map(|t| String::from_utf8_lossy(t).into_owned())
                .collect();
            let merged = merge::metrics(&texts);
            assert!(merged.ends_with("# EOF\n"));
            assert_eq!(merged.lines().filter(|l| *l == "# EOF").count(), 1);
            assert_eq!(merge::metrics(std::slice::from_ref(&merged)), merged);
        }
        _ => {
            let lists: Vec<serde_json::Value> = rest
                .split(|&b| b == 0xff)
                .filter_map(|t| serde_json::from_slice(t).ok())
                .collect();
            let merged = merge::device_lists(&lists);
            let devices = merged["devices"].as_array().map_or(0, Vec::len);
            assert_eq!(merged["known"].as_u64(), Some(devices as u64));
            let snapshot = merge::snapshots(&lists, 3);
            assert!(snapshot["devices"].as_array().map_or(0, Vec::len) <= 3);
        }
    }
}
