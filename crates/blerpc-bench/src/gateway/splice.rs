//! The floor of any extra hop: a bare forwarder that splices each caller's TCP connection to
//! the device's, no parsing (`blerpc-bench role splice TARGET`). It runs in a process of its
//! own on the same runtime as `blerpc gateway` (tokio, a worker thread per CPU unless the
//! bench's `--gateway-threads` gives both another count), so the gateway
//! bench's kept-connection figures can be read against the cost of one loopback leg and one
//! process in the path, measured in the same run.

use std::net::SocketAddr;

use anyhow::Context as _;
use tokio::net::{TcpListener, TcpStream};

/// Listens on a free loopback port, prints `listening ADDR`, and forwards every connection to
/// `target` byte for byte until either side closes.
pub fn run(target: &str, threads: Option<u16>) -> anyhow::Result<bool> {
    let target: SocketAddr = target
        .strip_prefix("tcp://")
        .unwrap_or(target)
        .parse()
        .with_context(|| format!("splice target {target:?}: not HOST:PORT"))?;
    let runtime = blerpc::process::runtime(threads.map(usize::from))?;
    runtime.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        println!("listening {}", listener.local_addr()?);
        loop {
            let (caller, _) = listener.accept().await?;
            tokio::spawn(async move {
                let Ok(device) = TcpStream::connect(target).await else {
                    return;
                };
                let (mut caller, mut device) = (caller, device);
                let _ = caller.set_nodelay(true);
                let _ = device.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut caller, &mut device).await;
            });
        }
    })
}

/// Starts the splice role in front of `target` (`tcp://HOST:PORT`): the process and the
/// `tcp://` URL to connect to instead.
pub(crate) fn start(
    target: &str,
    threads: Option<u16>,
) -> anyhow::Result<(super::procs::Proc, String)> {
    let threads = threads.map(|n| n.to_string());
    let mut role = vec!["splice", target];
    if let Some(n) = &threads {
        role.extend(["--threads", n.as_str()]);
    }
    let cmd = crate::process::command(&role)?;
    let mut proc = super::procs::Proc::spawn(cmd, "splice")?;
    let line = proc.line()?;
    let addr = line
        .strip_prefix("listening ")
        .with_context(|| format!("unexpected splice line {line:?}"))?;
    Ok((proc, format!("tcp://{addr}")))
}
