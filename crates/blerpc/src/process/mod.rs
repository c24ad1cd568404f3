//! Processes (feature `process`): the plumbing of a server that runs as several processes.
//!
//! - A runtime of a chosen number of threads ([`runtime`]).
//! - The open-file limit ([`raise_nofile_limit`]: a server holds a socket per connection),
//!   dying with the parent ([`die_with_parent`]) and stopping a child ([`terminate`]).
//! - [`workers`]: N copies of this program started as workers, each given one typed
//!   configuration on its stdin, sharing a port with `SO_REUSEPORT`, supervised until a
//!   shutdown signal or until one of them dies.
//!
//! Unix; Linux only where it says so. Elsewhere the functions report "unsupported" instead of
//! failing the build.

use std::io;

pub mod workers;

/// A tokio runtime (I/O and timers on) of `threads` worker threads: the current thread alone
/// for 0 or 1 (no hand-offs between threads, the lowest latency per call), one per CPU for
/// `None`.
///
/// ```
/// let runtime = blerpc::process::runtime(Some(1)).unwrap();
/// assert_eq!(runtime.block_on(async { 1 + 1 }), 2);
/// ```
pub fn runtime(threads: Option<usize>) -> io::Result<tokio::runtime::Runtime> {
    match threads {
        Some(0 | 1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(n) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build(),
        None => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
}

/// Raises the soft open-file limit to the hard limit and returns `(soft, hard)` after the change.
/// The hard limit itself cannot be raised without privileges (and often not at all in a
/// container), which is why the scale modes run several processes.
#[cfg(unix)]
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map_err(io::Error::from)?;
    }
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    Ok((soft, hard))
}

/// Not supported off Unix.
#[cfg(not(unix))]
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "open-file limits: Unix only",
    ))
}

/// Asks the kernel to kill this process when the thread that spawned it exits (Linux
/// `PR_SET_PDEATHSIG`), so a killed benchmark or server parent never leaves children behind.
/// A no-op elsewhere.
pub fn die_with_parent() {
    #[cfg(target_os = "linux")]
    {
        let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    }
}

/// Sends SIGTERM to `pid` (a child of ours). Elsewhere: unsupported.
#[cfg(unix)]
pub fn terminate(pid: u32) -> io::Result<()> {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let pid = i32::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    kill(Pid::from_raw(pid), Signal::SIGTERM).map_err(io::Error::from)
}

/// Not supported off Unix.
#[cfg(not(unix))]
pub fn terminate(_pid: u32) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "signals: Unix only",
    ))
}

/// Completes on Ctrl-C, or SIGTERM on Unix: when a server (or a parent of workers) should shut
/// down. The handlers are installed when this is called (inside a Tokio runtime), so call it
/// before announcing that the process is ready.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    // Registered now, not when first polled: a process that says it is ready and is then
    // signalled at once still stops gracefully.
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let int = signal(SignalKind::interrupt()).ok();
        async move {
            let recv = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = recv(term) => {}
                () = recv(int) => {}
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
