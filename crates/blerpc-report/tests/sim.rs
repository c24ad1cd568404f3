//! Reports on the simulated BLE link (virtual time): disconnects counted exactly, each with
//! its reason and its reconnect, the device's view of the link in the report, and packet loss
//! slowing calls without failing them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use blerpc::{Client, Server};
use blerpc_report::schema::{Environment, Known};
use blerpc_report::{Mix, Options, Report, run};
use blerpc_sim::{LinkParams, Monitor, pair};

/// Runs a report of `seconds` on simulated links with `params`, the link dropped at each of
/// `drops` (seconds into the run).
async fn report(params: LinkParams, seconds: u64, drops: &[u64]) -> Report {
    let (server, key) = blerpc_demo::server::demo_server().unwrap();
    let server: Arc<Server> = Arc::new(server);
    let monitors: Arc<Mutex<Vec<Monitor>>> = Arc::default();
    let connect = {
        let monitors = monitors.clone();
        move || {
            let (server, monitors) = (server.clone(), monitors.clone());
            async move {
                let (central, peripheral) = pair(params).map_err(|e| e.to_string())?;
                monitors.lock().unwrap().push(central.monitor());
                tokio::spawn(async move { server.serve_link(peripheral).await });
                Client::connect(central, blerpc_demo::server::client_config(key))
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    };
    let drops: Vec<u64> = drops.to_vec();
    let dropper = {
        let monitors = monitors.clone();
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            for at in drops {
                tokio::time::sleep_until(start + Duration::from_secs(at)).await;
                if let Some(m) = monitors.lock().unwrap().last() {
                    m.disconnect("out of range (simulated)");
                }
            }
        })
    };
    let environment = Environment::for_host(
        Known::missing("the simulated link has no adapter"),
        Some("simulated nRF54L15".into()),
        None,
        None,
        None,
    );
    let mut options = Options::new("sim://", "sim", Duration::from_secs(seconds), environment);
    options.mix = "echo:2,flash_read_8k:1,data_write_200:1"
        .parse::<Mix>()
        .unwrap();
    options.reconnect_backoff = Duration::from_millis(200);
    let report = run(connect, &options, |_| {}).await.unwrap();
    dropper.abort();
    report
}

#[tokio::test(start_paused = true)]
async fn each_disconnect_is_a_reconnect_with_its_reason() {
    let params = LinkParams {
        initial_interval: None,
        ..LinkParams::default()
    };
    let r = report(params, 10, &[3, 6]).await;
    assert_eq!(r.reconnects.len(), 2, "{:?}", r.reconnects);
    for c in &r.reconnects {
        assert!(c.reason.contains("simulated"), "{}", c.reason);
        assert!(c.reconnected_after_ms.value().is_some(), "{c:?}");
    }
    // One call at a time: each loss fails exactly the call in flight.
    assert_eq!(r.failures.get("link_lost"), Some(&2), "{:?}", r.failures);
    assert_eq!(r.run.failed, 2);
    assert!(r.run.ok > 50, "{:?}", r.run);
    // The device counted the same: three connections, two lost to the link.
    assert_eq!(r.device.after.connections.value(), Some(&3));
    assert_eq!(r.device.after.link_losses.value(), Some(&2));
    // The link as the peripheral sees it.
    assert_eq!(r.device.before.conn_interval_us.value(), Some(&15_000));
    assert_eq!(r.device.before.data_length.value(), Some(&251));
    assert_eq!(r.link.kind, "sim");
    assert_eq!(
        r.environment.board.value().map(String::as_str),
        Some("simulated nRF54L15")
    );
    assert!(r.environment.distance.value().is_none());
    // Every call kind of the mix has its latencies, and the timeline covers the run.
    for kind in ["echo", "flash_read_8k", "data_write_200", "all"] {
        let l = &r.latency[kind];
        assert!(
            l.count > 0 && l.p50_ms > 0.0 && l.p50_ms <= l.p99_ms,
            "{kind}: {l:?}"
        );
    }
    assert!(
        (10..=11).contains(&r.timeline.len()),
        "{}",
        r.timeline.len()
    );
    assert!(r.timeline.iter().any(|s| s.failed > 0));
    // The JSON reads back as written; the summary and plots are drawn.
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<Report>(&json).unwrap(), r);
    let md = blerpc_report::markdown::summary(&r);
    assert!(md.contains("| reconnects | 2 |"), "{md}");
    assert!(
        blerpc_report::plot::latency_over_time(&r)
            .unwrap()
            .contains("<svg")
    );
    assert!(
        blerpc_report::plot::latency_distribution(&r)
            .unwrap()
            .contains("<svg")
    );
}

#[tokio::test(start_paused = true)]
async fn packet_loss_slows_calls_without_failing_them() {
    let clean = LinkParams {
        initial_interval: None,
        ..LinkParams::default()
    };
    let lossy = LinkParams { loss: 0.2, ..clean };
    let (a, b) = (report(clean, 5, &[]).await, report(lossy, 5, &[]).await);
    assert!(
        a.failures.is_empty() && b.failures.is_empty(),
        "{:?}",
        b.failures
    );
    assert!(b.reconnects.is_empty());
    assert!(
        b.latency["all"].p99_ms > a.latency["all"].p99_ms,
        "{:?} against {:?}",
        b.latency["all"],
        a.latency["all"]
    );
    let diffs = blerpc_report::compare::differences(&a, &b);
    assert!(diffs.is_empty(), "the same environment: {diffs:?}");
    let md = blerpc_report::compare::markdown(&a, &b);
    assert!(md.contains("| echo p99 ms |"), "{md}");
}
