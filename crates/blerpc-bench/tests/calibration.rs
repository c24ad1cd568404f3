//! The simulator's calibration fit: every platform profile reproduces its published table
//! (±10%), runs the 12 functional tests, and moves the way physics says when only the interval
//! or the PHY changes.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use blerpc_bench::ble::sim_client;
use blerpc_bench::reference::{self, BenchResult};
use blerpc_demo::functional;
use blerpc_sim::profile::{self, Profile};
use blerpc_sim::{LinkParams, Phy};

/// Connects, runs the functional tests, waits until 5.5 s after connect (as the published
/// figures were taken), and runs the benchmarks.
async fn suite(params: LinkParams) -> Vec<BenchResult> {
    let (c, m) = sim_client(params).await.unwrap();
    for r in functional::run_all(&c).await {
        assert!(r.passed(), "{}: {:?}", r.name, r.outcome);
    }
    let wait = Duration::from_millis(5500).saturating_sub(m.connected_for());
    tokio::time::sleep(wait).await;
    assert_eq!(m.interval_now(), params.conn_interval);
    reference::run_all_reps(&c, 10)
        .await
        .into_iter()
        .map(|(n, r)| r.unwrap_or_else(|e| panic!("{n}: {e}")))
        .collect()
}

fn ci(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

#[tokio::test(start_paused = true)]
async fn every_published_cell_is_reproduced_within_ten_percent() {
    let wall = std::time::Instant::now();
    let mut worst: f64 = 0.0;
    for p in profile::ALL {
        let results = suite(p.link_params(ci(15), 247)).await;
        for r in &results {
            let line = format!("{:>8} {:<22} {:<28}", p.name, r.name, r.display());
            let Some(pubd) = reference::published_one(p.name, r.name) else {
                println!("{line}");
                continue;
            };
            let ratio = r.ms / pubd.ms;
            println!(
                "{line} published {:<28} ratio {ratio:.3}",
                pubd.display(r.per)
            );
            worst = worst.max((ratio - 1.0).abs());
            assert!(
                (0.9..=1.1).contains(&ratio),
                "{} {}: {:.2} ms vs published {:.2} ms",
                p.name,
                r.name,
                r.ms,
                pubd.ms
            );
        }
    }
    println!(
        "worst deviation {:.1}%; {:?} of real time",
        worst * 100.0,
        wall.elapsed()
    );
}

fn ms_of(results: &[BenchResult], name: &str) -> f64 {
    results.iter().find(|r| r.name == name).unwrap().ms
}

#[tokio::test(start_paused = true)]
async fn the_interval_and_the_phy_move_results_as_physics_says() {
    let p: Profile = profile::MACOS;
    let at = |c: u64| p.link_params(ci(c), 247);
    let r15 = suite(at(15)).await;
    let r30 = suite(at(30)).await;
    let r45 = suite(at(45)).await;
    for (c, r) in [(15.0, &r15), (30.0, &r30), (45.0, &r45)] {
        let echo = ms_of(r, "echo_roundtrip");
        println!("CI {c} ms: echo {echo:.2} ms");
        // A round trip is two connection events.
        assert!((echo / (2.0 * c) - 1.0).abs() < 0.05, "{c}: {echo}");
    }
    // Throughput per event is the same; the calls take CI-proportional time.
    let f15 = ms_of(&r15, "flash_read_throughput");
    let f30 = ms_of(&r30, "flash_read_throughput");
    assert!((f30 / f15 - 2.0).abs() < 0.1, "{f15} {f30}");
    // At 1M a full pair takes 2,468 µs: 2 fit in the 6.5 ms budget instead of 4.
    let m1 = suite(LinkParams {
        phy: Phy::Le1M,
        ..at(15)
    })
    .await;
    let f1 = ms_of(&m1, "flash_read_throughput");
    println!("8 KB read: {f15:.1} ms at 2M, {f1:.1} ms at 1M");
    // ceil(35/2)+1 = 19 events vs ceil(35/4)+1 = 10.
    assert!((f1 / f15 - 1.9).abs() < 0.1, "{f15} {f1}");
    // Echo does not care about the PHY (one short packet each way).
    assert!((ms_of(&m1, "echo_roundtrip") - ms_of(&r15, "echo_roundtrip")).abs() < 1.0);
}
