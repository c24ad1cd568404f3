//! Pins kept in a store the app provides: [`KeyStore`], given as
//! [`ConnectOptions::key_store`](crate::ConnectOptions::key_store).
//!
//! The store only keeps pins; trust on first use stays the core's (the runtime's
//! [`PinPolicy::Store`](blerpc::client::PinPolicy::Store)): the first identity key seen for a
//! device is pinned (`put`), the same key later matches, a different one is refused with
//! `IDENTITY_CHANGED`, and a store that fails (an exception, a value that is not a key)
//! refuses the connection with `KEY_STORE`. Without a store, pins go to the known-keys file.

use std::sync::Arc;

use blerpc::key_store::{KeyStore as RuntimeKeyStore, KeyStoreError};
use blerpc::known_keys::{parse_key, to_hex};

use crate::BlerpcError;

/// A store of pinned identity keys, implemented by the app (Android's `SharedPreferences` or
/// Keystore, the iOS Keychain, a database). Keys are 64 lowercase hex digits. Called on the
/// library's thread during setup (one `get`, then a `put` on first use): keep it quick.
#[uniffi::export(with_foreign)]
pub trait KeyStore: Send + Sync {
    /// The key pinned for `device_id`, if any.
    fn get(&self, device_id: String) -> Result<Option<String>, BlerpcError>;
    /// Pins `key` for `device_id` (called only when none is pinned).
    fn put(&self, device_id: String, key: String) -> Result<(), BlerpcError>;
}

/// The app's store, as the runtime's.
pub(crate) struct AppKeyStore(pub Arc<dyn KeyStore>);

impl std::fmt::Debug for AppKeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AppKeyStore")
    }
}

fn store_error(e: BlerpcError) -> KeyStoreError {
    KeyStoreError(e.to_string())
}

impl RuntimeKeyStore for AppKeyStore {
    fn get(&self, device_id: &str) -> Result<Option<[u8; 32]>, KeyStoreError> {
        match self.0.get(device_id.to_string()).map_err(store_error)? {
            None => Ok(None),
            Some(hex) => parse_key(&hex).map(Some).ok_or_else(|| {
                KeyStoreError(format!(
                    "the pin for {device_id:?} is not a key (64 hex digits): {hex:?}"
                ))
            }),
        }
    }

    fn put(&self, device_id: &str, key: &[u8; 32]) -> Result<(), KeyStoreError> {
        self.0
            .put(device_id.to_string(), to_hex(key))
            .map_err(store_error)
    }

    fn describe(&self) -> String {
        "the app's key store".to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Prefs(Mutex<BTreeMap<String, String>>);

    impl KeyStore for Prefs {
        fn get(&self, device_id: String) -> Result<Option<String>, BlerpcError> {
            Ok(self
                .0
                .lock()
                .map_err(|_| BlerpcError::invalid("poisoned"))?
                .get(&device_id)
                .cloned())
        }
        fn put(&self, device_id: String, key: String) -> Result<(), BlerpcError> {
            self.0
                .lock()
                .map_err(|_| BlerpcError::invalid("poisoned"))?
                .insert(device_id, key);
            Ok(())
        }
    }

    #[test]
    fn keys_cross_as_hex_and_a_bad_pin_is_a_store_error() {
        let prefs = Arc::new(Prefs::default());
        let store = AppKeyStore(prefs.clone());
        assert_eq!(store.get("ble://a"), Ok(None));
        assert_eq!(store.put("ble://a", &[0xab; 32]), Ok(()));
        assert_eq!(store.get("ble://a"), Ok(Some([0xab; 32])));
        assert_eq!(
            prefs
                .0
                .lock()
                .map(|m| m.get("ble://a").cloned())
                .ok()
                .flatten(),
            Some("ab".repeat(32))
        );
        prefs
            .0
            .lock()
            .map(|mut m| m.insert("ble://b".into(), "abc".into()))
            .ok();
        let e = store.get("ble://b").err();
        assert!(
            e.as_ref().is_some_and(|e| e.0.contains("not a key")),
            "{e:?}"
        );
    }
}
