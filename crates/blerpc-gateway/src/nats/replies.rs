//! Every exchange's inbox on one subscription: a gateway subscribes once to
//! `{inbox}.*` and gives each exchange the subject `{inbox}.{n}`, instead of a subscription
//! (and a reading task) per exchange. The frames that arrive are sorted by `n` into the
//! exchange's [`Inbox`](super::pipe::Inbox); frames for an exchange that has ended are dropped.
//!
//! A subscription per call cost both the gateway and nats-server a `SUB` and an `UNSUB` per
//! forwarded call, and the gateway a task: this is the same multiplexing `async_nats`'s own
//! `request` does, with several frames per exchange.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_nats::{Client, Message, Subscriber};
use futures_util::StreamExt;
use tokio::sync::watch;

use super::pipe::{Closed, Demuxed, Inbox, PipeError};

/// One exchange's route: where its frames go, and its "no responders" flag.
#[derive(Debug)]
struct Route {
    sorter: Inbox,
    no_responders: watch::Sender<bool>,
}

/// The routes of one subscription.
#[derive(Debug, Default)]
struct Routes {
    next: u64,
    open: HashMap<u64, Route>,
    /// The subscription has ended (the client closed): no more routes.
    ended: bool,
}

type Shared = Arc<Mutex<Routes>>;

fn lock(routes: &Mutex<Routes>) -> std::sync::MutexGuard<'_, Routes> {
    super::lock(routes)
}

/// A live subscription: its subjects' prefix and its routes.
#[derive(Debug)]
struct Mux {
    /// `{inbox}.`: an exchange's subject is this and its number.
    prefix: String,
    routes: Shared,
    _reader: super::AbortOnDrop,
}

/// The inboxes of one NATS connection (see the [module docs](self)); clones share them.
#[derive(Clone, Debug)]
pub(crate) struct Replies {
    client: Client,
    mux: Arc<Mutex<Option<Arc<Mux>>>>,
}

/// An exchange's place on the subscription; dropping it drops the route.
#[derive(Debug)]
pub(crate) struct Registration {
    routes: Shared,
    n: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.routes).open.remove(&self.n);
    }
}

impl Replies {
    /// The inboxes of `client`'s connection; the subscription is made at first use.
    pub(crate) fn new(client: Client) -> Replies {
        Replies {
            client,
            mux: Arc::new(Mutex::new(None)),
        }
    }

    /// A new inbox: its subject, and its frames sorted with an [`Inbox`] of `bound`.
    pub(crate) async fn open(&self, bound: u32) -> Result<(String, Demuxed), PipeError> {
        let mux = self.mux().await?;
        let (sorter, frames, credits, cancelled) = Inbox::new(bound);
        let (no_responders_tx, no_responders) = watch::channel(false);
        let n = {
            let mut routes = lock(&mux.routes);
            if routes.ended {
                return Err(PipeError::Publish(
                    "the NATS connection is closed: no inbox can be opened".into(),
                ));
            }
            let n = routes.next;
            routes.next += 1;
            routes.open.insert(
                n,
                Route {
                    sorter,
                    no_responders: no_responders_tx,
                },
            );
            n
        };
        let registration = Registration {
            routes: mux.routes.clone(),
            n,
        };
        let demuxed = Demuxed::routed(frames, credits, cancelled, no_responders, registration);
        Ok((format!("{}{n}", mux.prefix), demuxed))
    }

    /// The live subscription, made if there is none (or the last one ended).
    async fn mux(&self) -> Result<Arc<Mux>, PipeError> {
        if let Some(mux) = super::lock(&self.mux).as_ref()
            && !lock(&mux.routes).ended
        {
            return Ok(mux.clone());
        }
        let inbox = self.client.new_inbox();
        let sub = self
            .client
            .subscribe(format!("{inbox}.*"))
            .await
            .map_err(|e| PipeError::Publish(format!("cannot subscribe to the inboxes: {e}")))?;
        let routes: Shared = Arc::default();
        let mux = Arc::new(Mux {
            prefix: format!("{inbox}."),
            routes: routes.clone(),
            _reader: super::spawn(read(sub, format!("{inbox}."), routes)),
        });
        let mut slot = super::lock(&self.mux);
        // Two first uses at once: the one installed first is kept, the other dropped.
        match slot.as_ref() {
            Some(live) if !lock(&live.routes).ended => Ok(live.clone()),
            _ => {
                *slot = Some(mux.clone());
                Ok(mux)
            }
        }
    }
}

/// Sorts the subscription's messages into their routes until it ends; then every open route
/// ends (its reader sees its frames end).
async fn read(mut sub: Subscriber, prefix: String, routes: Shared) {
    while let Some(message) = sub.next().await {
        let Some(n) = message
            .subject
            .as_str()
            .strip_prefix(prefix.as_str())
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let mut routes = lock(&routes);
        let Some(route) = routes.open.get(&n) else {
            // The exchange has ended: a late frame.
            continue;
        };
        if deliver(route, message).is_err() {
            routes.open.remove(&n);
        }
    }
    let mut routes = lock(&routes);
    routes.ended = true;
    for (_, route) in routes.open.drain() {
        route.sorter.close();
    }
}

/// Gives `message` to `route`; `Err` when the exchange is over (the route goes).
fn deliver(route: &Route, message: Message) -> Result<(), ()> {
    if message.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
        let _ = route.no_responders.send(true);
        route.sorter.close();
        return Err(());
    }
    let Message {
        headers, payload, ..
    } = message;
    match route.sorter.take(headers.as_ref(), payload) {
        Ok(()) => Ok(()),
        Err(Closed::Failed(e)) => {
            route.sorter.fail(e);
            Err(())
        }
        Err(Closed::Gone) => {
            route.sorter.close();
            Err(())
        }
    }
}
