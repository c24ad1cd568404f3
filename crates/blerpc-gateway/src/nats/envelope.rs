//! The message format on NATS, version 1: HTTP requests for a device (or a gateway node) and
//! their responses, carried as NATS messages with headers. A backend can speak it directly
//! (see `docs/fleet.md`); a gateway speaks it to forward what it does not hold.
//!
//! A **request** is one message on the device's (or node's) subject with a reply subject, the
//! requester's inbox:
//!
//! | header | value |
//! |---|---|
//! | `Blerpc-Version` | `1` |
//! | `Blerpc-Method` | the HTTP method (`GET`, `POST`) |
//! | `Blerpc-Path` | the HTTP path and query, e.g. `/v1/devices/{id}/calls/echo` |
//! | `Blerpc-Body` | `whole`: the payload is the body; `stream`: the body follows as `data` frames once the holder has `accepted` |
//! | `Blerpc-Window` | the `data` frames of the response body the holder may send before the requester grants credit (default 16) |
//! | `Content-Type`, `Accept`, `Blerpc-Deadline-Ms` | as in HTTP |
//!
//! Everything after it is a **frame**: a message whose `Blerpc-Frame` header names its kind,
//! sent by the holder to the requester's inbox, or by the requester to the holder's `peer`
//! inbox (announced in `accepted` or `head`):
//!
//! | frame | from | headers | payload |
//! |---|---|---|---|
//! | `accepted` | holder | `Blerpc-Peer` (if the request body streams), `Blerpc-Window`: the request body's frames it takes before granting credit | |
//! | `head` | holder | `Blerpc-Status`, `Content-Type`, `Blerpc-Body` (`whole` or `stream`), `Blerpc-Peer` (if the body streams) | the body, if `whole` |
//! | `data` | either | `Blerpc-Seq` (0, 1, …) | a chunk of a body |
//! | `end` | either | `Blerpc-Seq` (the number of `data` frames), `Blerpc-Error` if the body failed | |
//! | `credit` | either | `Blerpc-Credit`: this many more `data` frames may be sent | |
//! | `idle` | holder | | (a streamed body is still open) |
//! | `cancel` | requester | | (the caller has gone: stop) |
//!
//! A sender of `data` frames starts with the window its receiver announced and sends no more than
//! the credit it holds, so neither side buffers more than a window of a body. A receiver that
//! sees a `Blerpc-Seq` out of order fails the body (NATS dropped a frame: never silently).

use async_nats::HeaderMap;
use bytes::Bytes;

/// The version of the format (`Blerpc-Version`).
pub const VERSION: &str = "1";

/// Header names.
pub mod header {
    /// The format's version.
    pub const VERSION: &str = "Blerpc-Version";
    /// A request's HTTP method.
    pub const METHOD: &str = "Blerpc-Method";
    /// A request's HTTP path and query.
    pub const PATH: &str = "Blerpc-Path";
    /// `whole` or `stream`.
    pub const BODY: &str = "Blerpc-Body";
    /// A frame's kind.
    pub const FRAME: &str = "Blerpc-Frame";
    /// A response's HTTP status.
    pub const STATUS: &str = "Blerpc-Status";
    /// The inbox the other side sends its frames to.
    pub const PEER: &str = "Blerpc-Peer";
    /// The `data` frames a sender may have unanswered at first.
    pub const WINDOW: &str = "Blerpc-Window";
    /// A `data` frame's number, or an `end` frame's count.
    pub const SEQ: &str = "Blerpc-Seq";
    /// Why a streamed body failed.
    pub const ERROR: &str = "Blerpc-Error";
    /// More `data` frames the receiver accepts.
    pub const CREDIT: &str = "Blerpc-Credit";
    /// On a request to a device's subject: only asks whether the device is connected to the
    /// gateway that answers (`Blerpc-Status: 200` if it is, `503` if it has just left).
    pub const PROBE: &str = "Blerpc-Probe";
    /// HTTP headers carried as they are.
    pub const CARRIED: [&str; 3] = ["Content-Type", "Accept", "Blerpc-Deadline-Ms"];
}

/// How a body travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyMode {
    /// In the payload of the request or `head`.
    Whole,
    /// In `data` frames, then `end`.
    Stream,
}

impl BodyMode {
    fn as_str(self) -> &'static str {
        match self {
            BodyMode::Whole => "whole",
            BodyMode::Stream => "stream",
        }
    }

    fn parse(text: &str) -> Result<BodyMode, EnvelopeError> {
        match text {
            "whole" => Ok(BodyMode::Whole),
            "stream" => Ok(BodyMode::Stream),
            other => Err(EnvelopeError::Bad {
                header: header::BODY,
                value: other.to_string(),
            }),
        }
    }
}

/// A request for a device or a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    /// The HTTP method.
    pub method: String,
    /// The HTTP path and query.
    pub path: String,
    /// How the body travels.
    pub body: BodyMode,
    /// The carried HTTP headers ([`header::CARRIED`]) present.
    pub carried: Vec<(&'static str, String)>,
    /// The response body's frames the requester takes before granting credit.
    pub window: u32,
}

/// The window a request without `Blerpc-Window` grants.
pub const DEFAULT_WINDOW: u32 = 16;

/// A frame (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// The holder has the request.
    Accepted {
        /// Where the request body's frames go, if it streams.
        peer: Option<String>,
        /// The request body's window.
        window: u32,
    },
    /// The response's status and headers.
    Head {
        /// The HTTP status.
        status: u16,
        /// The carried HTTP headers present.
        carried: Vec<(&'static str, String)>,
        /// How the body travels.
        body: BodyMode,
        /// Where credits and `cancel` go, if the body streams.
        peer: Option<String>,
    },
    /// A chunk of a body.
    Data {
        /// Its number.
        seq: u64,
    },
    /// The end of a body: `count` `data` frames were sent; `error` if it failed.
    End {
        /// The number of `data` frames.
        count: u64,
        /// Why the body failed.
        error: Option<String>,
    },
    /// `n` more `data` frames may be sent.
    Credit {
        /// How many.
        n: u32,
    },
    /// A streamed body is still open.
    Idle,
    /// The caller has gone.
    Cancel,
}

/// Why a message is not a frame or request of this format.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// No headers at all.
    #[error("the message has no headers: not a bleRPC gateway message")]
    NoHeaders,
    /// A header the message needs is missing.
    #[error("the message has no {0} header")]
    Missing(&'static str),
    /// A header's value is not one this format knows.
    #[error("the {header} header {value:?} is not valid")]
    Bad {
        /// The header.
        header: &'static str,
        /// Its value.
        value: String,
    },
    /// Another version of the format.
    #[error("Blerpc-Version {0:?} is not a version this gateway speaks ({VERSION})")]
    Version(String),
}

fn get<'a>(headers: &'a HeaderMap, name: &'static str) -> Option<&'a str> {
    headers.get(name).map(|v| v.as_str())
}

fn need<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<&'a str, EnvelopeError> {
    get(headers, name).ok_or(EnvelopeError::Missing(name))
}

fn number<T: std::str::FromStr>(
    headers: &HeaderMap,
    name: &'static str,
) -> Result<T, EnvelopeError> {
    let text = need(headers, name)?;
    text.parse().map_err(|_| EnvelopeError::Bad {
        header: name,
        value: text.to_string(),
    })
}

fn carried(headers: &HeaderMap) -> Vec<(&'static str, String)> {
    header::CARRIED
        .iter()
        .filter_map(|&name| get(headers, name).map(|v| (name, v.to_string())))
        .collect()
}

/// Whether `value` can be a NATS header value (no line breaks).
fn header_safe(value: &str) -> String {
    value.replace(['\r', '\n'], " ")
}

impl RequestHead {
    /// The request's headers.
    pub fn encode(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::VERSION, VERSION);
        h.insert(header::METHOD, header_safe(&self.method).as_str());
        h.insert(header::PATH, header_safe(&self.path).as_str());
        h.insert(header::BODY, self.body.as_str());
        h.insert(header::WINDOW, self.window.to_string().as_str());
        for (name, value) in &self.carried {
            h.insert(*name, header_safe(value).as_str());
        }
        h
    }

    /// The request in `headers`.
    pub fn decode(headers: Option<&HeaderMap>) -> Result<RequestHead, EnvelopeError> {
        let h = headers.ok_or(EnvelopeError::NoHeaders)?;
        let version = need(h, header::VERSION)?;
        if version != VERSION {
            return Err(EnvelopeError::Version(version.to_string()));
        }
        let path = need(h, header::PATH)?;
        if !path.starts_with('/') {
            return Err(EnvelopeError::Bad {
                header: header::PATH,
                value: path.to_string(),
            });
        }
        Ok(RequestHead {
            method: need(h, header::METHOD)?.to_string(),
            path: path.to_string(),
            body: get(h, header::BODY).map_or(Ok(BodyMode::Whole), BodyMode::parse)?,
            carried: carried(h),
            window: match get(h, header::WINDOW) {
                None => DEFAULT_WINDOW,
                Some(_) => number(h, header::WINDOW)?,
            },
        })
    }
}

impl Frame {
    /// The frame's headers.
    pub fn encode(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        let kind = match self {
            Frame::Accepted { peer, window } => {
                if let Some(p) = peer {
                    h.insert(header::PEER, p.as_str());
                }
                h.insert(header::WINDOW, window.to_string().as_str());
                "accepted"
            }
            Frame::Head {
                status,
                carried,
                body,
                peer,
            } => {
                h.insert(header::STATUS, status.to_string().as_str());
                for (name, value) in carried {
                    h.insert(*name, header_safe(value).as_str());
                }
                h.insert(header::BODY, body.as_str());
                if let Some(p) = peer {
                    h.insert(header::PEER, p.as_str());
                }
                "head"
            }
            Frame::Data { seq } => {
                h.insert(header::SEQ, seq.to_string().as_str());
                "data"
            }
            Frame::End { count, error } => {
                h.insert(header::SEQ, count.to_string().as_str());
                if let Some(e) = error {
                    h.insert(header::ERROR, header_safe(e).as_str());
                }
                "end"
            }
            Frame::Credit { n } => {
                h.insert(header::CREDIT, n.to_string().as_str());
                "credit"
            }
            Frame::Idle => "idle",
            Frame::Cancel => "cancel",
        };
        h.insert(header::FRAME, kind);
        h
    }

    /// The frame in `headers`.
    pub fn decode(headers: Option<&HeaderMap>) -> Result<Frame, EnvelopeError> {
        let h = headers.ok_or(EnvelopeError::NoHeaders)?;
        let window = || number::<u32>(h, header::WINDOW);
        let peer = || get(h, header::PEER).map(str::to_string);
        Ok(match need(h, header::FRAME)? {
            "accepted" => Frame::Accepted {
                peer: peer(),
                window: window()?,
            },
            "head" => {
                let status: u16 = number(h, header::STATUS)?;
                if !(100..=599).contains(&status) {
                    return Err(EnvelopeError::Bad {
                        header: header::STATUS,
                        value: need(h, header::STATUS)?.to_string(),
                    });
                }
                let body = BodyMode::parse(need(h, header::BODY)?)?;
                let peer = peer();
                if body == BodyMode::Stream && peer.is_none() {
                    return Err(EnvelopeError::Missing(header::PEER));
                }
                Frame::Head {
                    status,
                    carried: carried(h),
                    body,
                    peer,
                }
            }
            "data" => Frame::Data {
                seq: number(h, header::SEQ)?,
            },
            "end" => Frame::End {
                count: number(h, header::SEQ)?,
                error: get(h, header::ERROR).map(str::to_string),
            },
            "credit" => Frame::Credit {
                n: number(h, header::CREDIT)?,
            },
            "idle" => Frame::Idle,
            "cancel" => Frame::Cancel,
            other => {
                return Err(EnvelopeError::Bad {
                    header: header::FRAME,
                    value: other.to_string(),
                });
            }
        })
    }
}

/// A frame and its payload, ready to publish.
pub type Outbound = (HeaderMap, Bytes);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame) {
        let h = frame.encode();
        assert_eq!(Frame::decode(Some(&h)), Ok(frame));
    }

    #[test]
    fn every_frame_round_trips() {
        round_trip(Frame::Accepted {
            peer: Some("_INBOX.a.b".into()),
            window: 16,
        });
        round_trip(Frame::Accepted {
            peer: None,
            window: 0,
        });
        round_trip(Frame::Head {
            status: 503,
            carried: vec![("Content-Type", "application/problem+json".into())],
            body: BodyMode::Whole,
            peer: None,
        });
        round_trip(Frame::Head {
            status: 200,
            carried: vec![("Content-Type", "application/x-ndjson".into())],
            body: BodyMode::Stream,
            peer: Some("_INBOX.x".into()),
        });
        round_trip(Frame::Data { seq: u64::MAX });
        round_trip(Frame::End {
            count: 3,
            error: Some("device disconnected".into()),
        });
        round_trip(Frame::End {
            count: 0,
            error: None,
        });
        round_trip(Frame::Credit { n: 8 });
        round_trip(Frame::Idle);
        round_trip(Frame::Cancel);
    }

    #[test]
    fn requests_round_trip_and_carry_only_their_headers() {
        let head = RequestHead {
            method: "POST".into(),
            path: "/v1/devices/ab/calls/echo?x=1".into(),
            body: BodyMode::Stream,
            carried: vec![
                ("Content-Type", "application/x-ndjson".into()),
                ("Blerpc-Deadline-Ms", "500".into()),
            ],
            window: 4,
        };
        let mut h = head.encode();
        h.insert("Authorization", "Bearer secret");
        assert_eq!(RequestHead::decode(Some(&h)), Ok(head));
    }

    #[test]
    fn what_is_not_this_format_is_refused_with_the_reason() {
        assert_eq!(RequestHead::decode(None), Err(EnvelopeError::NoHeaders));
        let mut h = HeaderMap::new();
        h.insert(header::VERSION, "2");
        assert_eq!(
            RequestHead::decode(Some(&h)),
            Err(EnvelopeError::Version("2".into()))
        );
        let mut h = HeaderMap::new();
        h.insert(header::VERSION, "1");
        h.insert(header::METHOD, "GET");
        h.insert(header::PATH, "v1/devices");
        assert!(matches!(
            RequestHead::decode(Some(&h)),
            Err(EnvelopeError::Bad {
                header: "Blerpc-Path",
                ..
            })
        ));
        let mut h = HeaderMap::new();
        h.insert(header::FRAME, "head");
        h.insert(header::STATUS, "0099");
        h.insert(header::BODY, "whole");
        // The value named is the one sent.
        assert_eq!(
            Frame::decode(Some(&h)),
            Err(EnvelopeError::Bad {
                header: "Blerpc-Status",
                value: "0099".into()
            })
        );
        h.insert(header::STATUS, "200");
        h.insert(header::BODY, "stream");
        assert_eq!(
            Frame::decode(Some(&h)),
            Err(EnvelopeError::Missing(header::PEER))
        );
        let mut h = HeaderMap::new();
        h.insert(header::FRAME, "data");
        h.insert(header::SEQ, "-1");
        assert!(matches!(
            Frame::decode(Some(&h)),
            Err(EnvelopeError::Bad { .. })
        ));
        let mut h = HeaderMap::new();
        h.insert(header::FRAME, "teleport");
        assert!(matches!(
            Frame::decode(Some(&h)),
            Err(EnvelopeError::Bad { .. })
        ));
    }

    #[test]
    fn line_breaks_never_reach_a_header() {
        let h = Frame::End {
            count: 1,
            error: Some("a\r\nBlerpc-Frame: cancel".into()),
        }
        .encode();
        assert_eq!(
            Frame::decode(Some(&h)),
            Ok(Frame::End {
                count: 1,
                error: Some("a  Blerpc-Frame: cancel".into()),
            })
        );
    }
}
