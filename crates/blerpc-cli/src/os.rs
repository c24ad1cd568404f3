//! Process plumbing for the multi-process modes (`serve --workers`, `bench scale`): the
//! open-file limit, dying with the parent, signalling children, and reading a process's memory
//! and CPU time from `/proc`. Linux only where it says so; elsewhere the functions report
//! "unsupported" instead of failing the build.

use std::io;

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

/// The resident set size of process `pid` in bytes (`VmRSS` in `/proc/PID/status`; Linux).
pub fn rss_bytes(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_vm_rss(&status).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS line"))
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// User plus system CPU time of process `pid` in seconds (`utime` + `stime` of
/// `/proc/PID/stat`, in `USER_HZ` = 100 ticks per second, the fixed unit of that interface).
pub fn cpu_seconds(pid: u32) -> io::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_cpu_ticks(&stat)
        .map(|t| t as f64 / 100.0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed stat"))
}

fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces: count after it.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    // After the name: state (3), ppid (4), ... utime is field 14, stime 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn proc_files_parse() {
        let status = "Name:\tblerpc\nVmPeak:\t  10 kB\nVmRSS:\t    2048 kB\nThreads:\t2\n";
        assert_eq!(parse_vm_rss(status), Some(2048 * 1024));
        assert_eq!(parse_vm_rss("Name: x\n"), None);
        let stat = "4242 (a b) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 1 0 9 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(42));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn own_process_is_readable() {
        if cfg!(target_os = "linux") {
            assert!(rss_bytes(std::process::id()).unwrap() > 0);
            assert!(cpu_seconds(std::process::id()).unwrap() >= 0.0);
        }
    }
}
