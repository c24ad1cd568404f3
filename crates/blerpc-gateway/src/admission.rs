//! Which devices may connect: an allow-list of identity keys, or enrolment that records every
//! newcomer.
//!
//! The known-devices file has the format of `known_keys.json` (a JSON object of name → Ed25519
//! public key hex) and is read and written by the runtime's
//! [`KnownKeysFile`]: written under its lock, atomically,
//! mode 0600. A device's id is its key in hex; the name is what people call it.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::Duration;

use blerpc::known_keys::{KnownKeysError, KnownKeysFile, to_hex};
use tokio::sync::mpsc;

use crate::config::Admission;

/// Why a device was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its key is not on the allow-list.
    NotAllowed,
    /// It connected without encryption, and plaintext devices are not allowed.
    Plaintext,
}

impl Refusal {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NotAllowed => "not_allowed",
            Refusal::Plaintext => "plaintext",
        }
    }
}

/// The admission policy in force, with the keys it knows.
#[derive(Debug)]
pub struct KnownDevices {
    enroll: Option<mpsc::UnboundedSender<(String, [u8; 32])>>,
    open: bool,
    /// By key, so in the order of the ids (the keys in hex).
    names: RwLock<BTreeMap<[u8; 32], Box<str>>>,
    path: Option<PathBuf>,
}

impl KnownDevices {
    /// Reads the allow-list (or the enrolment file, which may not exist yet). With
    /// [`Admission::Enroll`] a task records newcomers in the file, a batch at a time: call it
    /// inside a tokio runtime.
    pub fn load(admission: &Admission) -> Result<KnownDevices, KnownKeysError> {
        let (path, enroll, open) = match admission {
            Admission::AllowList(p) => {
                if !p.exists() {
                    return Err(KnownKeysError::Io {
                        path: p.clone(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "the known-devices file does not exist (create it, or use --enroll to record devices as they connect)",
                        ),
                    });
                }
                (Some(p.clone()), false, false)
            }
            Admission::Enroll(p) => (Some(p.clone()), true, true),
            Admission::Open => (None, false, true),
        };
        // Built in one go from the sorted pins: full nodes, names in their own allocations.
        let names = match &path {
            Some(p) => KnownKeysFile::new(p)
                .pins()?
                .into_iter()
                .map(|(name, key)| (key, name.into_boxed_str()))
                .collect(),
            None => BTreeMap::new(),
        };
        let enroll = match (&path, enroll) {
            (Some(p), true) => Some(spawn_recorder(p)),
            _ => None,
        };
        Ok(KnownDevices {
            enroll,
            open,
            names: RwLock::new(names),
            path,
        })
    }

    /// At most `limit` of the listed devices whose id sorts after `after` and that `keep`
    /// keeps, as (id, name), by id.
    pub fn after(
        &self,
        after: Option<&str>,
        limit: usize,
        keep: impl Fn(&str) -> bool,
    ) -> Vec<(String, String)> {
        let names = self.names.read().unwrap_or_else(|e| e.into_inner());
        // An id that is a key starts the range at once; any other cursor (a plaintext device's
        // `plain-…` id) is passed by comparing ids.
        let key: Option<[u8; 32]> = after
            .and_then(|a| hex::decode(a).ok())
            .and_then(|k| k.try_into().ok());
        let from = key.map_or(Bound::Unbounded, Bound::Excluded);
        names
            .range((from, Bound::Unbounded))
            .map(|(k, n)| (hex::encode(k), n))
            .filter(|(id, _)| key.is_some() || after.is_none_or(|a| id.as_str() > a))
            .filter(|(id, _)| keep(id))
            .take(limit)
            .map(|(id, n)| (id, n.to_string()))
            .collect()
    }

    /// The name of the device with id `id` (its key in hex) if it is on the list.
    pub fn name_of(&self, id: &str) -> Option<String> {
        let key: [u8; 32] = hex::decode(id).ok()?.try_into().ok()?;
        let names = self.names.read().unwrap_or_else(|e| e.into_inner());
        names.get(&key).map(|n| n.to_string())
    }

    /// Devices on the list (allow-listed and enrolled).
    pub fn len(&self) -> usize {
        self.names.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// `true` when the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file the policy reads (and, enrolling, writes).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Admits the device with identity `key`, returning its name; under enrolment a newcomer
    /// is given a name and recorded.
    pub fn admit(&self, key: &[u8; 32]) -> Result<Option<String>, Refusal> {
        if let Some(name) = self
            .names
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return Ok(Some(name.to_string()));
        }
        if !self.open {
            return Err(Refusal::NotAllowed);
        }
        let Some(recorder) = &self.enroll else {
            return Ok(None);
        };
        let hex = to_hex(key);
        let name = format!("device-{}", &hex[..8]);
        let mut names = self.names.write().unwrap_or_else(|e| e.into_inner());
        let name = names.entry(*key).or_insert_with(|| {
            let _ = recorder.send((name.clone(), *key));
            tracing::info!(device = %hex, %name, "enrolled a new device");
            name.into_boxed_str()
        });
        Ok(Some(name.to_string()))
    }
}

/// The task that writes enrolled devices to the file, every newcomer of a second in one write.
fn spawn_recorder(path: &Path) -> mpsc::UnboundedSender<(String, [u8; 32])> {
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, [u8; 32])>();
    let file = KnownKeysFile::new(path);
    tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let mut batch = vec![first];
            while let Ok(next) = rx.try_recv() {
                batch.push(next);
            }
            let file = file.clone();
            let written =
                tokio::task::spawn_blocking(move || file.put_all(&batch).map(|()| batch.len()))
                    .await;
            match written {
                Ok(Ok(n)) => tracing::debug!("recorded {n} enrolled devices"),
                Ok(Err(e)) => tracing::warn!("cannot record enrolled devices: {e}"),
                Err(e) => tracing::warn!("cannot record enrolled devices: {e}"),
            }
        }
    });
    tx
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_allow_list_admits_its_keys_by_name_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("devices.json");
        std::fs::write(&path, format!("{{\"kitchen\": \"{}\"}}", "ab".repeat(32))).unwrap();
        let k = KnownDevices::load(&Admission::AllowList(path.clone())).unwrap();
        assert_eq!(k.admit(&[0xab; 32]), Ok(Some("kitchen".into())));
        assert_eq!(k.admit(&[1; 32]), Err(Refusal::NotAllowed));
        let e = KnownDevices::load(&Admission::AllowList(dir.path().join("none.json")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--enroll"), "{e}");
    }

    #[tokio::test]
    async fn enrolment_names_and_records_newcomers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("devices.json");
        let k = KnownDevices::load(&Admission::Enroll(path.clone())).unwrap();
        let name = k.admit(&[0x12; 32]).unwrap().unwrap();
        assert_eq!(name, "device-12121212");
        assert_eq!(k.admit(&[0x12; 32]).unwrap().unwrap(), name);
        // Written within the batch second; a new allow-list on the file admits exactly it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !path.exists() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let again = KnownDevices::load(&Admission::AllowList(path)).unwrap();
        assert_eq!(again.admit(&[0x12; 32]), Ok(Some(name.clone())));
        assert_eq!(again.admit(&[0x13; 32]), Err(Refusal::NotAllowed));
        assert_eq!(again.after(None, 5, |_| true), [("12".repeat(32), name)]);
    }

    #[test]
    fn the_list_pages_by_id_after_a_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("devices.json");
        let (a, b, c) = ("0a".repeat(32), "bb".repeat(32), "cc".repeat(32));
        std::fs::write(&path, format!(r#"{{"c": "{c}", "a": "{a}", "b": "{b}"}}"#)).unwrap();
        let k = KnownDevices::load(&Admission::AllowList(path)).unwrap();
        let ids = |after: Option<&str>, limit| -> Vec<String> {
            k.after(after, limit, |id| !id.starts_with('b'))
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        };
        assert_eq!(ids(None, 5), [a.clone(), c.clone()]);
        assert_eq!(ids(None, 1), std::slice::from_ref(&a));
        assert_eq!(ids(Some(&a), 5), std::slice::from_ref(&c));
        // A cursor that is not a key: by comparing ids ("0b…" sorts after "0a…").
        assert_eq!(ids(Some("0b"), 5), [c]);
        assert!(ids(Some("plain-tcp-1"), 5).is_empty());
    }
}
