//! Worker processes (`blerpc::process::workers`) as they run: this test program starts copies
//! of itself as workers. Without the test harness (`harness = false`): a worker's first line on
//! stdout is its own, not the harness's.
//!
//! A worker (`workers worker MODE`) reads its configuration, checks that its command line holds
//! nothing of it, prints `ready JSON` with the configuration as it decoded it, and then, by
//! MODE: waits to be stopped (`serve`), exits at once (`exit`), prints a line that is not
//! `ready` (`refuse`) or prints nothing (`mute`).

#[cfg(all(unix, feature = "process"))]
mod unix {
    use std::time::{Duration, Instant};

    use blerpc::identity::Seed;
    use blerpc::process::workers::{self, WorkerError, Workers};
    use serde::{Deserialize, Serialize};

    /// What each worker gets: one typed configuration, a secret in it.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Config {
        index: usize,
        listen: String,
        limits: Vec<f64>,
        path: Option<std::path::PathBuf>,
        seed: Option<Seed>,
    }

    const SEED: [u8; 32] = [0x5c; 32];
    const START: Duration = Duration::from_secs(20);

    fn config(index: usize) -> Config {
        Config {
            index,
            listen: format!("tcp://127.0.0.1:{}", 9000 + index),
            limits: vec![0.125, 1e9, -3.5],
            path: Some("/a path/with spaces/ünïcode".into()),
            seed: Some(Seed::new(SEED)),
        }
    }

    /// The worker side.
    pub fn worker(mode: &str) -> std::process::ExitCode {
        let config: Config = match workers::read_config() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("worker: {e}");
                return std::process::ExitCode::from(3);
            }
        };
        // Nothing of the configuration on the command line, where every user can read it.
        let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
        let hex = "5c".repeat(32);
        let leaked = cmdline.windows(hex.len()).any(|w| w == hex.as_bytes())
            || String::from_utf8_lossy(&cmdline).contains(&config.listen);
        match mode {
            "refuse" => println!("not ready"),
            "mute" => {}
            _ if leaked => println!("leaked {}", String::from_utf8_lossy(&cmdline)),
            _ => println!(
                "ready {}",
                serde_json::to_string(&config).unwrap_or_default()
            ),
        }
        if mode == "serve" || mode == "mute" {
            std::thread::sleep(Duration::from_secs(60));
        }
        std::process::ExitCode::SUCCESS
    }

    /// A worker's first line: `ready` and the configuration it decoded.
    fn ready(_: usize, line: &str) -> Result<Config, ()> {
        let json = line.strip_prefix("ready ").ok_or(())?;
        serde_json::from_str::<Config>(json).map_err(|_| ())
    }

    fn start(n: usize, mode: &'static str) -> Result<(Workers, Vec<Config>), WorkerError> {
        Workers::start(
            n,
            |_| workers::this_program(["worker", mode]),
            config,
            ready,
            START,
        )
    }

    fn gone(pid: u32) -> bool {
        // A reaped child: no /proc entry (or a new process that reused the pid, not ours).
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    /// Every worker got exactly its configuration, secret included, with nothing on its command
    /// line; stopping them all ends every one.
    pub fn each_worker_gets_exactly_its_configuration() {
        let (mut started, got) = start(3, "serve").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, (0..3).map(config).collect::<Vec<_>>());
        let pids = started.pids();
        assert_eq!(pids.len(), 3);
        let t0 = Instant::now();
        started.stop();
        // SIGTERM ends them at once (the grace period is for those that do not stop).
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(pids.iter().all(|p| gone(*p)), "{pids:?}");
    }

    /// One worker that dies ends the watch with its index and pid; it can be started again
    /// with its own configuration; the others are stopped when the supervisor is dropped.
    pub fn a_dying_worker_is_reported_and_the_others_stop() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let (mut started, _) = start(2, "serve").unwrap_or_else(|e| panic!("{e}"));
        let pids = started.pids();
        let victim = pids[1];
        blerpc::process::terminate(victim).unwrap_or_else(|e| panic!("{e}"));
        let watched = rt.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(10),
                started.watch(std::future::pending()),
            )
            .await
        });
        match watched {
            Ok(Err(WorkerError::Exited { index, pid, .. })) => {
                assert_eq!((index, pid), (1, victim));
            }
            other => panic!("{other:?}"),
        }
        // Restarted: worker 1 again, with its own configuration, beside worker 0.
        let again = started
            .restart(
                1,
                |_| workers::this_program(["worker", "serve"]),
                config,
                ready,
                START,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again, config(1));
        let now = started.pids();
        assert_eq!(now.len(), 2);
        assert_eq!(now[0], pids[0]);
        assert_ne!(now[1], victim);
        drop(started);
        assert!(now.iter().all(|p| gone(*p)), "{now:?}");
        assert!(gone(victim));
        // A worker that exits right after saying it is ready.
        let (mut started, _) = start(1, "exit").unwrap_or_else(|e| panic!("{e}"));
        let watched = rt.block_on(started.watch(std::future::pending()));
        assert!(
            matches!(watched, Err(WorkerError::Exited { status, .. }) if status.success()),
            "{watched:?}"
        );
        // A watch that ends on its shutdown future.
        let (mut started, _) = start(1, "serve").unwrap_or_else(|e| panic!("{e}"));
        let done = rt.block_on(started.watch(async {}));
        assert!(done.is_ok(), "{done:?}");
    }

    /// A worker that says something else, or nothing in time: start fails, naming it, and
    /// leaves no worker behind.
    pub fn a_worker_that_does_not_start_fails_the_start() {
        match start(2, "refuse") {
            Err(WorkerError::NotReady { index, line, .. }) => {
                assert_eq!((index, line.as_str()), (0, "not ready"));
            }
            other => panic!("{:?}", other.map(|(_, c)| c)),
        }
        let t0 = Instant::now();
        let mute = Workers::start(
            1,
            |_| workers::this_program(["worker", "mute"]),
            config,
            |_, _| Ok::<(), ()>(()),
            Duration::from_millis(500),
        );
        assert!(
            matches!(mute, Err(WorkerError::Timeout(_))),
            "{:?}",
            mute.err()
        );
        assert!(t0.elapsed() < Duration::from_secs(10));
    }
}

#[cfg(all(unix, feature = "process"))]
fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, mode] = args.as_slice()
        && role == "worker"
    {
        return unix::worker(mode);
    }
    // `cargo test` passes its own flags (`--nocapture`, a filter): this program runs every test.
    let tests: [(&str, fn()); 3] = [
        (
            "each_worker_gets_exactly_its_configuration",
            unix::each_worker_gets_exactly_its_configuration,
        ),
        (
            "a_dying_worker_is_reported_and_the_others_stop",
            unix::a_dying_worker_is_reported_and_the_others_stop,
        ),
        (
            "a_worker_that_does_not_start_fails_the_start",
            unix::a_worker_that_does_not_start_fails_the_start,
        ),
    ];
    for (name, test) in tests {
        test();
        println!("test {name} ... ok");
    }
    println!("test result: ok. {} passed", tests.len());
    std::process::ExitCode::SUCCESS
}

#[cfg(not(all(unix, feature = "process")))]
fn main() {}
