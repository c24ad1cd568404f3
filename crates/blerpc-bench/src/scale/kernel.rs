//! The kernel settings `blerpc-bench scale` needs, set through `/proc/sys` (Linux, root). Each is
//! only raised, never lowered, and nothing is restored: the new values are harmless limits.

use std::path::PathBuf;

/// One setting the benchmark wants.
#[derive(Clone, Debug)]
pub struct Want {
    /// The sysctl name (`net.core.somaxconn`).
    pub name: &'static str,
    /// Why the benchmark wants it.
    pub why: &'static str,
    /// The value to write when the current one is too small.
    pub value: String,
    /// `true` when `current` already suffices.
    pub enough: fn(&str, &Want) -> bool,
}

/// What happened to one setting.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Change {
    /// The sysctl name.
    pub name: String,
    /// The value before.
    pub old: String,
    /// The value after (the old one if unchanged).
    pub new: String,
    /// Why it could not be changed, if it could not.
    pub error: Option<String>,
}

fn path(name: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(name.replace('.', "/"))
}

fn first_number(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

fn at_least(current: &str, want: &Want) -> bool {
    match (first_number(current), first_number(&want.value)) {
        (Some(c), Some(w)) => c >= w,
        _ => false,
    }
}

/// The local port range must hold `ports` ports per source address.
fn range_at_least(current: &str, want: &Want) -> bool {
    let span = |s: &str| {
        let mut it = s.split_whitespace().filter_map(|x| x.parse::<u64>().ok());
        Some(it.next_back()?.saturating_sub(it.next()?))
    };
    match (span(current), span(&want.value)) {
        (Some(c), Some(w)) => c >= w,
        _ => false,
    }
}

/// The settings for `connections` in all and `per_source` connections per source address.
pub fn wants(connections: usize, per_source: usize) -> Vec<Want> {
    let backlog = connections.clamp(4096, 65_535);
    let mut v = vec![
        Want {
            name: "net.core.somaxconn",
            why: "listen backlog cap (connection storms)",
            value: backlog.to_string(),
            enough: at_least,
        },
        Want {
            name: "net.ipv4.tcp_max_syn_backlog",
            why: "half-open connections during a storm",
            value: backlog.to_string(),
            enough: at_least,
        },
        Want {
            name: "net.core.netdev_max_backlog",
            why: "loopback packets queued per CPU (SYN bursts)",
            value: "16384".into(),
            enough: at_least,
        },
        Want {
            name: "fs.file-max",
            why: "open files in the whole system",
            value: (connections * 2 + 65_536).to_string(),
            enough: at_least,
        },
    ];
    // Ports are chosen per (source, destination); only widen the range if one source needs it.
    if per_source + 2_000 > 28_000 {
        v.push(Want {
            name: "net.ipv4.ip_local_port_range",
            why: "client ports per source address",
            value: "1024\t65535".into(),
            enough: range_at_least,
        });
    }
    v
}

/// Applies `wants`; returns what changed, what was already enough, and what could not be set.
pub fn apply(wants: &[Want]) -> Vec<Change> {
    wants
        .iter()
        .map(|w| {
            let p = path(w.name);
            let old = match std::fs::read_to_string(&p) {
                Ok(s) => s.trim().to_string(),
                Err(e) => {
                    return Change {
                        name: w.name.into(),
                        old: "?".into(),
                        new: "?".into(),
                        error: Some(format!("cannot read {}: {e}", p.display())),
                    };
                }
            };
            if (w.enough)(&old, w) {
                return Change {
                    name: w.name.into(),
                    new: old.clone(),
                    old,
                    error: None,
                };
            }
            match std::fs::write(&p, format!("{}\n", w.value)) {
                Ok(()) => {
                    let new = std::fs::read_to_string(&p)
                        .map(|s| s.trim().to_string())
                        .unwrap_or_else(|_| w.value.clone());
                    Change {
                        name: w.name.into(),
                        old,
                        new,
                        error: None,
                    }
                }
                Err(e) => Change {
                    name: w.name.into(),
                    new: old.clone(),
                    old,
                    error: Some(format!(
                        "{e} (needs root; wanted {} for {})",
                        w.value, w.why
                    )),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_too_small_values_are_raised() {
        let w = &wants(100_000, 10_000)[0];
        assert!(at_least("65535", w));
        assert!(!at_least("4096", w));
        let range = Want {
            name: "net.ipv4.ip_local_port_range",
            why: "",
            value: "1024\t65535".into(),
            enough: range_at_least,
        };
        assert!(!range_at_least("32768\t60999", &range));
        assert!(range_at_least("1024 65535", &range));
        // A default port range suffices for 10,000 connections per source address.
        assert!(
            !wants(100_000, 10_000)
                .iter()
                .any(|w| w.name == "net.ipv4.ip_local_port_range")
        );
    }
}
