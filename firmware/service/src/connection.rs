//! One bleRPC connection of the firmware: the core's [`Peripheral`] with no allocator and the
//! demo service answering its requests. Still sans-IO: the runtime (the GATT server on
//! trouble-host, or the in-memory central of the QEMU image) hands it each written PDU and the
//! time, sends what [`Connection::poll_transmit`] gives as notifications, and wakes it at
//! [`Connection::poll_timeout`].
//!
//! ```text
//!   GATT write ──> handle_pdu(now, pdu) ──> Peripheral::handle_input ──> events ──> Responder
//!   notify    <── poll_transmit(now, buf) <── Peripheral::poll_transmit <── responses, items
//!   timer     ──> handle_timeout(now)            poll_timeout() ──> when
//! ```

use blerpc_proto::Instant;
use blerpc_proto::buf::ArrayBuf;
use blerpc_proto::connection::{
    ConfigError, Peripheral, PeripheralCloseReason, PeripheralConfig, PeripheralEvent,
};
use blerpc_proto::crypto::CryptoProvider;
use rand_core::CryptoRngCore;

use blerpc_proto::wire::diagnostics::DIAGNOSTICS_COMMAND;

use crate::device::{ANSWER_BYTES, Device};
use blerpc_demo::chat::{CHAT, ChatEcho};
use blerpc_demo::flash::Flash;
use blerpc_demo::{DemoService, Responder, Stats, Work};
use blerpc_proto::wire::diagnostics::LinkFields;

/// The reassembly buffer: one request of up to 12,288 wire bytes, the reference firmware's
/// `CONFIG_BLERPC_PROTOCOL_ASSEMBLER_BUF_SIZE` (advertised as `max_request` in CAPABILITIES).
pub const REASSEMBLY_BYTES: usize = 12_288;
/// The outbox: one encrypted 8 KB `flash_read` response (8,229 wire bytes) plus the core's
/// 6-byte entry header, rounded up; the counter stream is paced to fit beside it.
pub const OUTBOX_BYTES: usize = 8_448;

/// The central→peripheral items of a `chat` stream the firmware holds unconsumed (its window
/// in the streams extension): each waits there until its echo is queued.
pub const CHAT_WINDOW: u16 = 2;
/// The longest `chat` item the firmware echoes (longer ones end the stream with
/// REQUEST_TOO_LARGE).
pub const CHAT_ITEM_BYTES: usize = 64;

/// The core's peripheral as the firmware instantiates it: no allocator, one reassembly slot.
/// The same type `crates/blerpc-proto/tests/memory.rs` measures on the host.
pub type FirmwarePeripheral<P, R> =
    Peripheral<P, R, ArrayBuf<REASSEMBLY_BYTES>, ArrayBuf<OUTBOX_BYTES>, 1>;

/// The peripheral configuration of the firmware: the core's defaults (the reference firmware's
/// values: ATT MTU 247, TIMEOUT 100 ms, max request 12,288, encryption required, at most
/// 10,000 stream items), with the outbox and the reassembly budget of the buffers above, the
/// cancel extension agreed to (a central that announces it can stop a response or a stream),
/// the streams extension (the counter stream sent against the central's credits, `chat`
/// both ways with a window of [`CHAT_WINDOW`]), and the diagnostics extension (`blerpc.diagnostics`
/// answered from the connection's [`Device`]).
pub fn firmware_config(require_encryption: bool) -> PeripheralConfig {
    PeripheralConfig {
        require_encryption,
        max_request_len: REASSEMBLY_BYTES,
        max_reassembly_bytes: REASSEMBLY_BYTES,
        max_outbox_bytes: OUTBOX_BYTES,
        cancel: true,
        streams: true,
        stream_window: CHAT_WINDOW,
        diagnostics: true,
        ..PeripheralConfig::default()
    }
}

/// Why a connection ended on the bleRPC side (the link closes after sending what is queued).
pub type CloseReason = PeripheralCloseReason;

/// One connection: the core and the demo service's responder.
pub struct Connection<P: CryptoProvider, R, F> {
    peripheral: FirmwarePeripheral<P, R>,
    service: Responder<F>,
    chat: ChatEcho<{ CHAT_WINDOW as usize }, CHAT_ITEM_BYTES>,
    closed: Option<CloseReason>,
    secured: bool,
    /// The device across connections, this one's counts added as they come.
    device: Device,
    /// The link as the BLE stack last reported it.
    link: LinkFields,
}

impl<P, R, F> Connection<P, R, F>
where
    P: CryptoProvider,
    P::Identity: Clone,
    R: CryptoRngCore,
    F: Flash,
{
    /// A connection just established at `now`; the central then has the configuration's
    /// `setup_timeout` to complete the key exchange.
    pub fn new(
        now: Instant,
        config: PeripheralConfig,
        provider: P,
        identity: Option<P::Identity>,
        rng: R,
        service: DemoService<F>,
    ) -> Result<Self, ConfigError> {
        let mut peripheral = FirmwarePeripheral::new(config, provider, identity, rng)?;
        peripheral.open(now);
        Ok(Connection {
            peripheral,
            service: Responder::new(service),
            chat: ChatEcho::default(),
            closed: None,
            secured: false,
            device: Device::new(now, env!("CARGO_PKG_VERSION"), None),
            link: LinkFields::default(),
        })
    }

    /// This connection belongs to `device` (the application's, across connections; the
    /// default is one that booted when the connection was created).
    pub fn with_device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// The device with this connection's counts so far: what the application keeps for the
    /// next connection.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The link as the BLE stack reports it now (the application sets it as the stack's
    /// events and reads arrive).
    pub fn set_link(&mut self, link: LinkFields) {
        self.link = link;
    }

    /// The ATT MTU changed (after the MTU exchange).
    pub fn set_att_mtu(&mut self, att_mtu: usize) -> Result<(), ConfigError> {
        self.peripheral.set_att_mtu(att_mtu)
    }

    /// Handles one PDU the central wrote.
    pub fn handle_pdu(&mut self, now: Instant, pdu: &[u8]) {
        // The event queue is drained after every input, so the core never refuses one; if it
        // did, draining and retrying once is what its contract asks.
        for _ in 0..2 {
            let accepted = self.peripheral.handle_input(now, pdu).is_ok();
            self.drain_events(now);
            if accepted {
                break;
            }
        }
    }

    /// Handles the passing of [`Connection::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.peripheral.handle_timeout(now);
        self.drain_events(now);
    }

    /// The next PDU to notify, into `out` (`att_mtu - 3` bytes). Pending stream items are
    /// queued as the outbox drains.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        if let Some(n) = self.peripheral.poll_transmit(now, out) {
            return Some(n);
        }
        if self.chat.is_open() {
            // Refused only when the stream ended (the core told the central) or the
            // connection is closing.
            let _ = self.chat.pump(now, &mut self.peripheral, false);
            if let Some(n) = self.peripheral.poll_transmit(now, out) {
                return Some(n);
            }
        }
        if self.service.is_streaming() {
            // A refusal other than a full outbox ended the stream: the core has told the
            // central, or the connection is closing.
            let _ = self.service.pump(now, &mut self.peripheral);
            return self.peripheral.poll_transmit(now, out);
        }
        None
    }

    /// When to call [`Connection::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.peripheral.poll_timeout()
    }

    /// Set once the core closed the connection for cause: send what is queued, then
    /// disconnect.
    pub fn closed(&self) -> Option<CloseReason> {
        self.closed
    }

    /// `true` once the key exchange completed.
    pub fn is_secured(&self) -> bool {
        self.secured
    }

    /// What the demo service counted.
    pub fn stats(&self) -> Stats {
        self.service.stats()
    }

    /// The core, for its accessors.
    pub fn peripheral(&self) -> &FirmwarePeripheral<P, R> {
        &self.peripheral
    }

    fn drain_events(&mut self, now: Instant) {
        loop {
            let work = match self.peripheral.poll_event() {
                None => break,
                Some(PeripheralEvent::Request { tid, name, .. }) if name == DIAGNOSTICS_COMMAND => {
                    self.answer_diagnostics(now, tid);
                    continue;
                }
                Some(PeripheralEvent::Request { tid, name, .. }) if name == CHAT => {
                    let _ = self.chat.open(now, &mut self.peripheral, tid);
                    continue;
                }
                Some(PeripheralEvent::StreamItem { stream, data, .. }) => {
                    if let Some(code) = self.chat.item(stream, data) {
                        let _ = self.peripheral.respond_error(now, stream, code);
                    }
                    continue;
                }
                Some(PeripheralEvent::ItemsEnd { stream }) => {
                    self.chat.items_end(stream);
                    continue;
                }
                Some(PeripheralEvent::Cancelled { tid }) => {
                    self.chat.cancelled(tid);
                    continue;
                }
                Some(PeripheralEvent::Request {
                    tid, name, data, ..
                }) => self.service.decode(tid, name, data),
                Some(PeripheralEvent::StreamEndC2P { .. }) => Work::UploadEnd,
                Some(PeripheralEvent::Secured) => {
                    self.secured = true;
                    continue;
                }
                Some(PeripheralEvent::Closed(reason)) => {
                    self.closed = Some(reason);
                    continue;
                }
                Some(_) => continue,
            };
            // A failure to queue an answer is already reported to the central by the core
            // (ERROR) or means the connection is closing.
            let _ = self.service.run(now, &mut self.peripheral, work);
        }
        // The echoes of what arrived go out now where credits and the outbox allow.
        let _ = self.chat.pump(now, &mut self.peripheral, false);
        let counted = self.peripheral.take_counters();
        self.device.counters.add(&counted);
    }

    /// Answers `blerpc.diagnostics` (request `tid`) with the device's counts, this
    /// connection's included.
    fn answer_diagnostics(&mut self, now: Instant, tid: u8) {
        let counted = self.peripheral.take_counters();
        self.device.counters.add(&counted);
        let mut out = [0u8; ANSWER_BYTES];
        let att_mtu = self.peripheral.config().att_mtu;
        // Refusals are reported by the core (ERROR) or mean the connection is closing.
        let _ = match crate::device::answer(&self.device, &self.link, att_mtu, now, &mut out) {
            Some(n) => {
                self.peripheral
                    .respond(now, tid, DIAGNOSTICS_COMMAND, out.get(..n).unwrap_or(&[]))
            }
            None => self.peripheral.respond_error(
                now,
                tid,
                blerpc_proto::wire::error_code::ErrorCode::ResponseTooLarge,
            ),
        };
    }
}
