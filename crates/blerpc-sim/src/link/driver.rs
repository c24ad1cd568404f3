//! The driver task: plays the [`Air`](crate::ble::Air)'s connection events on tokio's clock and
//! hands each completed container to its receiver at the instant its last packet ends.

use std::sync::Arc;

use tokio::time::sleep_until;

use super::State;

/// Runs the connection until both directions are closed and drained, or it is lost.
pub(crate) async fn drive(state: Arc<State>) {
    let forced = state.params.disconnect_at.map(|d| state.origin + d);
    loop {
        // Idle until something is queued (or, on a lossy link, until the next event).
        let start = loop {
            let next = {
                let mut s = state.lock();
                if s.air.disconnected().is_some() || s.done() {
                    return;
                }
                let now = state.offset(tokio::time::Instant::now());
                s.air.next_event(now)
            };
            if let Some(start) = next {
                break start;
            }
            match forced {
                Some(at) => tokio::select! {
                    () = state.driver.notified() => {}
                    () = sleep_until(at) => {
                        state.disconnect("disconnected (simulated)");
                        return;
                    }
                },
                None => state.driver.notified().await,
            }
        };
        let start_at = state.origin + start;
        if let Some(at) = forced
            && start_at >= at
        {
            sleep_until(at).await;
            state.disconnect("disconnected (simulated)");
            return;
        }
        sleep_until(start_at).await;
        let event = state.run_event(start);
        state.space_freed();
        for d in event.deliveries {
            sleep_until(state.origin + d.at).await;
            state.deliver(d.dir, d.pdu);
        }
        sleep_until(state.origin + event.end).await;
        if event.lost {
            state.wake_all();
            return;
        }
    }
}
