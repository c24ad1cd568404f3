//! What the tool reads about the host it runs on: OS, kernel, CPU.

use crate::schema::Known;

/// `PRETTY_NAME` of `/etc/os-release`, else the target OS.
pub fn os() -> Known<String> {
    match std::fs::read_to_string("/etc/os-release") {
        Ok(text) => text
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| Known::Value(v.trim_matches('"').to_string()))
            .unwrap_or_else(|| Known::Value(std::env::consts::OS.to_string())),
        Err(_) => Known::Value(std::env::consts::OS.to_string()),
    }
}

/// The kernel release (`/proc/sys/kernel/osrelease`).
pub fn kernel() -> Known<String> {
    match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(text) => Known::Value(text.trim().to_string()),
        Err(e) => Known::missing(format!(
            "/proc/sys/kernel/osrelease not readable on {}: {e}",
            std::env::consts::OS
        )),
    }
}

/// The CPU model (`model name` of `/proc/cpuinfo`).
pub fn cpu() -> Known<String> {
    match std::fs::read_to_string("/proc/cpuinfo") {
        Ok(text) => text
            .lines()
            .find_map(|l| {
                let (key, value) = l.split_once(':')?;
                (key.trim() == "model name").then(|| value.trim().to_string())
            })
            .map(Known::Value)
            .unwrap_or_else(|| Known::missing("no model name in /proc/cpuinfo")),
        Err(e) => Known::missing(format!(
            "/proc/cpuinfo not readable on {}: {e}",
            std::env::consts::OS
        )),
    }
}

/// Logical CPUs.
pub fn cpus() -> Known<u32> {
    match std::thread::available_parallelism() {
        Ok(n) => Known::Value(u32::try_from(n.get()).unwrap_or(u32::MAX)),
        Err(e) => Known::missing(format!("not known: {e}")),
    }
}
