//! Link addresses as URLs, one type for every link: `tcp://HOST:PORT`, `tls://HOST:PORT`,
//! `ws://HOST[:PORT][/PATH]`, `wss://HOST[:PORT][/PATH]`, `serial://DEVICE` and
//! `ble://[NAME-OR-ADDRESS]`.
//!
//! `HOST` is a name, an IPv4 address or a bracketed IPv6 address (`[::1]`). TCP and TLS need a
//! port; WebSocket URLs default to 80 (`ws`) and 443 (`wss`) and to the path `/`. A serial URL
//! names the device after `serial://` (`serial:///dev/ttyUSB0`, `serial://COM3`); a BLE URL
//! names the peripheral (its advertised name, its address `AA:BB:CC:DD:EE:FF` or a CoreBluetooth
//! UUID), or nothing for any bleRPC peripheral (`ble://`, or just `ble`). Parsing needs no
//! transport feature, so a program can parse any address and then say which feature it lacks
//! ([`connect`](super::connect) and [`listen`](super::listen) do).
//!
//! ```
//! use blerpc::link::url::LinkUrl;
//! let url: LinkUrl = "ws://[::1]:9000/blerpc".parse().unwrap();
//! assert_eq!(url, LinkUrl::Ws { host: "::1".into(), port: 9000, path: "/blerpc".into(), secure: false });
//! assert_eq!(url.to_string(), "ws://[::1]:9000/blerpc");
//! assert_eq!(url.authority().as_deref(), Some("[::1]:9000"));
//! assert_eq!(url.with_port(9001).to_string(), "ws://[::1]:9001/blerpc");
//!
//! let serial: LinkUrl = "serial:///dev/ttyUSB0".parse().unwrap();
//! assert_eq!(serial, LinkUrl::Serial { device: "/dev/ttyUSB0".into() });
//! assert_eq!(serial.authority(), None);
//! assert_eq!("ble".parse::<LinkUrl>().unwrap(), LinkUrl::Ble { peripheral: None });
//! ```

use std::fmt;
use std::str::FromStr;

/// A parsed link address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LinkUrl {
    /// `tcp://HOST:PORT`: containers on a TCP stream.
    Tcp {
        /// Host name or IP address (IPv6 without brackets).
        host: String,
        /// TCP port.
        port: u16,
    },
    /// `tls://HOST:PORT`: containers on a TLS stream over TCP.
    Tls {
        /// Host name or IP address (IPv6 without brackets); also the TLS server name by default.
        host: String,
        /// TCP port.
        port: u16,
    },
    /// `ws://HOST:PORT/PATH` or, with `secure`, `wss://...`: one WebSocket binary message per
    /// container.
    Ws {
        /// Host name or IP address (IPv6 without brackets).
        host: String,
        /// TCP port (default 80, or 443 for `wss`).
        port: u16,
        /// The request path, starting with `/` (query included, if any).
        path: String,
        /// `wss://`: WebSocket over TLS.
        secure: bool,
    },
    /// `serial://DEVICE`: COBS frames on a serial port (`serial:///dev/ttyUSB0`,
    /// `serial://COM3`).
    Serial {
        /// The device path, as the operating system names it.
        device: String,
    },
    /// `ble://NAME-OR-ADDRESS`, or `ble://` for any bleRPC peripheral: a BLE link (the central
    /// scans for the peripheral; a peripheral advertises under the name).
    Ble {
        /// The peripheral's advertised name, its address (`AA:BB:CC:DD:EE:FF`) or its
        /// CoreBluetooth UUID; `None`: any peripheral advertising the bleRPC service.
        peripheral: Option<String>,
    },
}

/// Why a link URL did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// There is no `SCHEME://`.
    #[error(
        "`{0}` is not a link URL: expected tcp://HOST:PORT, tls://HOST:PORT, ws[s]://HOST:PORT/PATH, serial://DEVICE or ble://[NAME]"
    )]
    NoScheme(String),
    /// The scheme is not one of `tcp`, `tls`, `ws`, `wss`, `serial`, `ble`.
    #[error("unknown link scheme `{0}`: expected tcp, tls, ws, wss, serial or ble")]
    UnknownScheme(String),
    /// A `serial://` URL without a device.
    #[error("`{0}` has no device: use serial:///dev/ttyUSB0 (or serial://COM3)")]
    NoDevice(String),
    /// The host is empty or malformed.
    #[error("missing or malformed host in `{0}`")]
    BadHost(String),
    /// A TCP or TLS URL without a port.
    #[error("`{0}` needs a port (HOST:PORT)")]
    MissingPort(String),
    /// The port is not a number in 0..=65535 (0 asks a listener for any free port).
    #[error("bad port `{port}` in `{url}`: expected 0..=65535")]
    BadPort {
        /// The URL.
        url: String,
        /// The port text.
        port: String,
    },
    /// A TCP or TLS URL with a path, query or user info (they carry none).
    #[error("`{0}` must not have a path: TCP and TLS links are HOST:PORT only")]
    UnexpectedPath(String),
}

impl LinkUrl {
    /// The host (IPv6 without brackets) of an IP link; `None` for serial and BLE.
    pub fn host(&self) -> Option<&str> {
        match self {
            LinkUrl::Tcp { host, .. } | LinkUrl::Tls { host, .. } | LinkUrl::Ws { host, .. } => {
                Some(host)
            }
            LinkUrl::Serial { .. } | LinkUrl::Ble { .. } => None,
        }
    }

    /// The port of an IP link; `None` for serial and BLE.
    pub fn port(&self) -> Option<u16> {
        match self {
            LinkUrl::Tcp { port, .. } | LinkUrl::Tls { port, .. } | LinkUrl::Ws { port, .. } => {
                Some(*port)
            }
            LinkUrl::Serial { .. } | LinkUrl::Ble { .. } => None,
        }
    }

    /// The same URL with another port (an IP link's; serial and BLE URLs are returned as they
    /// are): the port a listener bound when asked for 0.
    pub fn with_port(&self, port: u16) -> LinkUrl {
        let mut url = self.clone();
        match &mut url {
            LinkUrl::Tcp { port: p, .. }
            | LinkUrl::Tls { port: p, .. }
            | LinkUrl::Ws { port: p, .. } => *p = port,
            LinkUrl::Serial { .. } | LinkUrl::Ble { .. } => {}
        }
        url
    }

    /// The scheme: `tcp`, `tls`, `ws`, `wss`, `serial` or `ble`.
    pub fn scheme(&self) -> &'static str {
        match self {
            LinkUrl::Tcp { .. } => "tcp",
            LinkUrl::Tls { .. } => "tls",
            LinkUrl::Ws { secure: false, .. } => "ws",
            LinkUrl::Ws { secure: true, .. } => "wss",
            LinkUrl::Serial { .. } => "serial",
            LinkUrl::Ble { .. } => "ble",
        }
    }

    /// `HOST:PORT`, with IPv6 hosts bracketed: what a socket connects to. `None` for serial and
    /// BLE.
    pub fn authority(&self) -> Option<String> {
        Some(authority(self.host()?, self.port()?))
    }

    /// `true` for the links over TCP/IP (`tcp`, `tls`, `ws`, `wss`).
    pub fn is_ip(&self) -> bool {
        self.host().is_some()
    }

    /// `true` for the schemes that need the `tls` feature (`tls`, `wss`).
    pub fn needs_tls(&self) -> bool {
        matches!(self, LinkUrl::Tls { .. } | LinkUrl::Ws { secure: true, .. })
    }
}

/// The cargo feature that adds `url`'s link (on the listening side when `listening`):
/// `wss://` needs `ws` and `tls`, and the one missing is named.
pub(crate) fn feature_of(url: &LinkUrl, listening: bool) -> &'static str {
    match url {
        LinkUrl::Tcp { .. } => "tcp",
        LinkUrl::Tls { .. } => "tls",
        LinkUrl::Ws { secure: true, .. } if cfg!(feature = "ws") => "tls",
        LinkUrl::Ws { .. } => "ws",
        LinkUrl::Serial { .. } => "serial",
        LinkUrl::Ble { .. } if listening => "ble-peripheral",
        LinkUrl::Ble { .. } => "ble-central",
    }
}

/// `HOST:PORT`, bracketing an IPv6 host.
pub(crate) fn authority(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl fmt::Display for LinkUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme())?;
        match self {
            LinkUrl::Tcp { host, port } | LinkUrl::Tls { host, port } => {
                f.write_str(&authority(host, *port))
            }
            LinkUrl::Ws {
                host, port, path, ..
            } => write!(f, "{}{path}", authority(host, *port)),
            LinkUrl::Serial { device } => f.write_str(device),
            LinkUrl::Ble { peripheral } => f.write_str(peripheral.as_deref().unwrap_or("")),
        }
    }
}

impl FromStr for LinkUrl {
    type Err = UrlError;
    fn from_str(url: &str) -> Result<LinkUrl, UrlError> {
        if url.eq_ignore_ascii_case("ble") {
            return Ok(LinkUrl::Ble { peripheral: None });
        }
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| UrlError::NoScheme(url.into()))?;
        let scheme = scheme.to_ascii_lowercase();
        match scheme.as_str() {
            "serial" if rest.is_empty() => return Err(UrlError::NoDevice(url.into())),
            "serial" => {
                return Ok(LinkUrl::Serial {
                    device: rest.to_string(),
                });
            }
            "ble" => {
                let name = rest.trim_end_matches('/');
                return Ok(LinkUrl::Ble {
                    peripheral: (!name.is_empty()).then(|| name.to_string()),
                });
            }
            _ => {}
        }
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(UrlError::BadHost(url.into()));
        }
        let (host, port) = split_host_port(url, authority)?;
        let need_port = |port: Option<u16>| port.ok_or_else(|| UrlError::MissingPort(url.into()));
        match scheme.as_str() {
            "tcp" | "tls" => {
                if !path.is_empty() && path != "/" {
                    return Err(UrlError::UnexpectedPath(url.into()));
                }
                let port = need_port(port)?;
                Ok(if scheme == "tcp" {
                    LinkUrl::Tcp { host, port }
                } else {
                    LinkUrl::Tls { host, port }
                })
            }
            "ws" | "wss" => {
                let secure = scheme == "wss";
                if path.contains('#') {
                    return Err(UrlError::BadHost(url.into()));
                }
                let path = if path.is_empty() {
                    "/".to_string()
                } else if path.starts_with('?') {
                    format!("/{path}")
                } else {
                    path.to_string()
                };
                Ok(LinkUrl::Ws {
                    host,
                    port: port.unwrap_or(if secure { 443 } else { 80 }),
                    path,
                    secure,
                })
            }
            _ => Err(UrlError::UnknownScheme(scheme)),
        }
    }
}

/// Splits `host[:port]` / `[v6][:port]`.
fn split_host_port(url: &str, authority: &str) -> Result<(String, Option<u16>), UrlError> {
    let bad_host = || UrlError::BadHost(url.into());
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(bad_host)?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad_host());
        }
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or_else(bad_host)?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => return Err(bad_host()), // unbracketed IPv6
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%'))
    {
        return Err(bad_host());
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            // Port 0 is valid for a listener (any free port); connecting to it fails at connect
            // time with the operating system's error.
            Ok(n) => Some(n),
            Err(_) => {
                return Err(UrlError::BadPort {
                    url: url.into(),
                    port: p.into(),
                });
            }
        },
    };
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<LinkUrl, UrlError> {
        s.parse()
    }

    #[test]
    fn every_scheme_parses_and_round_trips() {
        for (text, url) in [
            (
                "tcp://127.0.0.1:9000",
                LinkUrl::Tcp {
                    host: "127.0.0.1".into(),
                    port: 9000,
                },
            ),
            (
                "tls://device.local:8443",
                LinkUrl::Tls {
                    host: "device.local".into(),
                    port: 8443,
                },
            ),
            (
                "ws://[::1]:80/rpc?x=1",
                LinkUrl::Ws {
                    host: "::1".into(),
                    port: 80,
                    path: "/rpc?x=1".into(),
                    secure: false,
                },
            ),
            (
                "wss://example.com:443/",
                LinkUrl::Ws {
                    host: "example.com".into(),
                    port: 443,
                    path: "/".into(),
                    secure: true,
                },
            ),
        ] {
            assert_eq!(p(text).unwrap(), url, "{text}");
            assert_eq!(url.to_string(), text);
        }
    }

    #[test]
    fn defaults_and_normalisation() {
        assert_eq!(p("WS://h").unwrap().to_string(), "ws://h:80/");
        assert_eq!(p("wss://h/x").unwrap().to_string(), "wss://h:443/x");
        assert_eq!(p("ws://h:1?q").unwrap().to_string(), "ws://h:1/?q");
        assert_eq!(p("tcp://h:1/").unwrap().to_string(), "tcp://h:1");
        assert_eq!(p("tls://[::1]:5").unwrap().authority().unwrap(), "[::1]:5");
        assert!(p("wss://h").unwrap().needs_tls());
        assert!(!p("tcp://h:1").unwrap().needs_tls());
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert!(matches!(p("127.0.0.1:9000"), Err(UrlError::NoScheme(_))));
        assert!(matches!(p("udp://h:1"), Err(UrlError::UnknownScheme(s)) if s == "udp"));
        assert!(matches!(p("tcp://h"), Err(UrlError::MissingPort(_))));
        assert!(matches!(p("tcp://h:0"), Ok(LinkUrl::Tcp { port: 0, .. })));
        assert!(matches!(p("tcp://h:99999"), Err(UrlError::BadPort { .. })));
        assert!(matches!(p("tcp://h:x"), Err(UrlError::BadPort { .. })));
        assert!(matches!(p("tcp://h:1/a"), Err(UrlError::UnexpectedPath(_))));
        assert!(matches!(p("tcp://:1"), Err(UrlError::BadHost(_))));
        assert!(matches!(p("tcp://::1:5"), Err(UrlError::BadHost(_))));
        assert!(matches!(p("tcp://[zz]:5"), Err(UrlError::BadHost(_))));
        assert!(matches!(p("ws://u@h/"), Err(UrlError::BadHost(_))));
        assert!(matches!(p("ws://h/#frag"), Err(UrlError::BadHost(_))));
        let msg = p("tcp://h").unwrap_err().to_string();
        assert!(msg.contains("needs a port"), "{msg}");
        assert!(matches!(p("serial://"), Err(UrlError::NoDevice(_))));
        let msg = p("http://x").unwrap_err().to_string();
        assert!(msg.contains("unknown link scheme `http`"), "{msg}");
        assert!(msg.contains("serial or ble"), "{msg}");
    }

    #[test]
    fn serial_and_ble_parse_and_round_trip() {
        for (text, url) in [
            (
                "serial:///dev/ttyUSB0",
                LinkUrl::Serial {
                    device: "/dev/ttyUSB0".into(),
                },
            ),
            (
                "serial://COM3",
                LinkUrl::Serial {
                    device: "COM3".into(),
                },
            ),
            ("ble://", LinkUrl::Ble { peripheral: None }),
            (
                "ble://AA:BB:CC:DD:EE:FF",
                LinkUrl::Ble {
                    peripheral: Some("AA:BB:CC:DD:EE:FF".into()),
                },
            ),
            (
                "ble://blerpc-demo",
                LinkUrl::Ble {
                    peripheral: Some("blerpc-demo".into()),
                },
            ),
        ] {
            assert_eq!(p(text).unwrap(), url, "{text}");
            assert_eq!(url.to_string(), text);
            assert!(!url.is_ip() && url.host().is_none() && url.port().is_none());
            assert_eq!(url.with_port(9), url);
        }
        assert_eq!(p("ble").unwrap(), LinkUrl::Ble { peripheral: None });
        assert_eq!(p("BLE://x/").unwrap().to_string(), "ble://x");
        assert_eq!(
            p("serial://").unwrap_err(),
            UrlError::NoDevice("serial://".into())
        );
    }

    #[test]
    fn the_port_is_set_in_every_ip_scheme() {
        for (s, want) in [
            ("ws://127.0.0.1:0/x", "ws://127.0.0.1:9/x"),
            ("tcp://127.0.0.1:0", "tcp://127.0.0.1:9"),
            ("tls://localhost:0", "tls://localhost:9"),
            ("wss://[::1]:0/", "wss://[::1]:9/"),
        ] {
            assert_eq!(p(s).unwrap().with_port(9).to_string(), want);
        }
    }
}
