//! Processes under test: the binary of the package under test, a guard that kills a child,
//! bounded line reads, bounded runs, the reference venv's python.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Every wait in these tests is bounded by this.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The path of the binary under test: the one binary of the package whose tests run (Cargo
/// sets `CARGO_BIN_EXE_<name>` for them): `blerpc` in the CLI's tests, `blerpc-bench` in the
/// benchmarks'.
pub fn exe() -> PathBuf {
    let mut found: Vec<(String, PathBuf)> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let name = k.to_str()?.strip_prefix("CARGO_BIN_EXE_")?.to_string();
            Some((name, PathBuf::from(v)))
        })
        .collect();
    found.sort();
    match found.as_slice() {
        [(_, path)] => path.clone(),
        [] => panic!(
            "no CARGO_BIN_EXE_* in the environment: run these tests with `cargo test` in a \
             package with a binary (blerpc-cli or blerpc-bench)"
        ),
        more => panic!(
            "several binaries under test ({:?}): this helper serves packages with one",
            more.iter().map(|(n, _)| n).collect::<Vec<_>>()
        ),
    }
}

/// A command running the binary under test ([`exe`]) with `RUST_LOG` removed and a
/// configuration directory of its own (`$XDG_CONFIG_HOME` under the target directory's
/// `tmp/`), so no user's known keys or identity seed is read or written; a test that needs one
/// across commands names it explicitly.
pub fn bin() -> Command {
    let exe = exe();
    let mut c = Command::new(&exe);
    c.env_remove("RUST_LOG");
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // target/<profile>/<binary> → target/tmp (where Cargo puts CARGO_TARGET_TMPDIR).
    let target = exe
        .parent()
        .and_then(|profile| profile.parent())
        .map_or_else(std::env::temp_dir, |t| t.join("tmp"));
    c.env(
        "XDG_CONFIG_HOME",
        target.join(format!("config-{}-{n}", std::process::id())),
    );
    c
}

/// `blerpc` in the CLI's tests ([`bin`]).
pub fn blerpc() -> Command {
    bin()
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The reference venv's python (`$BLERPC_VENV`, else `<repo>/.venv`); panics with how to
/// create it.
pub fn venv_python() -> PathBuf {
    let venv = std::env::var_os("BLERPC_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv"));
    let python = venv.join("bin").join("python");
    assert!(
        python.exists(),
        "the reference venv is missing: {} does not exist. Create it with `bash tools/venv.sh` \
         (or point BLERPC_VENV at a venv with tools/vectors/requirements.txt installed); \
         tools/test.sh does this before running the tests",
        python.display()
    );
    python
}

/// A spawned process, killed when dropped; its stdout lines arrive on a channel.
pub struct Proc {
    /// The process.
    pub child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
    /// What the test calls it (in panics).
    pub name: String,
}

impl Proc {
    /// Spawns `cmd` with piped stdio.
    pub fn spawn(mut cmd: Command, name: &str) -> Proc {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Proc {
            child,
            lines,
            stderr: Some(stderr),
            name: name.to_string(),
        }
    }

    /// The next stdout line, within [`TIMEOUT`].
    pub fn line(&mut self) -> String {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok(l) => l,
            Err(e) => {
                let _ = self.child.kill();
                let err = self
                    .stderr
                    .take()
                    .map(|h| h.join().unwrap())
                    .unwrap_or_default();
                panic!("{}: no stdout line ({e}); stderr: {err}", self.name)
            }
        }
    }
}

impl Proc {
    /// Stops the process and returns what it wrote on stderr.
    pub fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr
            .take()
            .map(|h| h.join().unwrap())
            .unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Output of a finished process.
pub struct Done {
    /// How it exited.
    pub status: ExitStatus,
    /// All it wrote on stdout.
    pub stdout: String,
    /// All it wrote on stderr.
    pub stderr: String,
}

/// Runs `cmd` to completion within [`TIMEOUT`] (killed after), feeding `stdin`.
pub fn run(cmd: Command, stdin: &str) -> Done {
    run_within(cmd, stdin, TIMEOUT)
}

/// Runs `cmd` to completion within `limit` (killed after, and the test fails with what it
/// wrote on stderr), feeding `stdin`.
pub fn run_within(mut cmd: Command, stdin: &str, limit: Duration) -> Done {
    use std::io::Write as _;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_string();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} did not finish within {limit:?}; stderr:\n{}",
                err_t.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    Done {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

/// Starts `blerpc serve` with `args` (from the binary under test) and parses its
/// `listening URL identity KEY` line.
pub fn serve(args: &[&str]) -> (Proc, String, String) {
    let mut cmd = bin();
    cmd.arg("serve").args(args);
    let mut p = Proc::spawn(cmd, "blerpc serve");
    let line = p.line();
    let parts: Vec<&str> = line.split(' ').collect();
    assert!(
        parts.len() == 4 && parts[0] == "listening" && parts[2] == "identity",
        "unexpected first line: {line}"
    );
    let (url, key) = (parts[1].to_string(), parts[3].to_string());
    (p, url, key)
}
