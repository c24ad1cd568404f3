//! Worker processes: N copies of this program, each given one typed configuration, sharing a
//! port with `SO_REUSEPORT`, supervised by their parent.
//!
//! ```text
//! parent: reserve the port (reserve: a bound, never listening SO_REUSEPORT socket)
//!   ├── worker 0: <this program> <its worker arguments>   the configuration, one JSON value on stdin
//!   ├── ...                                               each prints a first line when ready
//!   └── worker N-1
//! parent: Workers::watch until the shutdown future completes or a worker dies, then stop them all
//! ```
//!
//! The configuration is serialised once ([`serde`], JSON) and written to each worker's stdin,
//! which is then closed; the worker reads it with [`read_config`]. Nothing of it is on a command
//! line (where every user of the machine can read it), and no option is spelled out by hand: a
//! worker gets exactly what its parent serialised. A secret in it (an [`identity::Seed`]) is
//! wiped on both sides: the parent's encoded copy, the worker's read buffer and the seed once
//! dropped.
//!
//! The kernel spreads incoming connections over the listening workers by a hash of the
//! connection's addresses, so each worker has its own accept queue, event loop and open-file
//! limit. [`Workers::stop`] (and dropping [`Workers`]) sends SIGTERM, then SIGKILL after a grace
//! period; workers ask the kernel to kill them when the parent's spawning thread exits
//! (`PR_SET_PDEATHSIG` on Linux, [`read_config`] does it), so a killed parent leaves none
//! behind.
//!
//! ```no_run
//! use blerpc::process::workers::{self, Workers};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Config { listen: String, threads: usize }
//!
//! # async fn parent() -> Result<(), workers::WorkerError> {
//! // In the parent: three workers of `this-program worker`, each told where to listen.
//! let config = Config { listen: "tcp://127.0.0.1:9000".into(), threads: 1 };
//! let (mut started, _) = Workers::start(
//!     3,
//!     |_| workers::this_program(["worker"]),
//!     |_| &config,
//!     |_, line| line.starts_with("listening ").then_some(()).ok_or(()),
//!     std::time::Duration::from_secs(30),
//! )?;
//! println!("workers {:?}", started.pids());
//! started.watch(blerpc::process::shutdown_signal()).await
//! # }
//! # fn worker() -> Result<(), workers::WorkerError> {
//! // In a worker (`this-program worker`): the parent's configuration, as it was.
//! let config: Config = workers::read_config()?;
//! println!("listening {}", config.listen);
//! # Ok(())
//! # }
//! ```
//!
//! [`identity::Seed`]: crate::identity::Seed

use std::ffi::OsStr;
use std::io::{self, BufRead as _, BufReader, Write as _};
use std::net::ToSocketAddrs as _;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use zeroize::Zeroizing;

use crate::link::url::LinkUrl;

/// How long the workers get to shut down gracefully (SIGTERM) before they are killed.
pub const STOP_GRACE: Duration = Duration::from_secs(8);

/// The largest configuration a worker reads from its stdin.
pub const MAX_CONFIG: usize = 64 * 1024;

/// How often [`Workers::watch`] checks on the workers.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// Why starting, watching or being a worker failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// This program's executable could not be found (to start it again as a worker).
    #[error("cannot find this program's executable to start workers")]
    Executable(#[source] io::Error),
    /// A worker process could not be started.
    #[error("cannot start worker {index}")]
    Spawn {
        /// Which worker (0-based).
        index: usize,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The configuration could not be serialised.
    #[error("cannot encode the workers' configuration")]
    Encode(#[source] serde_json::Error),
    /// Writing the configuration to a worker's stdin failed (it exited at once?).
    #[error("cannot hand the configuration to worker {index} (pid {pid})")]
    Handoff {
        /// Which worker.
        index: usize,
        /// Its process id.
        pid: u32,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A worker's first line did not say it was ready (its own error is on stderr, which it
    /// shares with its parent).
    #[error("worker {index} (pid {pid}) failed to start (see its error above): {line:?}")]
    NotReady {
        /// Which worker.
        index: usize,
        /// Its process id.
        pid: u32,
        /// What it printed first (empty if it exited without a word).
        line: String,
    },
    /// The workers were not all ready in time.
    #[error("the workers took longer than {0:?} to start")]
    Timeout(Duration),
    /// A worker exited while it should have been serving.
    #[error("worker {index} (pid {pid}) exited ({status})")]
    Exited {
        /// Which worker.
        index: usize,
        /// Its process id.
        pid: u32,
        /// How it exited.
        status: ExitStatus,
    },
    /// A worker could not read its configuration from stdin.
    #[error("worker: cannot read the configuration from stdin")]
    Read(#[source] io::Error),
    /// A worker's configuration is larger than [`MAX_CONFIG`].
    #[error("worker: the configuration on stdin is larger than {MAX_CONFIG} bytes")]
    TooLarge,
    /// A worker's configuration is not what it expects (not started by its own parent?).
    #[error("worker: the configuration on stdin does not decode")]
    Decode(#[source] serde_json::Error),
    /// The port for the workers could not be reserved.
    #[error("cannot reserve {url} for the workers")]
    Reserve {
        /// The URL.
        url: LinkUrl,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Workers share IP ports only.
    #[error("{0}: workers share tcp://, tls://, ws:// or wss:// ports, not serial or BLE links")]
    NotIp(LinkUrl),
}

/// A command that runs this program (its own executable) with `args`: how a parent starts its
/// workers.
pub fn this_program<I, S>(args: I) -> Result<Command, WorkerError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let exe = std::env::current_exe().map_err(WorkerError::Executable)?;
    let mut command = Command::new(exe);
    command.args(args);
    Ok(command)
}

/// A port held for workers: a socket bound with `SO_REUSEADDR` and `SO_REUSEPORT` that never
/// listens (so it never receives a connection). Keep it while the workers run: the port stays
/// this program's even while no worker has it bound.
#[derive(Debug)]
pub struct Reserved(#[allow(dead_code)] socket2::Socket);

/// Reserves `url`'s port (the kernel's choice for port 0) for workers to share, and returns
/// `url` with that port: what each worker binds with `SO_REUSEPORT`.
#[cfg(unix)]
pub fn reserve(url: &LinkUrl) -> Result<(Reserved, LinkUrl), WorkerError> {
    use socket2::{Domain, Socket, Type};
    let authority = url
        .authority()
        .ok_or_else(|| WorkerError::NotIp(url.clone()))?;
    let failed = |source| WorkerError::Reserve {
        url: url.clone(),
        source,
    };
    let addr = authority
        .to_socket_addrs()
        .map_err(failed)?
        .next()
        .ok_or_else(|| failed(io::Error::other("it resolves to no address")))?;
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(failed)?;
    socket.set_reuse_address(true).map_err(failed)?;
    socket.set_reuse_port(true).map_err(failed)?;
    socket.bind(&addr.into()).map_err(failed)?;
    let port = socket
        .local_addr()
        .map_err(failed)?
        .as_socket()
        .map(|a| a.port())
        .ok_or_else(|| failed(io::Error::other("the reserved socket has no port")))?;
    Ok((Reserved(socket), url.with_port(port)))
}

/// Workers need `SO_REUSEPORT`: Unix only.
#[cfg(not(unix))]
pub fn reserve(url: &LinkUrl) -> Result<(Reserved, LinkUrl), WorkerError> {
    Err(WorkerError::Reserve {
        url: url.clone(),
        source: io::Error::new(io::ErrorKind::Unsupported, "SO_REUSEPORT: Unix only"),
    })
}

/// Running worker processes; stopped (SIGTERM, then SIGKILL after [`STOP_GRACE`]) when dropped.
#[derive(Debug)]
pub struct Workers {
    children: Vec<Child>,
    /// Which worker each child is (its index at [`Workers::start`]).
    indices: Vec<usize>,
    /// Each worker's stdout after its first line, kept open so a late write by the worker never
    /// meets a closed pipe.
    stdouts: Vec<Option<BufReader<ChildStdout>>>,
}

impl Workers {
    /// Starts `n` workers, one after another from this thread (`PR_SET_PDEATHSIG` follows the
    /// thread that spawned): worker `k` runs `command(k)` (see [`this_program`]) with its stdin,
    /// stdout piped and stderr shared, gets `config(k)` as JSON on its stdin (closed after
    /// it), and must print its first line within what is left of `timeout`; `ready(k, line)`
    /// tells whether that line says it is ready and what it reports (an address, say). On any
    /// failure the workers started so far are stopped.
    pub fn start<C: Serialize, R, E>(
        n: usize,
        mut command: impl FnMut(usize) -> Result<Command, WorkerError>,
        mut config: impl FnMut(usize) -> C,
        mut ready: impl FnMut(usize, &str) -> Result<R, E>,
        timeout: Duration,
    ) -> Result<(Workers, Vec<R>), WorkerError> {
        let deadline = Instant::now() + timeout;
        let mut workers = Workers {
            children: Vec::with_capacity(n),
            indices: Vec::with_capacity(n),
            stdouts: Vec::with_capacity(n),
        };
        let mut reports = Vec::with_capacity(n);
        for index in 0..n {
            match workers.spawn(
                index,
                &mut command,
                &mut config,
                &mut ready,
                deadline,
                timeout,
            ) {
                Ok(report) => reports.push(report),
                Err(e) => {
                    workers.stop();
                    return Err(e);
                }
            }
        }
        Ok((workers, reports))
    }

    /// Starts worker `index` again (after [`Workers::watch`] reported its exit), as
    /// [`Workers::start`] started it; the others keep running whatever happens.
    pub fn restart<C: Serialize, R, E>(
        &mut self,
        index: usize,
        mut command: impl FnMut(usize) -> Result<Command, WorkerError>,
        mut config: impl FnMut(usize) -> C,
        mut ready: impl FnMut(usize, &str) -> Result<R, E>,
        timeout: Duration,
    ) -> Result<R, WorkerError> {
        let deadline = Instant::now() + timeout;
        self.spawn(
            index,
            &mut command,
            &mut config,
            &mut ready,
            deadline,
            timeout,
        )
    }

    /// Starts worker `index` and waits for its first line; kept only if it is ready.
    fn spawn<C: Serialize, R, E>(
        &mut self,
        index: usize,
        command: &mut impl FnMut(usize) -> Result<Command, WorkerError>,
        config: &mut impl FnMut(usize) -> C,
        ready: &mut impl FnMut(usize, &str) -> Result<R, E>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<R, WorkerError> {
        let mut c = command(index)?;
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = c
            .spawn()
            .map_err(|source| WorkerError::Spawn { index, source })?;
        let pid = child.id();
        let mut handoff = || -> Result<(), WorkerError> {
            let json = encode(&config(index))?;
            let mut stdin = child.stdin.take().ok_or_else(|| WorkerError::Handoff {
                index,
                pid,
                source: io::Error::other("the worker's stdin is not piped"),
            })?;
            stdin
                .write_all(&json)
                .map_err(|source| WorkerError::Handoff { index, pid, source })
            // The pipe closes here: the worker reads to its end.
        };
        let first = handoff().and_then(|()| first_line(&mut child, index, deadline, timeout));
        let started = first.and_then(|(line, stdout)| {
            ready(index, line.trim_end())
                .map(|report| (report, stdout))
                .map_err(|_| WorkerError::NotReady {
                    index,
                    pid,
                    line: line.trim_end().to_string(),
                })
        });
        match started {
            Ok((report, stdout)) => {
                self.children.push(child);
                self.indices.push(index);
                self.stdouts.push(Some(stdout));
                Ok(report)
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// The workers' process ids, in the order they were started, but for those whose exit
    /// [`Workers::watch`] has reported.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// The first worker found to have exited, if any, no longer watched.
    fn exited(&mut self) -> Option<WorkerError> {
        let (index, status) =
            self.children
                .iter_mut()
                .enumerate()
                .find_map(|(k, c)| match c.try_wait() {
                    Ok(Some(status)) => Some((k, status)),
                    Ok(None) | Err(_) => None,
                })?;
        let mut child = self.children.remove(index);
        // Reaped by try_wait already: returns at once.
        let _ = child.wait();
        if index < self.stdouts.len() {
            self.stdouts.remove(index);
        }
        let worker = if index < self.indices.len() {
            self.indices.remove(index)
        } else {
            index
        };
        Some(WorkerError::Exited {
            index: worker,
            pid: child.id(),
            status,
        })
    }

    /// Waits until `shutdown` completes (`Ok`) or a worker exits ([`WorkerError::Exited`]),
    /// checking on the workers every 200 ms. The workers keep running either way: [`stop`]
    /// them (or drop this). Each exit is reported once: watching again watches the others (a
    /// parent whose workers can fail over keeps serving with them).
    ///
    /// [`stop`]: Workers::stop
    pub async fn watch(&mut self, shutdown: impl Future<Output = ()>) -> Result<(), WorkerError> {
        tokio::pin!(shutdown);
        let mut tick = tokio::time::interval(WATCH_EVERY);
        loop {
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                _ = tick.tick() => {
                    if let Some(e) = self.exited() {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Stops every worker still running: SIGTERM, then SIGKILL for those still there after
    /// [`STOP_GRACE`].
    pub fn stop(&mut self) {
        for c in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = super::terminate(c.id());
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        for c in &mut self.children {
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `config` as JSON in a buffer sized exactly for it (so no reallocation leaves an unwiped
/// copy of a secret behind), wiped when dropped.
fn encode(config: &impl Serialize) -> Result<Zeroizing<Vec<u8>>, WorkerError> {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, config).map_err(WorkerError::Encode)?;
    let mut json = Zeroizing::new(Vec::with_capacity(count.0));
    serde_json::to_writer(&mut *json, config).map_err(WorkerError::Encode)?;
    Ok(json)
}

/// The first line `child` prints, read on a thread of its own so that the wait is bounded by
/// `deadline` (a worker that prints nothing is killed, which ends the read).
fn first_line(
    child: &mut Child,
    index: usize,
    deadline: Instant,
    timeout: Duration,
) -> Result<(String, BufReader<ChildStdout>), WorkerError> {
    let pid = child.id();
    let stdout = child.stdout.take().ok_or_else(|| WorkerError::Handoff {
        index,
        pid,
        source: io::Error::other("the worker's stdout is not piped"),
    })?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let read = reader.read_line(&mut line).map(|_| (line, reader));
        let _ = tx.send(read);
    });
    let wait = deadline.saturating_duration_since(Instant::now());
    match rx.recv_timeout(wait) {
        Ok(Ok(read)) => Ok(read),
        Ok(Err(source)) => Err(WorkerError::Handoff { index, pid, source }),
        Err(_) => Err(WorkerError::Timeout(timeout)),
    }
}

/// In a worker: asks to die with the parent ([`die_with_parent`](super::die_with_parent)), then
/// reads the configuration the parent wrote on stdin (JSON, at most [`MAX_CONFIG`] bytes, into
/// a buffer wiped afterwards) and decodes it.
pub fn read_config<C: DeserializeOwned>() -> Result<C, WorkerError> {
    super::die_with_parent();
    decode_from(io::stdin().lock())
}

/// [`read_config`]'s reading and decoding, from any reader.
fn decode_from<C: DeserializeOwned>(mut input: impl io::Read) -> Result<C, WorkerError> {
    // One fixed buffer, never grown: no copy of a secret is left in freed memory.
    let mut buf = Zeroizing::new(vec![0u8; MAX_CONFIG + 1]);
    let mut len = 0;
    loop {
        let Some(free) = buf.get_mut(len..) else {
            return Err(WorkerError::TooLarge);
        };
        if free.is_empty() {
            return Err(WorkerError::TooLarge);
        }
        match input.read(free) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WorkerError::Read(e)),
        }
    }
    let json = buf.get(..len).unwrap_or_default();
    serde_json::from_slice(json).map_err(WorkerError::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Config {
        name: String,
        seed: Option<crate::identity::Seed>,
        limits: Vec<u32>,
    }

    #[test]
    fn a_configuration_encodes_exactly_and_decodes_back() {
        let config = Config {
            name: "w".into(),
            seed: Some(crate::identity::Seed::new([0xa5; 32])),
            limits: vec![1, 2],
        };
        let json = encode(&config).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            json.len(),
            json.capacity(),
            "sized exactly: no reallocation"
        );
        let text = std::str::from_utf8(&json).unwrap_or_default();
        assert_eq!(
            text,
            format!(
                r#"{{"name":"w","seed":"{}","limits":[1,2]}}"#,
                "a5".repeat(32)
            )
        );
        let back: Config = decode_from(&json[..]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, config);
    }

    #[test]
    fn a_worker_refuses_what_it_cannot_trust() {
        let too_large = vec![b' '; MAX_CONFIG + 1];
        assert!(matches!(
            decode_from::<Config>(&too_large[..]),
            Err(WorkerError::TooLarge)
        ));
        let at_limit = vec![b' '; MAX_CONFIG];
        assert!(matches!(
            decode_from::<Config>(&at_limit[..]),
            Err(WorkerError::Decode(_))
        ));
        let short_seed = br#"{"name":"w","seed":"a5a5","limits":[]}"#;
        let e = decode_from::<Config>(&short_seed[..]);
        assert!(matches!(e, Err(WorkerError::Decode(_))), "{e:?}");
        assert!(matches!(
            decode_from::<Config>(&b""[..]),
            Err(WorkerError::Decode(_))
        ));
    }

    #[test]
    fn the_reserved_port_is_in_the_url() {
        let url: LinkUrl = "ws://127.0.0.1:0/x"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        let (reserved, at) = reserve(&url).unwrap_or_else(|e| panic!("{e}"));
        let port = at.port().unwrap_or(0);
        assert_ne!(port, 0);
        assert_eq!(at.to_string(), format!("ws://127.0.0.1:{port}/x"));
        // Another socket with SO_REUSEPORT may bind it too (a worker does).
        let (_again, same) = reserve(&at).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(same, at);
        drop(reserved);
        let serial: LinkUrl = "serial:///dev/x".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(reserve(&serial), Err(WorkerError::NotIp(_))));
    }
}
