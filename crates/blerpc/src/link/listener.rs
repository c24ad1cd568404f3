//! The listening socket the TCP, TLS and WebSocket acceptors share (and the gateway's HTTP
//! face): binding (with `SO_REUSEPORT` and the backlog), accepting (riding out errors that
//! concern one connection or a full descriptor table), and an [`AddressGuard`] applied before
//! any handshake: a connection beyond its address's rate, or from a penalized address, is
//! closed as soon as it is accepted, and on Linux the penalized addresses are dropped in the
//! kernel by a classic BPF socket filter on the listener (their SYNs never complete a
//! handshake, so a flood from them costs no accept, no descriptor and no task); the addresses
//! on probation after a penalty have only a share of their SYNs kept, drawn in the kernel.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use blerpc::link::guard::{AddressGuard, GuardConfig};
//! use blerpc::link::listener::{Accepted, GuardedListener};
//! use blerpc::link::tcp::TcpOptions;
//!
//! let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let mut listener = GuardedListener::new(tcp);
//! listener.set_guard(AddressGuard::new(GuardConfig::default()));
//! let options = TcpOptions::default();
//! loop {
//!     match listener.accept_next(&options).await {
//!         Accepted::Admitted(_stream, _peer) => { /* serve it */ }
//!         Accepted::Refused(_why, _peer) => { /* already closed: count it */ }
//!     }
//! }
//! # }
//! ```

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream, ToSocketAddrs};

use super::guard::{AddressGuard, Listed, Refusal};
use super::tcp::{TcpOptions, set_keepalive};
use crate::metrics::{Metrics, Reason};

/// A bound TCP listener and the guard it enforces at accept (see the [module docs](self)).
#[derive(Debug)]
pub struct GuardedListener {
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
pub(crate) async fn bind(
    addr: impl ToSocketAddrs,
    options: &TcpOptions,
) -> io::Result<GuardedListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(addr).await? {
        match bind_one(addr, options) {
            Ok(l) => return Ok(GuardedListener::new(l)),
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

/// What [`GuardedListener::accept_next`] took from the listen queue.
#[derive(Debug)]
pub enum Accepted {
    /// A connection the guard admitted (with `TCP_NODELAY` and keepalive set as the options
    /// say).
    Admitted(TcpStream, SocketAddr),
    /// A connection the guard refused: already closed.
    Refused(Refusal, SocketAddr),
}

impl GuardedListener {
    /// Accepts on `tcp` (without a guard until [`set_guard`](Self::set_guard)).
    pub fn new(tcp: TcpListener) -> GuardedListener {
        GuardedListener {
            tcp,
            guard: None,
            applied: None,
            refresh_at: None,
            attached: false,
            filter_failed: false,
        }
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// Enforces `guard` from the next accept on.
    pub fn set_guard(&mut self, guard: Arc<AddressGuard>) {
        self.guard = Some(guard);
        self.applied = None;
    }

    /// The guard, for the handshakes (or requests) to report their offences to.
    pub fn guard(&self) -> Option<&Arc<AddressGuard>> {
        self.guard.as_ref()
    }

    /// Accepts the next TCP connection the guard admits; those it refuses are counted in
    /// [`TcpOptions::metrics`] (or logged at debug level) and closed. Cancel-safe.
    pub(crate) async fn accept(&mut self, options: &TcpOptions) -> (TcpStream, SocketAddr) {
        loop {
            match self.accept_next(options).await {
                Accepted::Admitted(stream, addr) => return (stream, addr),
                Accepted::Refused(why, addr) => {
                    report(options.metrics.as_deref(), why.into(), &addr.to_string());
                }
            }
        }
    }

    /// Accepts the next TCP connection and has the guard judge it: admitted, or refused (and
    /// closed). Errors that concern one connection (reset before accept) are skipped; others
    /// (out of file descriptors) are logged and retried after a pause, so a server rides them
    /// out instead of stopping. Of `options`, `nodelay` and `keepalive` apply. Cancel-safe.
    pub async fn accept_next(&mut self, options: &TcpOptions) -> Accepted {
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
                        drop(stream); // closes it
                        return Accepted::Refused(why, addr);
                    }
                    if let Err(e) = stream.set_nodelay(options.nodelay) {
                        tracing::debug!(%addr, "TCP_NODELAY: {e}");
                    }
                    set_keepalive(&stream, options);
                    return Accepted::Admitted(stream, addr);
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
        let listed = guard.listed(now);
        self.applied = Some(generation);
        self.refresh_at = listed.next_change;
        let empty = listed.penalized.is_empty() && listed.probation.is_empty();
        if self.filter_failed || (empty && !self.attached) {
            return;
        }
        match kernel::attach(&self.tcp, &listed, guard.config().probation_keep) {
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
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    /// IPv4 addresses the filter lists (2 instructions each); more are refused after accept.
    pub(super) const MAX_V4: usize = 1024;
    /// IPv6 addresses the filter lists (9 instructions each).
    pub(super) const MAX_V6: usize = 128;

    const LD_W_ABS: u16 = 0x20;
    const LD_B_ABS: u16 = 0x30;
    const RSH_K: u16 = 0x74;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const JSET_K: u16 = 0x45;
    const JA: u16 = 0x05;
    const RET_K: u16 = 0x06;
    /// `SKF_NET_OFF`: offsets from the network (IP) header.
    const NET: u32 = (-0x10_0000i32) as u32;
    /// `SKF_AD_OFF + SKF_AD_RANDOM`: loads a random 32-bit number.
    const RANDOM: u32 = (-0x1000i32 + 56) as u32;
    /// The TCP flags byte, from the start of the TCP header (where a TCP socket's filter
    /// starts).
    const TCP_FLAGS: u32 = 13;
    const TCP_ACK: u32 = 0x10;
    const KEEP: u32 = u32::MAX;
    const DROP: u32 = 0;

    /// One classic BPF instruction (`struct sock_filter`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(super) struct Ins {
        pub(super) code: u16,
        pub(super) jt: u8,
        pub(super) jf: u8,
        pub(super) k: u32,
    }

    /// The addresses a filter lists, by family and kind.
    #[derive(Debug, Default)]
    pub(super) struct Lists {
        pub(super) v4_drop: Vec<Ipv4Addr>,
        pub(super) v4_throttle: Vec<Ipv4Addr>,
        pub(super) v6_drop: Vec<Ipv6Addr>,
        pub(super) v6_throttle: Vec<Ipv6Addr>,
    }

    /// A classic BPF program that drops the connection attempts (packets without ACK: SYNs)
    /// of the `drop` addresses, keeps `keep` (0 to 1) of those of the `throttle` addresses,
    /// drawn at random in the kernel, and keeps the rest. Packets with ACK are always kept: a
    /// handshake under way when its address was penalized completes, and the acceptor refuses
    /// it at once (dropping its last ACK would leave the peer retransmitting into a connection
    /// the server does not have until the penalty ends).
    pub(super) fn program(lists: &Lists, keep: f64) -> Vec<Ins> {
        // Instructions in the throttle block; the drop block follows it.
        const THROTTLE_BLOCK: usize = 6;
        let ins = |code, jt, jf, k| Ins { code, jt, jf, k };
        let v4 = lists.v4_drop.len() + lists.v4_throttle.len();
        let v6 = lists.v6_drop.len() + lists.v6_throttle.len();
        let v4_len = 1 + 2 * v4 + 1;
        let v6_len = 2 + 9 * v6 + 1;
        // Where the shared throttle block starts.
        let throttle_at = 5 + v4_len - 1 + v6_len;
        let mut p = vec![
            ins(LD_B_ABS, 0, 0, NET),      // A = version << 4 | IHL
            ins(RSH_K, 0, 0, 4),           // A = version
            ins(JEQ_K, 1, 0, 4),           // IPv4: the block after the jump
            ins(JA, 0, 0, v4_len as u32),  // else the IPv6 block
            ins(LD_W_ABS, 0, 0, NET + 12), // A = IPv4 source
        ];
        // The verdict for a matched address: the throttle block, or the drop block after it.
        let verdict = |p: &mut Vec<Ins>, throttle: bool| {
            let at = p.len();
            let to = if throttle {
                throttle_at
            } else {
                throttle_at + THROTTLE_BLOCK
            };
            p.push(ins(JA, 0, 0, (to - at - 1) as u32));
        };
        let v4_all = lists.v4_drop.iter().map(|a| (a, false));
        for (a, throttle) in v4_all.chain(lists.v4_throttle.iter().map(|a| (a, true))) {
            p.push(ins(JEQ_K, 0, 1, u32::from(*a)));
            verdict(&mut p, throttle);
        }
        p.push(ins(RET_K, 0, 0, KEEP));
        // IPv6 (A still holds the version).
        p.push(ins(JEQ_K, 1, 0, 6));
        p.push(ins(RET_K, 0, 0, KEEP));
        let v6_all = lists.v6_drop.iter().map(|a| (a, false));
        for (a, throttle) in v6_all.chain(lists.v6_throttle.iter().map(|a| (a, true))) {
            let o = a.octets();
            let word = |i: usize| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
            for (i, skip) in [(0, 7u8), (4, 5), (8, 3), (12, 1)] {
                p.push(ins(LD_W_ABS, 0, 0, NET + 8 + i as u32)); // source, word by word
                p.push(ins(JEQ_K, 0, skip, word(i)));
            }
            verdict(&mut p, throttle);
        }
        p.push(ins(RET_K, 0, 0, KEEP));
        debug_assert_eq!(p.len(), throttle_at);
        // The throttle: packets with ACK (a handshake's last, or an established connection's,
        // which inherits the filter) are kept; of the rest, `keep` are.
        let threshold = (keep.clamp(0.0, 1.0) * 4_294_967_296.0).min(u32::MAX as f64) as u32;
        p.push(ins(LD_B_ABS, 0, 0, TCP_FLAGS));
        p.push(ins(JSET_K, 3, 0, TCP_ACK));
        p.push(ins(LD_W_ABS, 0, 0, RANDOM));
        p.push(ins(JGE_K, 0, 1, threshold));
        p.push(ins(RET_K, 0, 0, DROP));
        p.push(ins(RET_K, 0, 0, KEEP));
        debug_assert_eq!(p.len(), throttle_at + THROTTLE_BLOCK);
        // The drop block: packets with ACK are kept, the rest dropped.
        p.push(ins(LD_B_ABS, 0, 0, TCP_FLAGS));
        p.push(ins(JSET_K, 1, 0, TCP_ACK));
        p.push(ins(RET_K, 0, 0, DROP));
        p.push(ins(RET_K, 0, 0, KEEP));
        p
    }

    /// Runs `program` over a packet as the kernel would for a TCP socket: `ip` is the network
    /// header, `tcp` the transport header (where the filter's offsets start), `random` what
    /// the random load gives. The opcodes of [`program`] only.
    #[cfg(test)]
    pub(super) fn run(program: &[Ins], ip: &[u8], tcp: &[u8], random: u32) -> u32 {
        let load = |k: u32, size: usize| -> u32 {
            if k == RANDOM {
                return random;
            }
            let (buf, at) = if k >= NET {
                (ip, (k - NET) as usize)
            } else {
                (tcp, k as usize)
            };
            buf[at..at + size]
                .iter()
                .fold(0, |a, b| (a << 8) | u32::from(*b))
        };
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = program[pc];
            pc += 1;
            let jump = |taken: bool| usize::from(if taken { i.jt } else { i.jf });
            match i.code {
                LD_B_ABS => a = load(i.k, 1),
                LD_W_ABS => a = load(i.k, 4),
                RSH_K => a >>= i.k,
                JEQ_K => pc += jump(a == i.k),
                JGE_K => pc += jump(a >= i.k),
                JSET_K => pc += jump(a & i.k != 0),
                JA => pc += i.k as usize,
                RET_K => return i.k,
                code => panic!("opcode {code:#x} is not one the program uses"),
            }
        }
    }

    /// Attaches the filter for `listed` (detaches it when it lists nothing); `true` if one is
    /// attached.
    pub(super) fn attach(listener: &TcpListener, listed: &Listed, keep: f64) -> io::Result<bool> {
        let sock = socket2::SockRef::from(listener);
        if listed.penalized.is_empty() && listed.probation.is_empty() {
            sock.detach_filter()?;
            return Ok(false);
        }
        let mut lists = Lists::default();
        let (mut n4, mut n6) = (0, 0);
        let all = listed.penalized.iter().map(|ip| (ip, false));
        for (ip, throttle) in all.chain(listed.probation.iter().map(|ip| (ip, true))) {
            match ip.to_canonical() {
                IpAddr::V4(a) if n4 < MAX_V4 => {
                    n4 += 1;
                    if throttle {
                        &mut lists.v4_throttle
                    } else {
                        &mut lists.v4_drop
                    }
                    .push(a);
                }
                IpAddr::V6(a) if n6 < MAX_V6 => {
                    n6 += 1;
                    if throttle {
                        &mut lists.v6_throttle
                    } else {
                        &mut lists.v6_drop
                    }
                    .push(a);
                }
                _ => {}
            }
        }
        let filter: Vec<SockFilter> = program(&lists, keep)
            .into_iter()
            .map(|i| SockFilter::new(i.code, i.jt, i.jf, i.k))
            .collect();
        sock.attach_filter(&filter)?;
        Ok(true)
    }
}

#[cfg(not(target_os = "linux"))]
mod kernel {
    use super::*;

    /// No kernel filter here: penalized addresses are refused after accept.
    pub(super) fn attach(_listener: &TcpListener, listed: &Listed, _keep: f64) -> io::Result<bool> {
        if listed.penalized.is_empty() && listed.probation.is_empty() {
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
        let half4 = kernel::MAX_V4 as u32 / 2;
        let half6 = kernel::MAX_V6 as u128 / 2;
        let lists = kernel::Lists {
            v4_drop: (0..half4).map(std::net::Ipv4Addr::from).collect(),
            v4_throttle: (half4..2 * half4).map(std::net::Ipv4Addr::from).collect(),
            v6_drop: (0..half6).map(std::net::Ipv6Addr::from).collect(),
            v6_throttle: (half6..2 * half6).map(std::net::Ipv6Addr::from).collect(),
        };
        let p = kernel::program(&lists, 0.125);
        assert!(p.len() <= 4096, "BPF_MAXINSNS is 4096, got {}", p.len());
        assert_eq!(
            p.len(),
            5 + 2 * kernel::MAX_V4 + 1 + 2 + 9 * kernel::MAX_V6 + 1 + 6 + 4
        );
        // Every jump lands inside the program.
        for (i, ins) in p.iter().enumerate() {
            let (jt, jf, k) = (ins.jt as usize, ins.jf as usize, ins.k as usize);
            match ins.code {
                0x05 => assert!(i + 1 + k < p.len(), "ja at {i} leaves the program"),
                0x15 | 0x35 | 0x45 => {
                    assert!(
                        i + 1 + jt.max(jf) < p.len(),
                        "jump at {i} leaves the program"
                    )
                }
                _ => {}
            }
        }
    }

    /// The program's verdicts on packets (byte literals: an IPv4 header and the TCP flags): a
    /// penalized address loses its SYNs but not its ACKs, a throttled one keeps a share of its
    /// SYNs by the random draw, others keep everything.
    #[cfg(target_os = "linux")]
    #[test]
    fn penalized_addresses_lose_their_syns_not_a_handshakes_last_ack() {
        let lists = kernel::Lists {
            v4_drop: vec![std::net::Ipv4Addr::new(127, 0, 0, 2)],
            v4_throttle: vec![std::net::Ipv4Addr::new(127, 0, 0, 3)],
            ..Default::default()
        };
        let p = kernel::program(&lists, 0.25);
        // IPv4, IHL 5, ..., source 127.0.0.x at bytes 12–15.
        let ip = |x: u8| {
            [
                0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 127, 0, 0, x, 127, 0, 0, 1,
            ]
        };
        // The flags byte is the TCP header's 14th: SYN 0x02, ACK 0x10, PSH|ACK 0x18.
        let tcp = |flags: u8| {
            let mut t = [0u8; 20];
            t[13] = flags;
            t
        };
        let (keep, drop) = (u32::MAX, 0);
        let verdict = |x, flags, random| kernel::run(&p, &ip(x), &tcp(flags), random);
        assert_eq!(verdict(2, 0x02, 0), drop, "a penalized SYN");
        assert_eq!(
            verdict(2, 0x10, 0),
            keep,
            "a penalized handshake's last ACK"
        );
        assert_eq!(verdict(2, 0x18, 0), keep, "data on a connection");
        // Throttled: a SYN is kept when the draw is under a quarter of the range.
        assert_eq!(verdict(3, 0x02, 0x3fff_ffff), keep);
        assert_eq!(verdict(3, 0x02, 0x4000_0001), drop);
        assert_eq!(verdict(3, 0x10, 0xffff_ffff), keep);
        assert_eq!(verdict(4, 0x02, 0xffff_ffff), keep, "an address not listed");
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
            probation: Duration::ZERO,
            ..GuardConfig::default()
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

    /// On probation with nothing kept, an address's SYNs are still dropped after its penalty
    /// ended; once the probation ends it connects again.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn probation_throttles_syns_in_the_kernel_until_it_ends() {
        let options = TcpOptions::default();
        let mut listener = bind("127.0.0.1:0", &options).await.unwrap();
        let (penalty, probation) = (Duration::from_millis(500), Duration::from_millis(1500));
        listener.set_guard(AddressGuard::new(GuardConfig {
            rate: Some(Rate {
                per_second: 20.0,
                burst: 1.0,
            }),
            penalty,
            offence_cost: 10.0,
            probation,
            probation_keep: 0.0,
            max_penalty: penalty,
        }));
        let to = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                held.push(listener.accept(&options).await);
            }
        });
        let first = connect_from("127.0.0.2", to).await.unwrap();
        let started = std::time::Instant::now();
        let _second = connect_from("127.0.0.2", to).await.unwrap(); // beyond the rate: penalized
        // Past the penalty, inside the probation: no SYN is kept.
        tokio::time::sleep(penalty + Duration::from_millis(200)).await;
        let during =
            tokio::time::timeout(Duration::from_millis(400), connect_from("127.0.0.2", to)).await;
        assert!(
            during.is_err(),
            "an address on probation connected: {during:?}"
        );
        assert!(
            started.elapsed() < penalty + probation,
            "the test ran too slowly"
        );
        // After it, the address connects again (its client's kernel retransmits the SYN).
        tokio::time::sleep((penalty + probation).saturating_sub(started.elapsed())).await;
        tokio::time::timeout(Duration::from_secs(4), connect_from("127.0.0.2", to))
            .await
            .expect("the probation ended but the address still cannot connect")
            .unwrap();
        drop(first);
        accept.abort();
    }
}
