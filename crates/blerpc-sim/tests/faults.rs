//! Loss, dropped writes and disconnects on the simulated link: every call either returns the
//! right answer or a clear error before its deadline; none hangs, none returns another call's
//! data. Virtual time; each scenario is seeded and prints its seed.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use blerpc_demo::pb;
use blerpc_sim::profile;
use blerpc_sim::{LinkParams, Monitor};
use tokio::time::{Instant, timeout};

const CALL_TIMEOUT: Duration = Duration::from_secs(3);
const STREAM_IDLE: Duration = Duration::from_secs(1);

async fn connect(params: LinkParams) -> (pb::BlerpcClient, Monitor) {
    common::connect_with(params, |config| {
        config.central.call_timeout = CALL_TIMEOUT;
        config.central.stream_idle_timeout = STREAM_IDLE;
    })
    .await
}

#[derive(Debug, Default)]
struct Tally {
    ok: u32,
    errors: Vec<String>,
}

/// One call of a kind chosen by `i`, with a payload unique to (`task`, `i`); `Ok(true)` if it
/// returned the right answer, `Ok(false)` for a clear error, `Err` for a wrong answer.
async fn one_call(c: &pb::BlerpcClient, task: u32, i: u32) -> Result<Result<(), String>, String> {
    let tag = format!("t{task}-c{i}");
    // One peripheral→central stream at a time (stream items carry fresh peripheral tids, so the
    // client refuses a second one): only task 0 streams.
    let kind = if task != 0 && i % 4 == 3 { 0 } else { i % 4 };
    Ok(match kind {
        0 => match c
            .echo(pb::EchoRequest {
                message: tag.clone(),
            })
            .await
        {
            Ok(r) if r.message == tag => Ok(()),
            Ok(r) => return Err(format!("{tag}: echo returned {:?}", r.message)),
            Err(e) => Err(e.to_string()),
        },
        1 => {
            // A unique length, several containers.
            let len = 300 + task * 97 + i;
            let data = vec![(i % 251) as u8; len as usize];
            match c
                .data_write(pb::DataWriteRequest { data: data.into() })
                .await
            {
                Ok(r) if r.length == len => Ok(()),
                Ok(r) => return Err(format!("{tag}: data_write counted {} of {len}", r.length)),
                Err(e) => Err(e.to_string()),
            }
        }
        2 => {
            let length = 1000 + task * 131 + i;
            match c
                .flash_read(pb::FlashReadRequest { address: 0, length })
                .await
            {
                Ok(r) if r.data.len() == length as usize => Ok(()),
                Ok(r) => {
                    return Err(format!(
                        "{tag}: flash_read gave {} of {length}",
                        r.data.len()
                    ));
                }
                Err(e) => Err(e.to_string()),
            }
        }
        _ => {
            let count = 3 + (task + i) % 5;
            let got = match c.counter_stream(pb::CounterStreamRequest { count }).await {
                Ok(s) => s.collect_vec().await,
                Err(e) => Err(e),
            };
            match got {
                Ok(items) => {
                    if items.len() != count as usize {
                        return Err(format!("{tag}: {} items of {count}", items.len()));
                    }
                    for (k, it) in (0u32..).zip(&items) {
                        if it.seq != k || i64::from(it.value) != 10 * i64::from(k) {
                            return Err(format!("{tag}: item {k} is {it:?}"));
                        }
                    }
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        }
    })
}

/// The longest a call may take before it counts as hung: its deadline, plus the stream's idle
/// gaps, plus a connection interval of slack for the last event.
fn bound(i: u32) -> Duration {
    let items = if i % 4 == 3 { 8 } else { 0 };
    // Calls queue for the peripheral behind the other tasks' calls.
    CALL_TIMEOUT + STREAM_IDLE * items + Duration::from_millis(100)
}

async fn run_tasks(c: &pb::BlerpcClient, tasks: u32, calls: u32) -> Tally {
    let mut handles = Vec::new();
    for task in 0..tasks {
        let c = c.clone();
        handles.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            for i in 0..calls {
                let t0 = Instant::now();
                match timeout(bound(i), one_call(&c, task, i)).await {
                    Err(_) => panic!("task {task} call {i} hung past {:?}", bound(i)),
                    Ok(Err(wrong)) => panic!("wrong answer: {wrong}"),
                    Ok(Ok(Ok(()))) => tally.ok += 1,
                    Ok(Ok(Err(e))) => {
                        assert!(!e.is_empty());
                        assert!(t0.elapsed() <= bound(i));
                        tally.errors.push(e);
                    }
                }
            }
            tally
        }));
    }
    let mut all = Tally::default();
    for h in handles {
        let t = h.await.unwrap();
        all.ok += t.ok;
        all.errors.extend(t.errors);
    }
    all
}

#[tokio::test(start_paused = true)]
async fn a_lossy_link_gives_right_answers_or_clear_errors_in_time() {
    for seed in [1u64, 2, 3] {
        let params = LinkParams {
            seed,
            ..profile::ANDROID.link_params(Duration::from_millis(15), 247)
        };
        let (c, m) = connect(params).await;
        // The link degrades after setup: 15% of packets lost, 3% of the central's writes dropped.
        m.set_faults(0.15, 0.03).unwrap();
        let tally = run_tasks(&c, 4, 24).await;
        let s = m.stats();
        println!(
            "seed {seed}: {} ok, {} errors, {} lost packets, {} dropped writes; errors: {:?}",
            tally.ok,
            tally.errors.len(),
            s.lost_packets,
            s.dropped_writes,
            tally.errors.iter().take(3).collect::<Vec<_>>()
        );
        assert!(s.lost_packets > 0);
        assert!(
            tally.ok > 40,
            "seed {seed}: only {} right answers",
            tally.ok
        );
        assert_eq!(tally.ok + tally.errors.len() as u32, 96);
        c.inner().close().await;
    }
}

#[tokio::test(start_paused = true)]
async fn packet_loss_alone_only_delays() {
    let (c, m) = connect(LinkParams {
        seed: 7,
        ..LinkParams::default()
    })
    .await;
    m.set_faults(0.2, 0.0).unwrap();
    let tally = run_tasks(&c, 4, 16).await;
    println!("{} ok, {} lost packets", tally.ok, m.stats().lost_packets);
    // The link layer retransmits: nothing is lost, every call answers.
    assert!(tally.errors.is_empty(), "{:?}", tally.errors);
    assert_eq!(tally.ok, 64);
}

#[tokio::test(start_paused = true)]
async fn a_disconnect_fails_every_call_promptly() {
    let (c, m) = connect(LinkParams {
        disconnect_at: Some(Duration::from_secs(3)),
        ..profile::MACOS.link_params(Duration::from_millis(15), 247)
    })
    .await;
    let t0 = Instant::now();
    let tally = run_tasks(&c, 4, 200).await;
    let s = m.stats();
    println!(
        "{} ok before the disconnect, {} errors; first: {:?}; done {:?} after the start",
        tally.ok,
        tally.errors.len(),
        tally.errors.first(),
        t0.elapsed()
    );
    assert!(s.disconnected.is_some());
    assert!(tally.ok > 0 && !tally.errors.is_empty());
    // After the link is gone nothing waits for a deadline: every remaining call fails at once.
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    // A call after the disconnect fails too, with an error (not a hang).
    let late = timeout(
        Duration::from_secs(1),
        c.echo(pb::EchoRequest {
            message: "x".into(),
        }),
    )
    .await
    .unwrap();
    assert!(late.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_dead_link_ends_at_the_supervision_timeout() {
    let (c, m) = connect(LinkParams {
        seed: 11,
        ..LinkParams::default()
    })
    .await;
    m.set_faults(0.995, 0.0).unwrap();
    let t0 = Instant::now();
    let tally = run_tasks(&c, 2, 5).await;
    let s = m.stats();
    println!(
        "{:?}: {} ok, errors {:?}, after {:?}",
        s.disconnected,
        tally.ok,
        tally.errors.first(),
        t0.elapsed()
    );
    assert_eq!(s.disconnected.as_deref(), Some("supervision timeout"));
    assert!(!tally.errors.is_empty());
}
