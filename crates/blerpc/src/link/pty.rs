//! A pseudo-terminal pair (unix, feature `serial`): one side a tokio byte stream, the other a
//! path a [`SerialLink`](super::serial::SerialLink) opens exactly as it would `/dev/ttyUSB0`.
//! For tests and demos of the serial link without hardware.

use std::os::fd::{AsFd as _, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::termios;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The master side of a pseudo-terminal as a tokio byte stream.
#[derive(Debug)]
pub struct Master(AsyncFd<OwnedFd>);

/// An open pty pair: the master, the slave's path, and the slave descriptor (kept open so the
/// master does not see a hang-up before the client opens the path).
#[derive(Debug)]
pub struct Pty {
    /// The master stream.
    pub master: Master,
    /// The slave's path, e.g. `/dev/pts/3`.
    pub path: String,
    /// Keeps the slave open.
    pub slave: OwnedFd,
}

/// Opens a pty pair in raw mode.
pub fn open() -> std::io::Result<Pty> {
    let io = |e: nix::Error| std::io::Error::from(e);
    let pair = nix::pty::openpty(None, None).map_err(io)?;
    let mut t = termios::tcgetattr(pair.slave.as_fd()).map_err(io)?;
    termios::cfmakeraw(&mut t);
    termios::tcsetattr(pair.slave.as_fd(), termios::SetArg::TCSANOW, &t).map_err(io)?;
    let path = nix::unistd::ttyname(pair.slave.as_fd()).map_err(io)?;
    let flags = OFlag::from_bits_truncate(fcntl(&pair.master, FcntlArg::F_GETFL).map_err(io)?);
    fcntl(&pair.master, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map_err(io)?;
    // SAFETY: the `OwnedFd` stays open, and is the same descriptor, for as long as the
    // `AsyncFd` owns it.
    let master = unsafe { AsyncFd::register(pair.master) }?;
    Ok(Pty {
        master: Master(master),
        path: path.to_string_lossy().into_owned(),
        slave: pair.slave,
    })
}

impl AsyncRead for Master {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| {
                nix::unistd::read(fd.get_ref(), unfilled).map_err(std::io::Error::from)
            }) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // Linux reports a closed slave as EIO: that is the end of the stream.
                Ok(Err(e)) if e.raw_os_error() == Some(nix::libc::EIO) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Master {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        loop {
            let mut guard = ready!(self.0.poll_write_ready(cx))?;
            match guard
                .try_io(|fd| nix::unistd::write(fd.get_ref(), data).map_err(std::io::Error::from))
            {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
