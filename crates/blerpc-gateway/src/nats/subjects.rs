//! The fleet's names on NATS: subjects, KV buckets, and what may be a token of a subject.
//!
//! | name | what |
//! |---|---|
//! | `{prefix}.v1.device.{id}` | requests for device `{id}`, subscribed (queue group `{prefix}.device`) by the gateway that holds its connection, and only while it does |
//! | `{prefix}.v1.node.{node}` | requests a gateway answers as a node: a device it held last, its device pages, snapshot and metrics |
//! | `{prefix}_presence` (KV) | one key per device: which gateway holds it, since when, and the claim's epoch |
//! | `{prefix}_gateways` (KV) | one key per gateway: its liveness (heartbeats) |
//! | `{prefix}_calls` (KV) | one key per durable call, `{device}.{call}`: its record |
//! | `{prefix}.v1.durable.{device}.{call}` | each change of a durable call's record |
//!
//! A device id or node name is a single subject token: non-empty, at most [`MAX_TOKEN`] bytes,
//! printable ASCII without `.`, `*`, `>` or spaces (a gateway's device ids are 64 hex digits).

/// The longest device id or node name used as a subject token.
pub const MAX_TOKEN: usize = 128;

/// Whether `token` may be one token of a subject and a KV key (see the [module docs](self)).
pub fn is_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_TOKEN
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'='))
}

/// The subjects and buckets of one fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

/// Why a prefix cannot name a fleet.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "the NATS prefix {0:?} must be one subject token of letters, digits, `-` or `_` (at most \
     {MAX_TOKEN} bytes)"
)]
pub struct BadPrefix(pub String);

impl Subjects {
    /// The names under `prefix` (`blerpc` by default).
    pub fn new(prefix: &str) -> Result<Subjects, BadPrefix> {
        if is_token(prefix) && !prefix.contains('=') {
            Ok(Subjects {
                prefix: prefix.to_string(),
            })
        } else {
            Err(BadPrefix(prefix.to_string()))
        }
    }

    /// Requests for device `id`; `None` if `id` cannot be a token.
    pub fn device(&self, id: &str) -> Option<String> {
        is_token(id).then(|| format!("{}.v1.device.{id}", self.prefix))
    }

    /// The queue group of device subjects: one gateway answers a request even while a device's
    /// old connection and its new one overlap.
    pub fn device_group(&self) -> String {
        format!("{}.device", self.prefix)
    }

    /// Requests for gateway `node`; `None` if `node` cannot be a token.
    pub fn node(&self, node: &str) -> Option<String> {
        is_token(node).then(|| format!("{}.v1.node.{node}", self.prefix))
    }

    /// The presence bucket.
    pub fn presence_bucket(&self) -> String {
        format!("{}_presence", self.prefix)
    }

    /// The liveness bucket.
    pub fn gateways_bucket(&self) -> String {
        format!("{}_gateways", self.prefix)
    }

    /// The durable calls' bucket.
    pub fn calls_bucket(&self) -> String {
        format!("{}_calls", self.prefix)
    }

    /// Where durable calls' changes are published: `{prefix}.v1.durable` then `.{device}.{call}`.
    pub fn durable_events(&self) -> String {
        format!("{}.v1.durable", self.prefix)
    }
}

impl Default for Subjects {
    fn default() -> Subjects {
        Subjects {
            prefix: "blerpc".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_and_node_names_are_single_tokens() {
        let s = Subjects::default();
        let id = "ab".repeat(32);
        assert_eq!(s.device(&id), Some(format!("blerpc.v1.device.{id}")));
        assert_eq!(s.node("gw-1"), Some("blerpc.v1.node.gw-1".to_string()));
        for bad in ["", "a.b", "a*", ">", "a b", "é", &"x".repeat(MAX_TOKEN + 1)] {
            assert_eq!(s.device(bad), None, "{bad:?}");
            assert_eq!(s.node(bad), None, "{bad:?}");
        }
        assert_eq!(s.presence_bucket(), "blerpc_presence");
        assert_eq!(s.gateways_bucket(), "blerpc_gateways");
        assert_eq!(s.device_group(), "blerpc.device");
    }

    #[test]
    fn a_prefix_is_one_token() {
        assert!(Subjects::new("fleet-a").is_ok());
        assert_eq!(Subjects::new("a.b"), Err(BadPrefix("a.b".into())));
        assert!(Subjects::new("").is_err());
        assert!(Subjects::new("a=b").is_err());
    }
}
