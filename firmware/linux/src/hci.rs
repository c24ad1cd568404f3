//! The HCI transport of the Linux build: H4 (the UART framing, a packet-type byte before each
//! HCI packet) over a TCP connection, as Bumble's virtual controllers serve it
//! (`python -m bumble.apps.controllers tcp-server:127.0.0.1:PORT ...`).

use bt_hci::controller::ExternalController;
use bt_hci_serial::SerialTransport;
use embassy_sync::blocking_mutex::raw::NoopRawMutex;
use embedded_io_adapters::tokio_1::FromTokio;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// H4 over one TCP connection.
pub type Transport =
    SerialTransport<NoopRawMutex, FromTokio<OwnedReadHalf>, FromTokio<OwnedWriteHalf>>;

/// A controller reached over [`Transport`], with 8 command slots in flight.
pub type Controller = ExternalController<Transport, 8>;

/// Connects to the controller at `addr` (`HOST:PORT`).
pub async fn connect(addr: &str) -> std::io::Result<Controller> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    Ok(ExternalController::new(SerialTransport::new(
        FromTokio::new(r),
        FromTokio::new(w),
    )))
}
