//! How [`connect`](crate::connect) reaches and trusts a peripheral: [`ConnectOptions`], checked
//! and turned into the runtime's link options and [`ClientConfig`].
//!
//! Pinning is on by default, as in the runtime: with no option set, the peripheral's identity
//! key is pinned on first use in the default known-keys file
//! ([`KnownKeysFile::default_path`]) and a different key later is refused. Accepting any key
//! (`allow_any_key`) or an unencrypted peripheral (`allow_plaintext`) must be asked for.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use blerpc::ClientConfig;
use blerpc::client::PinPolicy;
use blerpc::known_keys::{KnownKeysFile, parse_key};
use blerpc::link::connect::ConnectOptions as LinkOptions;

use crate::BlerpcError;
use crate::keys::{AppKeyStore, KeyStore};

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("trust_key", &self.trust_key)
            .field("known_keys_file", &self.known_keys_file)
            .field("key_store", &self.key_store.as_ref().map(|_| "app"))
            .field("device_id", &self.device_id)
            .field("allow_any_key", &self.allow_any_key)
            .field("allow_plaintext", &self.allow_plaintext)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_server_name", &self.tls_server_name)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "…"))
            .finish()
    }
}

/// The connect timeout when none is given: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u32 = 10_000;

/// How to reach and trust a peripheral. Every field has a default: the empty options pin the
/// peripheral's key on first use in the default known-keys file and require encryption.
#[derive(Clone, uniffi::Record)]
pub struct ConnectOptions {
    /// The peripheral's Ed25519 identity key, 64 hex digits (what `blerpc serve` prints after
    /// `identity`): only this key is accepted (`IDENTITY_REJECTED` otherwise). Excludes
    /// `known_keys_file` and `allow_any_key`.
    #[uniffi(default = None)]
    pub trust_key: Option<String>,
    /// Trust on first use with the pins in this JSON file (the reference central's format):
    /// the first key seen for the device is pinned, a different one later is refused
    /// (`IDENTITY_CHANGED`). Default: `$XDG_CONFIG_HOME/blerpc/known_keys.json`.
    #[uniffi(default = None)]
    pub known_keys_file: Option<String>,
    /// Trust on first use with the pins in this store the app provides (see [`KeyStore`]),
    /// instead of the known-keys file. Excludes `trust_key`, `known_keys_file` and
    /// `allow_any_key`.
    #[uniffi(default = None)]
    pub key_store: Option<Arc<dyn KeyStore>>,
    /// The name the pin is kept under in the known-keys file or `key_store`. Default: the
    /// link's peer id (the URL, `tcp://HOST:PORT`; a GATT link's `peer_id`).
    #[uniffi(default = None)]
    pub device_id: Option<String>,
    /// Accept any identity key, pinning none: an explicit opt-out, open to a man in the
    /// middle.
    #[uniffi(default = false)]
    pub allow_any_key: bool,
    /// Accept a peripheral that offers no encryption (`ENCRYPTION_UNAVAILABLE` otherwise).
    #[uniffi(default = false)]
    pub allow_plaintext: bool,
    /// Milliseconds for the link to open and setup (and the key exchange) to complete
    /// (`SETUP_TIMEOUT` after). Default 10,000.
    #[uniffi(default = 10000)]
    pub connect_timeout_ms: u32,
    /// `tls://` and `wss://`: the CA that signed the server's certificate (PEM file).
    #[uniffi(default = None)]
    pub tls_ca_file: Option<String>,
    /// `tls://` and `wss://`: the name the certificate must carry. Default: the URL's host.
    #[uniffi(default = None)]
    pub tls_server_name: Option<String>,
    /// `ws://` and `wss://`: a bearer token sent with the upgrade (a device gateway's relay).
    #[uniffi(default = None)]
    pub bearer_token: Option<String>,
    /// Calls the connection keeps in flight at most, 1 to 8 (default 4; a further call at once
    /// fails with `TOO_MANY_CALLS`). Above 4 the connection runs a larger call table (about
    /// 1 KB more); a peripheral that holds fewer answers the rest BUSY, which the connection
    /// retries while the peripheral answers others.
    #[uniffi(default = 4)]
    pub max_calls_in_flight: u32,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            trust_key: None,
            known_keys_file: None,
            key_store: None,
            device_id: None,
            allow_any_key: false,
            allow_plaintext: false,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            tls_ca_file: None,
            tls_server_name: None,
            bearer_token: None,
            max_calls_in_flight: blerpc::client::DEFAULT_CALLS_IN_FLIGHT as u32,
        }
    }
}

/// What [`ConnectOptions`] resolve to.
pub(crate) struct Resolved {
    pub link: LinkOptions,
    pub config: ClientConfig,
    pub timeout: Duration,
}

impl ConnectOptions {
    /// Checks the options and gives the runtime's; every refusal is `INVALID_ARGUMENT`.
    pub(crate) fn resolve(&self) -> Result<Resolved, BlerpcError> {
        let chosen = [
            self.trust_key.is_some(),
            self.known_keys_file.is_some(),
            self.key_store.is_some(),
            self.allow_any_key,
        ];
        if chosen.into_iter().filter(|&c| c).count() > 1 {
            return Err(BlerpcError::invalid(
                "trust_key, known_keys_file, key_store and allow_any_key exclude each other: give one",
            ));
        }
        let pinning = if let Some(key) = &self.trust_key {
            PinPolicy::Trust(parse_key(key).ok_or_else(|| {
                BlerpcError::invalid(format!(
                    "trust_key {key:?} is not an identity key: expected 64 hex digits"
                ))
            })?)
        } else if let Some(store) = &self.key_store {
            PinPolicy::Store(Arc::new(AppKeyStore(store.clone())))
        } else if self.allow_any_key {
            PinPolicy::NoPin
        } else {
            let path = self
                .known_keys_file
                .as_ref()
                .map_or_else(KnownKeysFile::default_path, PathBuf::from);
            PinPolicy::KnownKeys(KnownKeysFile::new(path))
        };
        let mut config = ClientConfig {
            pinning,
            device_id: self.device_id.clone(),
            ..ClientConfig::default()
        };
        config.central.require_encryption = !self.allow_plaintext;
        let most = blerpc::client::MAX_CALLS_IN_FLIGHT;
        config.central.max_calls_in_flight = usize::try_from(self.max_calls_in_flight)
            .ok()
            .filter(|n| (1..=most).contains(n))
            .ok_or_else(|| {
                BlerpcError::invalid(format!(
                    "max_calls_in_flight {} is outside 1 to {most}",
                    self.max_calls_in_flight
                ))
            })?;
        let link = LinkOptions {
            bearer: self.bearer_token.clone(),
            ..LinkOptions::default()
        };
        let link = self.with_tls(link)?;
        Ok(Resolved {
            link,
            config,
            timeout: Duration::from_millis(u64::from(self.connect_timeout_ms)),
        })
    }

    #[cfg(feature = "tls")]
    fn with_tls(&self, mut link: LinkOptions) -> Result<LinkOptions, BlerpcError> {
        use blerpc::link::tls::TlsClientConfig;
        if let Some(ca) = &self.tls_ca_file {
            let trust = TlsClientConfig::with_ca_file(ca)
                .map_err(|e| BlerpcError::invalid(format!("tls_ca_file {ca}: {e}")))?;
            link.tls = Some(match &self.tls_server_name {
                Some(name) => trust.server_name(name),
                None => trust,
            });
        }
        Ok(link)
    }

    #[cfg(not(feature = "tls"))]
    fn with_tls(&self, link: LinkOptions) -> Result<LinkOptions, BlerpcError> {
        match &self.tls_ca_file {
            Some(_) => Err(BlerpcError::invalid(
                "tls_ca_file: this build has no TLS (the `tls` feature of blerpc-ffi)",
            )),
            None => Ok(link),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29";

    fn refusal(options: ConnectOptions) -> String {
        match options.resolve() {
            Err(BlerpcError::InvalidArgument { code, detail }) => {
                assert_eq!(code, "INVALID_ARGUMENT");
                detail
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn the_empty_options_pin_on_first_use_and_require_encryption() {
        let r = ConnectOptions::default()
            .resolve()
            .unwrap_or_else(|e| panic!("{e}"));
        match r.config.pinning {
            PinPolicy::KnownKeys(f) => assert_eq!(f.path(), KnownKeysFile::default_path()),
            other => panic!("{other:?}"),
        }
        assert!(r.config.central.require_encryption);
        assert_eq!(r.timeout, Duration::from_secs(10));
    }

    #[test]
    fn calls_in_flight_are_four_by_default_and_at_most_eight() {
        let r = ConnectOptions::default()
            .resolve()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.config.central.max_calls_in_flight, 4);
        let r = ConnectOptions {
            max_calls_in_flight: 8,
            ..Default::default()
        }
        .resolve()
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.config.central.max_calls_in_flight, 8);
        for bad in [0, 9, u32::MAX] {
            let detail = refusal(ConnectOptions {
                max_calls_in_flight: bad,
                ..Default::default()
            });
            assert!(detail.contains("outside 1 to 8"), "{detail}");
        }
    }

    #[test]
    fn a_trusted_key_is_parsed_and_anything_else_refused() {
        let r = ConnectOptions {
            trust_key: Some(KEY.to_uppercase()),
            ..Default::default()
        }
        .resolve()
        .unwrap_or_else(|e| panic!("{e}"));
        match r.config.pinning {
            PinPolicy::Trust(k) => {
                assert_eq!(&k[..4], &[0x3b, 0x6a, 0x27, 0xbc]);
                assert_eq!(k[31], 0x29);
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            "",
            "3b6a",
            &KEY[1..],
            &format!("0x{KEY}"),
            &KEY.replace('3', "g"),
        ] {
            let detail = refusal(ConnectOptions {
                trust_key: Some(bad.to_string()),
                ..Default::default()
            });
            assert!(detail.contains("64 hex digits"), "{detail}");
        }
    }

    #[test]
    fn pinning_options_exclude_each_other() {
        let both = ConnectOptions {
            trust_key: Some(KEY.into()),
            known_keys_file: Some("k.json".into()),
            ..Default::default()
        };
        let any_and_key = ConnectOptions {
            trust_key: Some(KEY.into()),
            allow_any_key: true,
            ..Default::default()
        };
        for o in [both, any_and_key] {
            assert!(refusal(o).contains("exclude each other"));
        }
        let r = ConnectOptions {
            allow_any_key: true,
            allow_plaintext: true,
            ..Default::default()
        }
        .resolve()
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(r.config.pinning, PinPolicy::NoPin));
        assert!(!r.config.central.require_encryption);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn an_unreadable_ca_file_is_refused() {
        let detail = refusal(ConnectOptions {
            tls_ca_file: Some("/nonexistent/ca.pem".into()),
            ..Default::default()
        });
        assert!(
            detail.starts_with("tls_ca_file /nonexistent/ca.pem"),
            "{detail}"
        );
    }
}
