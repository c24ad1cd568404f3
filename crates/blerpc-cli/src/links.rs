//! The link flags: TLS trust from `--tls-ca` / `--tls-cert-pin`, and the runtime's link errors
//! ([`ConnectError`], [`ListenError`]) said in the words of the flags that fix them.

use std::path::PathBuf;

use anyhow::{anyhow, bail};
use blerpc::blerpc_proto::connection::CloseReason;
use blerpc::client::{CentralError, IdentityError};
use blerpc::link::connect::ConnectError;
use blerpc::link::listen::ListenError;
use blerpc::link::tls::TlsClientConfig;

/// The client's TLS trust from a CA file or a pinned certificate file (at most one), verified
/// against `server_name` if given.
pub fn tls_trust(
    ca: Option<&PathBuf>,
    pin: Option<&PathBuf>,
    server_name: Option<&str>,
) -> anyhow::Result<Option<TlsClientConfig>> {
    let config = match (ca, pin) {
        (Some(_), Some(_)) => bail!("--tls-ca and --tls-cert-pin exclude each other"),
        (Some(ca), None) => TlsClientConfig::with_ca_file(ca)?,
        (None, Some(pin)) => TlsClientConfig::with_pinned_cert_file(pin)?,
        (None, None) => return Ok(None),
    };
    Ok(Some(match server_name {
        Some(n) => config.server_name(n),
        None => config,
    }))
}

/// The flags that give a client its TLS trust, for a message.
pub struct TrustFlags {
    /// The CA flag (`--tls-ca`).
    pub ca: &'static str,
    /// The pinned-certificate flag (`--tls-cert-pin`).
    pub pin: &'static str,
}

/// `blerpc call`'s and `upload`'s trust flags.
pub const CALL_TRUST: TrustFlags = TrustFlags {
    ca: "--tls-ca",
    pin: "--tls-cert-pin",
};

/// A failed connection as one message, with what to do about it.
pub fn connect_error(e: ConnectError, trust: &TrustFlags) -> anyhow::Error {
    match e {
        ConnectError::NoTlsTrust { url } => anyhow!(
            "{url} needs TLS trust: pass {} FILE (the CA that signed the server's certificate) \
             or {} FILE (the server's certificate)",
            trust.ca,
            trust.pin
        ),
        ConnectError::Unsupported { url, feature } => unsupported(&url, feature),
        ConnectError::Setup { url, source } => match *source {
            blerpc::Error::Central(CentralError::Identity(why @ IdentityError::Changed { .. })) => {
                anyhow!("{url}: {why}, or pass --trust-key HEX")
            }
            blerpc::Error::Central(CentralError::Identity(why)) => anyhow!("{url}: {why}"),
            other @ blerpc::Error::Central(CentralError::Setup(CloseReason::IdentityRejected)) => {
                anyhow!(
                    "connection setup with {url} failed: {other}; check --trust-key against the \
                     `identity` that `blerpc serve` printed"
                )
            }
            other => anyhow!("connection setup with {url} failed: {other}"),
        },
        e @ ConnectError::Ble { .. } => {
            let chain = format!("{:#}", anyhow::Error::new(e));
            anyhow!("{chain}; try `blerpc scan`")
        }
        other => other.into(),
    }
}

/// A listener that could not be bound or served, with what to do about it.
pub fn listen_error(e: ListenError) -> anyhow::Error {
    match e {
        ListenError::NoCertificate { url } => {
            anyhow!("{url} needs a certificate: pass --tls-cert FILE and --tls-key FILE (PEM)")
        }
        ListenError::Unsupported { url, feature } => unsupported(&url, feature),
        other => other.into(),
    }
}

/// A link this build lacks, and how to build it in.
fn unsupported(url: &impl std::fmt::Display, feature: &str) -> anyhow::Error {
    anyhow!(
        "{url}: this blerpc was built without {feature}; rebuild with `cargo build -p blerpc-cli \
         --features {feature}`"
    )
}
