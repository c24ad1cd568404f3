//! The raw TCP echo server of `blerpc-bench scale --variants tcp`: the baseline the published
//! scale test ran "under the same load" (`benchmarks.md` §3, raw TCP 0.2005 / 0.3121 / 0.5249 ms
//! at 10k / 50k / 100k), to tell what the kernel and one event loop per process allow on this
//! machine from what the WebSocket and bleRPC layers cost.
//!
//! One process per worker (`blerpc-bench role scale-echo PORT`, a hidden role of the benchmarks'
//! binary), each a single-threaded tokio
//! runtime accepting on the same port (SO_REUSEPORT), like `blerpc serve --workers`. Every
//! connection is a task that writes back whatever it reads, through a 1 KiB buffer (the
//! WebSocket server's `--read-buffer` in the scale runs). No framing, no upgrade, no protocol.

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

/// Read buffer per connection, bytes.
const BUFFER: usize = 1024;

/// Backlog of the listening socket.
const BACKLOG: u32 = 65_535;

/// Runs one echo worker on 127.0.0.1:`port` (0: a port of the kernel's choice, to be shared by
/// the workers started after it), printing `listening PORT` once bound. Runs until terminated
/// (the controller's `SIGTERM`, or the parent's death).
pub fn run(port: u16) -> anyhow::Result<bool> {
    blerpc::process::die_with_parent();
    let _ = blerpc::process::raise_nofile_limit();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let socket = TcpSocket::new_v4()?;
        #[cfg(unix)]
        {
            socket.set_reuseaddr(true)?;
            socket.set_reuseport(true)?;
        }
        socket
            .bind(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port))
            .with_context(|| format!("binding the echo server to port {port}"))?;
        let listener = socket.listen(BACKLOG)?;
        let port = listener.local_addr()?.port();
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening {port}")?;
            out.flush()?;
        }
        // Runs until the controller terminates it (or dies: `die_with_parent`).
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(echo(stream));
                }
                // Out of descriptors, or a connection reset before it was accepted: pause
                // briefly and go on, as the bleRPC server does.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    })
}

/// Writes back what arrives until the peer closes or an error.
async fn echo(mut stream: TcpStream) {
    let mut buffer = [0u8; BUFFER];
    loop {
        let n = match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Some(data) = buffer.get(..n) else { return };
        if stream.write_all(data).await.is_err() {
            return;
        }
    }
}
