//! Pins kept by the application: [`KeyStore`], for [`PinPolicy::Store`](crate::client::PinPolicy::Store).
//!
//! Trust on first use is the core's decision ([`tofu_verify`](blerpc_proto::handshake::tofu_verify)
//! in the call table): the first identity key seen for a device is pinned, a different one later
//! is refused (`IDENTITY_CHANGED`), and a store that fails refuses the connection (`KEY_STORE`).
//! A store only keeps the pins. The runtime has two: the known-keys file
//! ([`KnownKeysFile`], the default) and whatever the application provides through this trait (a
//! phone's keychain or preferences, a database, the bindings' foreign key store).

use std::sync::Arc;

use blerpc_proto::handshake::KnownKeys;

use crate::known_keys::{KnownKeysError, KnownKeysFile};

/// A store of pinned identity keys the application provides. Its methods are called on the
/// connection's task during setup (one `get`, and a `put` on first use): keep them quick.
pub trait KeyStore: Send + Sync + std::fmt::Debug + 'static {
    /// The key pinned for `device_id`, if any.
    fn get(&self, device_id: &str) -> Result<Option<[u8; 32]>, KeyStoreError>;
    /// Pins `key` for `device_id` (called only when none was pinned).
    fn put(&self, device_id: &str, key: &[u8; 32]) -> Result<(), KeyStoreError>;
    /// Where the pins are, for messages. Default: "the application's key store".
    fn describe(&self) -> String {
        "the application's key store".to_string()
    }
}

/// A [`KeyStore`] that could not read or keep a pin: the connection is refused (`KEY_STORE`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyStoreError(pub String);

/// The store behind trust on first use in the client's call table.
#[derive(Clone, Debug)]
pub(crate) enum PinStore {
    /// The known-keys file.
    File(KnownKeysFile),
    /// The application's store.
    App(Arc<dyn KeyStore>),
}

/// Why a [`PinStore`] failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PinStoreError {
    #[error(transparent)]
    File(#[from] KnownKeysError),
    #[error("{store}: {source}")]
    App {
        store: String,
        source: KeyStoreError,
    },
}

impl PinStore {
    fn app_error(store: &dyn KeyStore, source: KeyStoreError) -> PinStoreError {
        PinStoreError::App {
            store: store.describe(),
            source,
        }
    }
}

impl KnownKeys for PinStore {
    type Error = PinStoreError;

    fn get(&self, device_id: &str) -> Result<Option<[u8; 32]>, PinStoreError> {
        match self {
            PinStore::File(file) => Ok(file.get(device_id)?),
            PinStore::App(store) => store
                .get(device_id)
                .map_err(|e| PinStore::app_error(store.as_ref(), e)),
        }
    }

    fn put(&mut self, device_id: &str, key: &[u8; 32]) -> Result<(), PinStoreError> {
        match self {
            PinStore::File(file) => Ok(file.put(device_id, key)?),
            PinStore::App(store) => store
                .put(device_id, key)
                .map_err(|e| PinStore::app_error(store.as_ref(), e)),
        }
    }

    fn describe(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PinStore::File(file) => file.describe(f),
            PinStore::App(store) => f.write_str(&store.describe()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use blerpc_proto::handshake::{TofuError, TofuOutcome, tofu_verify};

    use super::*;

    /// An application's store in memory, refusing every `put` when `full`.
    #[derive(Debug, Default)]
    struct Memory {
        pins: Mutex<BTreeMap<String, [u8; 32]>>,
        full: bool,
    }

    impl KeyStore for Memory {
        fn get(&self, device_id: &str) -> Result<Option<[u8; 32]>, KeyStoreError> {
            let pins = self
                .pins
                .lock()
                .map_err(|_| KeyStoreError("poisoned".into()))?;
            Ok(pins.get(device_id).copied())
        }
        fn put(&self, device_id: &str, key: &[u8; 32]) -> Result<(), KeyStoreError> {
            if self.full {
                return Err(KeyStoreError("keychain full".into()));
            }
            let mut pins = self
                .pins
                .lock()
                .map_err(|_| KeyStoreError("poisoned".into()))?;
            pins.insert(device_id.to_string(), *key);
            Ok(())
        }
    }

    #[test]
    fn an_app_store_pins_on_first_use_and_refuses_another_key() {
        let memory = Arc::new(Memory::default());
        let mut store = PinStore::App(memory.clone());
        assert!(matches!(
            tofu_verify(&mut store, "ble://a", &[1; 32]),
            Ok(TofuOutcome::FirstUse)
        ));
        assert_eq!(memory.get("ble://a"), Ok(Some([1; 32])));
        assert!(matches!(
            tofu_verify(&mut store, "ble://a", &[1; 32]),
            Ok(TofuOutcome::Matched)
        ));
        assert!(matches!(
            tofu_verify(&mut store, "ble://a", &[2; 32]),
            Err(TofuError::Mismatch { .. })
        ));
    }

    #[test]
    fn a_failing_app_store_names_itself() {
        let mut store = PinStore::App(Arc::new(Memory {
            full: true,
            ..Memory::default()
        }));
        match tofu_verify(&mut store, "ble://a", &[1; 32]) {
            Err(TofuError::Store(e)) => {
                assert_eq!(e.to_string(), "the application's key store: keychain full")
            }
            other => panic!("{other:?}"),
        }
    }
}
