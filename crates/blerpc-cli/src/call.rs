//! `blerpc call` and `blerpc upload`: one command against a peripheral, JSON in and out.
//!
//! Requests and responses are protobuf on the wire and JSON here (the proto3 JSON mapping, via
//! [`blerpc_schema`]). A unary call prints one line; a peripheral→central stream prints one line
//! per item; `upload` sends one item per line of stdin and prints the final response.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use blerpc::blerpc_proto::connection::{CallError, SetupPipelining};
use blerpc::blerpc_proto::wire::error_code::ErrorCode;
use blerpc::client::{PinPolicy, TofuOutcome};
use blerpc::known_keys::{KnownKeysFile, parse_key, to_hex};
use blerpc::server::CallKind;
use blerpc::{Client, ClientConfig};
use clap::Args;
use futures_util::StreamExt as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

use blerpc::link::connect::{ConnectOptions, connect};
use blerpc::link::url::LinkUrl;
use blerpc_schema::{Method, Schema};

use crate::links::{CALL_TRUST, connect_error, tls_trust};

/// How to reach and trust the peripheral (shared by `call` and `upload`).
#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The peripheral: tcp://HOST:PORT, tls://…, ws://…, wss://…, serial:///dev/ttyX, ble:// or ble://NAME.
    #[arg(long, value_name = "URL")]
    pub connect: String,
    /// Pin identities in this known-keys file (trust on first use). Default:
    /// $XDG_CONFIG_HOME/blerpc/known_keys.json.
    #[arg(long, value_name = "FILE", group = "pin")]
    pub known_keys: Option<PathBuf>,
    /// Accept only this identity (Ed25519 public key, 64 hex digits).
    #[arg(long, value_name = "HEX", group = "pin")]
    pub trust_key: Option<String>,
    /// Accept any identity (open to a man in the middle).
    #[arg(long, group = "pin")]
    pub no_pin: bool,
    /// Allow a peripheral that does not encrypt (`blerpc serve --plaintext`).
    #[arg(long)]
    pub plaintext: bool,
    /// For tls:// and wss://: trust the CA in this PEM file.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// For tls:// and wss://: trust exactly this server certificate (PEM).
    #[arg(long, value_name = "FILE")]
    pub tls_cert_pin: Option<PathBuf>,
    /// For tls:// and wss://: the name to verify the certificate against (default: the host).
    #[arg(long, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// Serial baud rate (serial:// only).
    #[arg(long, value_name = "N")]
    pub baud: Option<u32>,
    /// For ws:// and wss://: send `Authorization: Bearer TOKEN` with the upgrade (a device
    /// gateway's relayed link, `wss://GATEWAY/v1/devices/ID/link`, needs one). Also read from
    /// $BLERPC_TOKEN.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "BLERPC_TOKEN",
        hide_env_values = true
    )]
    pub bearer: Option<String>,
    /// Seconds to wait for each response (and for connecting).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub timeout: f64,
    /// Which setup requests go out without waiting for the previous reply. Default: the link's
    /// (key-exchange on tcp/tls/ws/serial, requests on ble).
    #[arg(long, value_name = "MODE")]
    pub setup_pipelining: Option<PipeliningArg>,
}

/// `--setup-pipelining` values.
#[derive(Clone, Copy, Debug, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
pub enum PipeliningArg {
    /// Each setup request after the previous reply (the reference centrals' order).
    Off,
    /// TIMEOUT and CAPABILITIES together (one round trip fewer).
    Requests,
    /// TIMEOUT, CAPABILITIES and key-exchange step 1 together (two round trips fewer).
    KeyExchange,
}

impl From<PipeliningArg> for SetupPipelining {
    fn from(arg: PipeliningArg) -> Self {
        match arg {
            PipeliningArg::Off => SetupPipelining::Off,
            PipeliningArg::Requests => SetupPipelining::Requests,
            PipeliningArg::KeyExchange => SetupPipelining::KeyExchange,
        }
    }
}

/// `blerpc call` options.
#[derive(Debug, Args)]
pub struct CallArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub connect: ConnectArgs,
    /// The command: echo, flash_read, data_write, counter_stream.
    pub command: String,
    /// The request as JSON, e.g. '{"message":"hi"}'. Default: {} (all fields zero).
    pub json: Option<String>,
}

/// `blerpc upload` options.
#[derive(Debug, Args)]
pub struct UploadArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub connect: ConnectArgs,
    /// A central→peripheral stream command: counter_upload.
    pub command: String,
}

impl ConnectArgs {
    fn timeout(&self) -> anyhow::Result<Duration> {
        Duration::try_from_secs_f64(self.timeout)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                anyhow!(
                    "--timeout {} is not a positive number of seconds",
                    self.timeout
                )
            })
    }

    fn client_config(&self) -> anyhow::Result<ClientConfig> {
        let pinning = if let Some(hex) = &self.trust_key {
            PinPolicy::Trust(parse_key(hex).ok_or_else(|| {
                anyhow!("--trust-key must be an Ed25519 public key as 64 hex digits (the `identity` that `blerpc serve` prints)")
            })?)
        } else if self.no_pin {
            PinPolicy::NoPin
        } else {
            let path = self
                .known_keys
                .clone()
                .unwrap_or_else(KnownKeysFile::default_path);
            PinPolicy::KnownKeys(KnownKeysFile::new(path))
        };
        let mut config = ClientConfig {
            pinning,
            setup_pipelining: self.setup_pipelining.map(SetupPipelining::from),
            ..Default::default()
        };
        config.central.require_encryption = !self.plaintext;
        let timeout = self.timeout()?;
        config.central.call_timeout = timeout;
        config.central.stream_idle_timeout = timeout;
        Ok(config)
    }

    /// Connects, bounded by `--timeout`.
    pub async fn open(&self) -> anyhow::Result<Client> {
        let url: LinkUrl = self.connect.parse()?;
        let options = ConnectOptions {
            tls: tls_trust(
                self.tls_ca.as_ref(),
                self.tls_cert_pin.as_ref(),
                self.tls_server_name.as_deref(),
            )?,
            baud_rate: self.baud,
            bearer: self.bearer.clone(),
            ..ConnectOptions::default()
        };
        let config = self.client_config()?;
        let store = match &config.pinning {
            PinPolicy::KnownKeys(store) => Some(store.path().to_owned()),
            _ => None,
        };
        let timeout = self.timeout()?;
        let client = tokio::time::timeout(timeout, connect(&url, &options, config))
            .await
            .map_err(|_| {
                anyhow!(
                    "connecting to {url} timed out after {timeout:?}; is a server listening there?"
                )
            })?
            .map_err(|e| connect_error(e, &CALL_TRUST))?;
        let info = client.info();
        if let (Some(path), Some(TofuOutcome::FirstUse), Some(key)) =
            (store, info.pinned, info.peer_identity)
        {
            eprintln!(
                "blerpc: first connection to {}: pinned its identity {} in {} (trust on first \
                 use); a different key from it will be refused",
                info.peer_id,
                to_hex(&key),
                path.display()
            );
        }
        Ok(client)
    }
}

fn method_of(command: &str, want: &[CallKind], hint: &str) -> anyhow::Result<Method> {
    let method = Schema::demo().method(command)?;
    if !want.contains(&method.kind()) {
        bail!("{command} {hint}");
    }
    Ok(method)
}

/// A failed call as one line: `what: cause`, and where to look when the peripheral sent only
/// an error code.
fn failed(e: blerpc::Error, what: String) -> anyhow::Error {
    let hint = match &e {
        blerpc::Error::Central(blerpc::client::CentralError::Call(CallError::Peer(
            ErrorCode::HandlerFailed,
        ))) => " (the code is all bleRPC sends; the server's log says why)",
        _ => "",
    };
    anyhow!("{what}: {e}{hint}")
}

async fn print_line(out: &mut tokio::io::Stdout, line: &str) -> anyhow::Result<()> {
    out.write_all(line.as_bytes()).await?;
    out.write_all(b"\n").await?;
    out.flush().await.context("cannot write to stdout")
}

/// Runs `blerpc call`.
pub async fn call(args: &CallArgs) -> anyhow::Result<()> {
    let method = method_of(
        &args.command,
        &[CallKind::Unary, CallKind::ServerStream],
        "is a central→peripheral stream: send its items with `blerpc upload`, one JSON per line on stdin",
    )?;
    // Check the request before connecting.
    let request = method.encode_request(args.json.as_deref().unwrap_or("{}"))?;
    let client = args.connect.open().await?;
    let name = method.name();
    let mut out = tokio::io::stdout();
    let result = async {
        match method.kind() {
            CallKind::ServerStream => {
                let mut stream = client
                    .server_stream(name, request)
                    .await
                    .map_err(|e| failed(e, format!("{name} failed")))?;
                while let Some(item) = stream.next().await {
                    let item = item.map_err(|e| failed(e, format!("{name} stream failed")))?;
                    print_line(&mut out, &method.decode_response(&item)?).await?;
                }
            }
            _ => {
                let response = client
                    .call(name, request)
                    .await
                    .map_err(|e| failed(e, format!("{name} failed")))?;
                print_line(&mut out, &method.decode_response(&response)?).await?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    client.close().await;
    result
}

/// Runs `blerpc upload`: one item per non-empty line of stdin.
pub async fn upload(args: &UploadArgs) -> anyhow::Result<()> {
    let method = method_of(
        &args.command,
        &[CallKind::ClientStream],
        "is not a central→peripheral stream: use `blerpc call`",
    )?;
    let client = args.connect.open().await?;
    let name = method.name();
    let result = async {
        let mut upload = client
            .client_stream(name)
            .await
            .with_context(|| format!("{name} failed to start"))?;
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        let mut n = 0usize;
        while let Some(line) = lines.next_line().await.context("cannot read stdin")? {
            n += 1;
            if line.trim().is_empty() {
                continue;
            }
            let item = method
                .encode_request(&line)
                .with_context(|| format!("stdin line {n}"))?;
            upload
                .send(item)
                .await
                .map_err(|e| failed(e, format!("{name}: sending item of line {n} failed")))?;
        }
        let response = upload
            .finish()
            .await
            .map_err(|e| failed(e, format!("{name} failed")))?;
        print_line(
            &mut tokio::io::stdout(),
            &method.decode_response(&response)?,
        )
        .await
    }
    .await;
    client.close().await;
    result
}
