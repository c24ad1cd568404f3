//! Link addresses as URLs: `tcp://HOST:PORT`, `tls://HOST:PORT`, `ws://HOST[:PORT][/PATH]`,
//! `wss://HOST[:PORT][/PATH]`.
//!
//! `HOST` is a name, an IPv4 address or a bracketed IPv6 address (`[::1]`). TCP and TLS need a
//! port; WebSocket URLs default to 80 (`ws`) and 443 (`wss`) and to the path `/`. Parsing needs no
//! transport feature, so a program can parse any address and then say which feature it lacks.
//!
//! ```
//! use blerpc::link::url::LinkUrl;
//! let url: LinkUrl = "ws://[::1]:9000/blerpc".parse().unwrap();
//! assert_eq!(url, LinkUrl::Ws { host: "::1".into(), port: 9000, path: "/blerpc".into(), secure: false });
//! assert_eq!(url.to_string(), "ws://[::1]:9000/blerpc");
//! assert_eq!(url.authority(), "[::1]:9000");
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
}

/// Why a link URL did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// There is no `SCHEME://`.
    #[error(
        "`{0}` is not a link URL: expected tcp://HOST:PORT, tls://HOST:PORT or ws[s]://HOST:PORT/PATH"
    )]
    NoScheme(String),
    /// The scheme is not one of `tcp`, `tls`, `ws`, `wss`.
    #[error("unknown link scheme `{0}`: expected tcp, tls, ws or wss")]
    UnknownScheme(String),
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
    /// The host (IPv6 without brackets).
    pub fn host(&self) -> &str {
        match self {
            LinkUrl::Tcp { host, .. } | LinkUrl::Tls { host, .. } | LinkUrl::Ws { host, .. } => {
                host
            }
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        match self {
            LinkUrl::Tcp { port, .. } | LinkUrl::Tls { port, .. } | LinkUrl::Ws { port, .. } => {
                *port
            }
        }
    }

    /// The scheme: `tcp`, `tls`, `ws` or `wss`.
    pub fn scheme(&self) -> &'static str {
        match self {
            LinkUrl::Tcp { .. } => "tcp",
            LinkUrl::Tls { .. } => "tls",
            LinkUrl::Ws { secure: false, .. } => "ws",
            LinkUrl::Ws { secure: true, .. } => "wss",
        }
    }

    /// `HOST:PORT`, with IPv6 hosts bracketed: what a socket connects to.
    pub fn authority(&self) -> String {
        if self.host().contains(':') {
            format!("[{}]:{}", self.host(), self.port())
        } else {
            format!("{}:{}", self.host(), self.port())
        }
    }

    /// `true` for the schemes that need the `tls` feature (`tls`, `wss`).
    pub fn needs_tls(&self) -> bool {
        matches!(self, LinkUrl::Tls { .. } | LinkUrl::Ws { secure: true, .. })
    }
}

impl fmt::Display for LinkUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme(), self.authority())?;
        if let LinkUrl::Ws { path, .. } = self {
            f.write_str(path)?;
        }
        Ok(())
    }
}

impl FromStr for LinkUrl {
    type Err = UrlError;
    fn from_str(url: &str) -> Result<LinkUrl, UrlError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| UrlError::NoScheme(url.into()))?;
        let scheme = scheme.to_ascii_lowercase();
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
        assert_eq!(p("tls://[::1]:5").unwrap().authority(), "[::1]:5");
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
    }
}
