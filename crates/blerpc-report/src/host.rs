//! What the tool reads about the host it runs on: OS, kernel, CPU, the BLE adapter.

use std::path::Path;

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

/// The host's BLE adapters and their stack, on Linux: each controller the kernel has
/// (`/sys/class/bluetooth/hciN`) with its bus and, for USB, its vendor and product ids, and
/// BlueZ's version (`bluetoothd --version`). Elsewhere missing, with why: CoreBluetooth and
/// WinRT name no adapter.
pub fn ble_adapter() -> Known<String> {
    if std::env::consts::OS != "linux" {
        return Known::missing(format!(
            "not read on {}: its BLE API names no adapter (give it with --note)",
            std::env::consts::OS
        ));
    }
    let bluez = std::process::Command::new("bluetoothd")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty());
    adapters_in(Path::new("/sys/class/bluetooth"), bluez.as_deref())
}

/// [`ble_adapter`] from a sysfs `bluetooth` class directory and BlueZ's version, if known.
pub fn adapters_in(class: &Path, bluez: Option<&str>) -> Known<String> {
    let mut names: Vec<String> = match std::fs::read_dir(class) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            // hci0, not hci0:256 (the kernel's connection entries).
            .filter(|n| n.starts_with("hci") && !n.contains(':'))
            .collect(),
        Err(e) => {
            return Known::missing(format!(
                "no Bluetooth adapter: {} not readable ({e})",
                class.display()
            ));
        }
    };
    if names.is_empty() {
        return Known::missing(format!(
            "no Bluetooth adapter: {} lists none",
            class.display()
        ));
    }
    names.sort();
    let adapters: Vec<String> = names
        .iter()
        .map(|name| {
            let device = class.join(name).join("device");
            let read = |p: &Path| {
                std::fs::read_to_string(p)
                    .ok()
                    .map(|s| s.trim().to_string())
            };
            // A USB controller's interface: its device (one up) has the ids.
            let usb = read(&device.join("../idVendor"))
                .zip(read(&device.join("../idProduct")))
                .map(|(v, p)| format!("usb {v}:{p}"));
            let bus = usb.or_else(|| {
                std::fs::read_link(device.join("subsystem"))
                    .ok()
                    .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
            });
            match bus {
                Some(bus) => format!("{name} ({bus})"),
                None => name.clone(),
            }
        })
        .collect();
    let stack = match bluez {
        Some(v) => format!("BlueZ {v}"),
        None => "BlueZ version not known (no bluetoothd on PATH)".to_string(),
    };
    Known::Value(format!("{}; {stack}", adapters.join(", ")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[cfg(unix)]
    #[test]
    fn adapters_are_named_with_their_usb_ids_and_the_stack() {
        let root = std::env::temp_dir().join(format!("blerpc-host-{}", std::process::id()));
        let class = root.join("class");
        let usb = root.join("usb1/1-1");
        let interface = usb.join("1-1:1.0");
        std::fs::create_dir_all(&interface).unwrap();
        std::fs::write(usb.join("idVendor"), "0a12\n").unwrap();
        std::fs::write(usb.join("idProduct"), "0001\n").unwrap();
        std::fs::create_dir_all(class.join("hci0")).unwrap();
        std::os::unix::fs::symlink(&interface, class.join("hci0/device")).unwrap();
        std::fs::create_dir_all(class.join("hci0:64")).unwrap();
        let got = adapters_in(&class, Some("5.66"));
        assert_eq!(
            got.value().map(String::as_str),
            Some("hci0 (usb 0a12:0001); BlueZ 5.66")
        );
        std::fs::remove_dir_all(class.join("hci0:64")).unwrap();
        std::fs::remove_file(class.join("hci0/device")).unwrap();
        std::fs::remove_dir_all(class.join("hci0")).unwrap();
        let none = adapters_in(&class, None);
        assert!(none.value().is_none());
        assert!(format!("{none}").contains("lists none"), "{none}");
        let absent = adapters_in(&root.join("nowhere"), None);
        assert!(format!("{absent}").contains("not readable"), "{absent}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
