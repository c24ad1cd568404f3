//! Streams on the simulated BLE link (the streams extension): items per second each way of a
//! bidirectional echo against the one-way streams' rates in the same run, and what the
//! peripheral's window (its buffer of unconsumed items) costs a central→peripheral stream.
//!
//! The runtime's server and client on the link, as in the rest of [`super`]; each case runs
//! on its own paused-clock runtime (virtual time) for `seconds` of link time after one item
//! each way has gone (the stream is open and its credits granted).
//!
//! | mode | the central | the peripheral |
//! |---|---|---|
//! | `down` | reads | sends items as fast as the central's credits allow (`source`) |
//! | `up` | sends items as fast as the peripheral's credits allow | consumes each (`sink`) |
//! | `both` | sends and reads at once | echoes each item (`chat`) |

use std::time::Duration;

use anyhow::Context as _;
use blerpc::client::PinPolicy;
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, Status};
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_sim::LinkParams;
use futures_util::StreamExt;

/// Which way items flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Peripheral → central only.
    Down,
    /// Central → peripheral only.
    Up,
    /// Both at once: each item echoed.
    Both,
}

impl Mode {
    /// The mode's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Down => "down",
            Mode::Up => "up",
            Mode::Both => "both",
        }
    }
}

/// One measured stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// Items the peripheral took from the central per second.
    pub up: f64,
    /// Items the central received per second.
    pub down: f64,
}

/// The bench's service: `source`, `sink` and `chat` with `item_len`-byte items.
struct Items {
    item_len: usize,
}

impl Dispatch for Items {
    fn kind(&self, name: &str) -> Option<CallKind> {
        match name {
            "source" | "sink" | "chat" => Some(CallKind::BidiStream),
            _ => None,
        }
    }
    fn unary(&self, _: &str, _: Bytes) -> BoxFuture<Result<Vec<u8>, Status>> {
        Box::pin(async { Err(Status::new(ErrorCode::UnknownCommand, "no unary command")) })
    }
    fn server_stream(&self, _: &str, _: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
        Box::pin(futures_util::stream::once(async {
            Err(Status::new(ErrorCode::UnknownCommand, "no server stream"))
        }))
    }
    fn client_stream(&self, _: &str, _: BoxStream<Bytes>) -> BoxFuture<Result<Vec<u8>, Status>> {
        Box::pin(async { Err(Status::new(ErrorCode::UnknownCommand, "no upload")) })
    }
    fn bidi_stream(
        &self,
        name: &str,
        items: BoxStream<Bytes>,
    ) -> BoxStream<Result<Vec<u8>, Status>> {
        let item = vec![0x5a; self.item_len];
        match name {
            // Items for as long as the call lasts (the central drops it at the end).
            "source" => Box::pin(futures_util::stream::repeat_with(move || Ok(item.clone()))),
            // Every item consumed; nothing sent until the central ends its half.
            "sink" => Box::pin(
                items
                    .filter_map(|_| async { None::<Result<Vec<u8>, Status>> })
                    .chain(futures_util::stream::empty()),
            ),
            _ => Box::pin(items.map(|item| Ok(item.to_vec()))),
        }
    }
}

/// One measured case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Case {
    /// Which way items flow.
    pub mode: Mode,
    /// Each side's window (`stream_window` of the central and the peripheral), in items.
    pub window: u16,
    /// Each item's bytes.
    pub item_len: usize,
    /// Both sides' `credit_delay`: `None` grants only half a window at a time.
    pub credit_delay: Option<Duration>,
}

impl Case {
    /// `mode` with `window` both ways, `item_len`-byte items and the cores' default
    /// `credit_delay`.
    pub fn new(mode: Mode, window: u16, item_len: usize) -> Self {
        Case {
            mode,
            window,
            item_len,
            credit_delay: blerpc_proto::connection::PeripheralConfig::default().credit_delay,
        }
    }
}

/// Runs `case` on a link with `params` for `seconds` of link time.
pub fn run(params: LinkParams, case: Case, seconds: f64) -> anyhow::Result<Rates> {
    let Case {
        mode,
        window,
        item_len,
        credit_delay,
    } = case;
    let rt = crate::ble::paused_runtime()?;
    rt.block_on(async {
        let mut server_config = ServerConfig {
            identity: Some(blerpc::identity::generate()),
            ..ServerConfig::default()
        };
        server_config.peripheral.stream_window = window;
        server_config.peripheral.credit_delay = credit_delay;
        let server = Server::new(Items { item_len }, server_config)?;
        let key = server.identity_public().context("no identity")?;
        let (central, link) = blerpc_sim::pair(params)?;
        tokio::spawn(async move { server.serve_link(link).await });
        let mut config = ClientConfig {
            pinning: PinPolicy::Trust(key),
            ..ClientConfig::default()
        };
        config.central.stream_window = window;
        config.central.credit_delay = credit_delay;
        let client = Client::connect(central, config)
            .await
            .context("connecting over the simulated link")?;
        let name = match mode {
            Mode::Down => "source",
            Mode::Up => "sink",
            Mode::Both => "chat",
        };
        let mut stream = client.bidi_stream(name).await?;
        let sender = stream.sender();
        let item = vec![0xa5; item_len];
        // Warm up: one item each way where the mode has one.
        if mode != Mode::Down {
            sender.send(item.clone()).await?;
        }
        if mode != Mode::Up {
            stream.next().await.context("the first item")??;
        }
        let start = tokio::time::Instant::now();
        let end = start + Duration::from_secs_f64(seconds);
        let sent = std::cell::Cell::new(0u64);
        let send = async {
            if mode == Mode::Down {
                return std::future::pending::<anyhow::Result<()>>().await;
            }
            loop {
                sender.send(item.clone()).await?;
                sent.set(sent.get() + 1);
            }
        };
        let got = std::cell::Cell::new(0u64);
        let receive = async {
            if mode == Mode::Up {
                return std::future::pending::<anyhow::Result<()>>().await;
            }
            while let Some(item) = stream.next().await {
                item?;
                got.set(got.get() + 1);
            }
            anyhow::bail!("the stream ended early")
        };
        let until = tokio::time::sleep_until(end);
        tokio::select! {
            r = send => r?,
            r = receive => r?,
            () = until => {}
        }
        let elapsed = start.elapsed().as_secs_f64();
        // Items the peripheral accepted: sent and granted room for (in flight are not counted,
        // at most one window).
        let up = sent.get() as f64 / elapsed;
        let down = got.get() as f64 / elapsed;
        client.close().await;
        Ok(Rates { up, down })
    })
}
