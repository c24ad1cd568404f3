//! The listening socket the TCP, TLS and WebSocket acceptors share: binding (with
//! `SO_REUSEPORT` and the backlog), accepting (riding out errors that concern one connection or a
//! full descriptor table), and the server's [`AddressGuard`] applied before any handshake: a
//! connection beyond its address's rate, or from a penalized address, is closed as soon as it is
//! accepted, and on Linux the penalized addresses are dropped in the kernel by a classic BPF
//! socket filter on the listener (their SYNs never complete a handshake, so a flood from them
//! costs no accept, no descriptor and no task).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream, ToSocketAddrs};

use super::guard::AddressGuard;
use super::tcp::{TcpOptions, set_keepalive};
use crate::metrics::{Metrics, Reason};

/// A bound listener and the guard its acceptor enforces.
#[derive(Debug)]
pub(crate) struct Listener {
    tcp: TcpListener,
    guard: Option<Arc<AddressGuard>>,
    /// The guard's generation the kernel filter was built from.
    applied: Option<u64>,
    /// When the filter must be rebuilt without a new penalty (the first current one ends).
    refresh_at: Option<std::time::Instant>,
    /// A filter is attached to the socket.
    attached: bool,
    /// Attaching failed once (logged then); the guard still refuses in user space.
    filter_failed: bool,
}

/// Binds a listener, with `SO_REUSEPORT` if configured.
pub(crate) async fn bind(addr: impl ToSocketAddrs, options: &TcpOptions) -> io::Result<Listener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(addr).await? {
        match bind_one(addr, options) {
            Ok(l) => return Ok(Listener::new(l)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to bind")))
}

fn bind_one(addr: SocketAddr, options: &TcpOptions) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    if options.reuse_port {
        #[cfg(all(
            unix,
            not(target_os = "solaris"),
            not(target_os = "illumos"),
            not(target_os = "cygwin")
        ))]
        socket.set_reuseport(true)?;
        #[cfg(not(all(
            unix,
            not(target_os = "solaris"),
            not(target_os = "illumos"),
            not(target_os = "cygwin")
        )))]
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "SO_REUSEPORT is not supported on this platform",
        ));
    }
    socket.bind(addr)?;
    socket.listen(options.listen_backlog.max(1))
}

impl Listener {
    pub(crate) fn new(tcp: TcpListener) -> Listener {
        Listener {
            tcp,
            guard: None,
            applied: None,
            refresh_at: None,
            attached: false,
            filter_failed: false,
        }
    }

    /// The address the listener is bound to.
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// Enforces `guard` from the next accept on.
    pub(crate) fn set_guard(&mut self, guard: Arc<AddressGuard>) {
        self.guard = Some(guard);
        self.applied = None;
    }

    /// The guard, for the handshakes to report their failures to.
    pub(crate) fn guard(&self) -> Option<&Arc<AddressGuard>> {
        self.guard.as_ref()
    }

    /// Accepts the next TCP connection the guard admits. Errors that concern one connection
    /// (reset before accept) are skipped; others (out of file descriptors) are logged and
    /// retried after a pause, so a server rides them out instead of stopping. Cancel-safe.
    pub(crate) async fn accept(&mut self, options: &TcpOptions) -> (TcpStream, SocketAddr) {
        loop {
            let guard = self.guard.clone();
            let mut changed = std::pin::pin!(guard.as_deref().map(AddressGuard::changed));
            if let Some(c) = changed.as_mut().as_pin_mut() {
                // Registered before the filter is brought up to date: no penalty is missed.
                c.enable();
            }
            self.refresh_filter();
            let refresh_at = self.refresh_at;
            let wake = async {
                match changed.as_mut().as_pin_mut() {
                    Some(c) => c.await,
                    None => std::future::pending().await,
                }
            };
            let expiry = async {
                match refresh_at {
                    Some(at) => {
                        tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
                    }
                    None => std::future::pending().await,
                }
            };
            let accepted = tokio::select! {
                biased;
                () = wake => continue,
                () = expiry => continue,
                accepted = self.tcp.accept() => accepted,
            };
            match accepted {
                Ok((stream, addr)) => {
                    if let Some(guard) = &guard
                        && let Err(why) = guard.admit(addr.ip(), std::time::Instant::now())
                    {
                        report(options.metrics.as_deref(), why.into(), &addr.to_string());
                        continue; // dropping the stream closes it
                    }
                    if let Err(e) = stream.set_nodelay(options.nodelay) {
                        tracing::debug!(%addr, "TCP_NODELAY: {e}");
                    }
                    set_keepalive(&stream, options);
                    return (stream, addr);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::Interrupted
                            | io::ErrorKind::WouldBlock
                    ) => {}
                Err(e) => {
                    tracing::warn!("accept failed (retrying in 100 ms): {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Rebuilds the kernel filter if the guard penalized an address since it was built, or a
    /// penalty in it has ended.
    fn refresh_filter(&mut self) {
        let Some(guard) = &self.guard else {
            return;
        };
        let now = std::time::Instant::now();
        let generation = guard.generation();
        let expired = self.refresh_at.is_some_and(|at| at <= now);
        if self.applied == Some(generation) && !expired {
            return;
        }
        let (penalized, next) = guard.penalized(now);
        self.applied = Some(generation);
        self.refresh_at = next;
        if self.filter_failed || (penalized.is_empty() && !self.attached) {
            return;
        }
        match kernel::attach(&self.tcp, &penalized) {
            Ok(attached) => self.attached = attached,
            Err(e) => {
                self.filter_failed = true;
                tracing::warn!(
                    "cannot attach the penalized-address filter to the listener ({e}); \
                     penalized addresses are refused after accept instead"
                );
            }
        }
    }
}

/// Counts and logs `reason` in `metrics`, or logs it at debug level without them.
pub(crate) fn report(metrics: Option<&Metrics>, reason: Reason, peer: &str) {
    match metrics {
        Some(m) => m.refused(reason, peer),
        None => tracing::debug!(%peer, "refused: {}", reason.as_str()),
    }
}

/// The in-kernel drop of penalized addresses.
#[cfg(target_os = "linux")]
mod kernel {
    use super::*;
    use socket2::SockFilter;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// IPv4 addresses the filter lists (2 instructions each); more are refused after accept.
    pub(super) const MAX_V4: usize = 1024;
    /// IPv6 addresses the filter lists (9 instructions each).
    pub(super) const MAX_V6: usize = 128;

    const LD_W_ABS: u16 = 0x20;
    const LD_B_ABS: u16 = 0x30;
    const RSH_K: u16 = 0x74;
    const JEQ_K: u16 = 0x15;
    const JA: u16 = 0x05;
    const RET_K: u16 = 0x06;
    /// `SKF_NET_OFF`: offsets from the network (IP) header.
    const NET: u32 = (-0x10_0000i32) as u32;
    const KEEP: u32 = u32::MAX;
    const DROP: u32 = 0;

    /// A classic BPF program that drops IPv4 packets from `v4` and IPv6 packets from `v6`
    /// and keeps the rest.
    pub(super) fn program(v4: &[Ipv4Addr], v6: &[Ipv6Addr]) -> Vec<SockFilter> {
        let ins = SockFilter::new;
        let v4_len = 1 + 2 * v4.len() + 1;
        let mut p = vec![
            ins(LD_B_ABS, 0, 0, NET),      // A = version << 4 | IHL
            ins(RSH_K, 0, 0, 4),           // A = version
            ins(JEQ_K, 1, 0, 4),           // IPv4: the block after the jump
            ins(JA, 0, 0, v4_len as u32),  // else the IPv6 block
            ins(LD_W_ABS, 0, 0, NET + 12), // A = IPv4 source
        ];
        for a in v4 {
            p.push(ins(JEQ_K, 0, 1, u32::from(*a)));
            p.push(ins(RET_K, 0, 0, DROP));
        }
        p.push(ins(RET_K, 0, 0, KEEP));
        // IPv6 (A still holds the version).
        p.push(ins(JEQ_K, 1, 0, 6));
        p.push(ins(RET_K, 0, 0, KEEP));
        for a in v6 {
            let o = a.octets();
            let word = |i: usize| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
            for (i, skip) in [(0, 7u8), (4, 5), (8, 3), (12, 1)] {
                p.push(ins(LD_W_ABS, 0, 0, NET + 8 + i as u32)); // source, word by word
                p.push(ins(JEQ_K, 0, skip, word(i)));
            }
            p.push(ins(RET_K, 0, 0, DROP));
        }
        p.push(ins(RET_K, 0, 0, KEEP));
        p
    }

    /// Attaches the filter for `penalized` (detaches it when empty); `true` if one is attached.
    pub(super) fn attach(listener: &TcpListener, penalized: &[IpAddr]) -> io::Result<bool> {
        let sock = socket2::SockRef::from(listener);
        if penalized.is_empty() {
            sock.detach_filter()?;
            return Ok(false);
        }
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for ip in penalized {
            match ip.to_canonical() {
                IpAddr::V4(a) if v4.len() < MAX_V4 => v4.push(a),
                IpAddr::V6(a) if v6.len() < MAX_V6 => v6.push(a),
                _ => {}
            }
        }
        sock.attach_filter(&program(&v4, &v6))?;
        Ok(true)
    }
}

#[cfg(not(target_os = "linux"))]
mod kernel {
    use super::*;

    /// No kernel filter here: penalized addresses are refused after accept.
    pub(super) fn attach(_listener: &TcpListener, penalized: &[IpAddr]) -> io::Result<bool> {
        if penalized.is_empty() {
            Ok(false)
        } else {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "socket filters need Linux",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::guard::{GuardConfig, Rate};

    #[cfg(target_os = "linux")]
    #[test]
    fn the_filter_program_fits_the_kernel_limit_and_jumps_stay_inside() {
        let v4: Vec<_> = (0..kernel::MAX_V4 as u32)
            .map(std::net::Ipv4Addr::from)
            .collect();
        let v6: Vec<_> = (0..kernel::MAX_V6 as u128)
            .map(std::net::Ipv6Addr::from)
            .collect();
        let p = kernel::program(&v4, &v6);
        assert!(p.len() <= 4096, "BPF_MAXINSNS is 4096, got {}", p.len());
        assert_eq!(p.len(), 5 + 2 * v4.len() + 1 + 2 + 9 * v6.len() + 1);
    }

    async fn connect_from(src: &str, to: SocketAddr) -> io::Result<TcpStream> {
        let s = TcpSocket::new_v4()?;
        s.bind(format!("{src}:0").parse().unwrap())?;
        s.connect(to).await
    }

    /// A penalized address cannot even connect (its SYNs are dropped), others can, and it can
    /// again once the penalty ends.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn penalized_addresses_are_dropped_in_the_kernel_until_the_penalty_ends() {
        let options = TcpOptions::default();
        let mut listener = bind("127.0.0.1:0", &options).await.unwrap();
        let penalty = Duration::from_millis(1500);
        listener.set_guard(AddressGuard::new(GuardConfig {
            rate: Some(Rate {
                per_second: 20.0,
                burst: 1.0,
            }),
            penalty,
            offence_cost: 10.0,
        }));
        let to = listener.local_addr().unwrap();
        let (tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
        let accept = tokio::spawn(async move {
            loop {
                let (s, addr) = listener.accept(&options).await;
                if tx.send((s, addr)).is_err() {
                    return;
                }
            }
        });
        let first = connect_from("127.0.0.2", to).await.unwrap();
        let (_s, addr) = accepted.recv().await.unwrap();
        assert_eq!(addr.ip().to_string(), "127.0.0.2");
        // Beyond the rate: accepted by the kernel, closed by the acceptor, now penalized.
        let mut second = connect_from("127.0.0.2", to).await.unwrap();
        let mut byte = [0u8; 1];
        let n = tokio::io::AsyncReadExt::read(&mut second, &mut byte)
            .await
            .unwrap_or(0);
        assert_eq!(n, 0, "the acceptor closes a connection beyond the rate");
        let started = std::time::Instant::now();
        // The kernel drops the next SYN: connect does not complete.
        let third =
            tokio::time::timeout(Duration::from_millis(400), connect_from("127.0.0.2", to)).await;
        assert!(third.is_err(), "a penalized address connected: {third:?}");
        // Another address is not affected.
        let _other = connect_from("127.0.0.3", to).await.unwrap();
        let (_s, addr) = accepted.recv().await.unwrap();
        assert_eq!(addr.ip().to_string(), "127.0.0.3");
        // After the penalty (and a token earned), the address connects again.
        tokio::time::sleep(penalty.saturating_sub(started.elapsed()) + Duration::from_millis(200))
            .await;
        let again = tokio::time::timeout(Duration::from_secs(3), connect_from("127.0.0.2", to))
            .await
            .expect("the penalty ended but the address still cannot connect")
            .unwrap();
        let (_s, addr) = tokio::time::timeout(Duration::from_secs(3), accepted.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(addr.ip().to_string(), "127.0.0.2");
        drop((first, again));
        accept.abort();
    }
}
