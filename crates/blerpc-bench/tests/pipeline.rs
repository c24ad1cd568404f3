//! `blerpc-bench pipeline` on a short run: every peripheral answers every call with 1, 4 and 8
//! in flight, and more in flight is never slower than fewer.
#![allow(clippy::unwrap_used)]

use blerpc_bench::pipeline::{PipelineArgs, run_cases};

#[test]
fn every_peripheral_answers_calls_in_flight() {
    let args = PipelineArgs {
        profile: vec!["android".into()],
        ci_ms: vec![15.0],
        in_flight: vec![1, 4, 8],
        workload: vec!["echo".into(), "data_write".into()],
        seconds: 2.0,
        ..PipelineArgs::default()
    };
    let rows = run_cases(&args).unwrap();
    assert_eq!(
        rows.len(),
        4 * 2 * 3,
        "4 peripherals × 2 workloads × 3 depths"
    );
    for r in &rows {
        assert_eq!(r.failed, 0, "{r:?}");
        assert!(r.calls > 0, "{r:?}");
    }
    for depths in rows.chunks(3) {
        assert_eq!(
            depths.iter().map(|r| r.in_flight).collect::<Vec<_>>(),
            [1, 4, 8]
        );
        for pair in depths.windows(2) {
            let (fewer, more) = (&pair[0], &pair[1]);
            assert!(
                more.calls_per_s() >= fewer.calls_per_s(),
                "{} {}: {} in flight {:.1}/s below {} in flight {:.1}/s",
                more.peripheral.name(),
                more.workload.name(),
                more.in_flight,
                more.calls_per_s(),
                fewer.in_flight,
                fewer.calls_per_s()
            );
        }
    }
}

#[test]
fn options_outside_their_range_are_refused() {
    for args in [
        PipelineArgs {
            in_flight: vec![9],
            ..PipelineArgs::default()
        },
        PipelineArgs {
            seconds: 0.0,
            ..PipelineArgs::default()
        },
        PipelineArgs {
            peripheral: vec!["nordic".into()],
            ..PipelineArgs::default()
        },
    ] {
        assert!(run_cases(&args).is_err(), "{args:?}");
    }
}

#[test]
fn a_cancelled_read_stops_the_peripheral_sending() {
    use blerpc_bench::pipeline::cancel::flash_read;
    use blerpc_sim::LinkParams;
    use std::time::Duration;
    // CI 15 ms; the firmware's GATT queue holds 8 notifications (those go out anyway).
    let params = LinkParams {
        conn_interval: Duration::from_millis(15),
        initial_interval: None,
        queue_limit: 8,
        ..LinkParams::default()
    };
    let with = flash_read(params, true).unwrap();
    let without = flash_read(params, false).unwrap();
    // The figures docs/protocol.md quotes (`-- --nocapture`).
    eprintln!(
        "containers after the drop, by interval and in all: with CANCEL {with:?}, without {without:?}"
    );
    // Told, the peripheral stops within 3 intervals and sends half as much; left alone it
    // sends the rest of the 8 KB (about 30 more containers), for longer than 4 intervals.
    assert!(with.stopped_within() <= 3, "{with:?}");
    assert!(without.stopped_within() > 4, "{without:?}");
    assert!(
        without.in_all >= with.in_all + 8,
        "with {with:?}, without {without:?}"
    );
}

#[test]
fn a_stream_carries_a_window_a_round_trip_and_both_ways_at_once() {
    use blerpc_bench::pipeline::streams::{Case, Mode, run};
    use blerpc_sim::LinkParams;
    use std::time::Duration;
    // CI 15 ms, 20-byte items (one container each).
    let params = LinkParams {
        conn_interval: Duration::from_millis(15),
        initial_interval: None,
        ..LinkParams::default()
    };
    let rates = |case| run(params, case, 3.0).unwrap();
    // The figures docs/protocol.md quotes (`-- --nocapture`).
    let windows = [1u16, 2, 4, 8, 16, 24, 32];
    let mut one_way = Vec::new();
    for w in windows {
        let up = rates(Case::new(Mode::Up, w, 20)).up;
        let down = rates(Case::new(Mode::Down, w, 20)).down;
        eprintln!("window {w:>2}: {up:.0} items/s up, {down:.0} down");
        one_way.push((w, up, down));
    }
    // A window short of the link's rate carries one window per round trip (two intervals)
    // each way: flow control holds the sender to what the receiver consumed, and costs it
    // nothing more (a remainder below half the window waiting for more items once cost a
    // window of 8 three items of every 8 up, and a window of 4 one down in two).
    for &(w, up, down) in &one_way[..5] {
        let expected = f64::from(w) / 0.030;
        for rate in [up, down] {
            assert!(
                (rate - expected).abs() <= 0.1 * expected,
                "window {w}: {up} up, {down} down items/s"
            );
        }
    }
    // Both ways at once, each window: against one way's rate at the same window.
    let mut both = None;
    for &(w, up, down) in &one_way {
        let rates = rates(Case::new(Mode::Both, w, 20));
        both = Some(rates);
        eprintln!(
            "window {w:>2} both ways: {:.0} down, {:.0} up items/s ({:.2}× and {:.2}× one way)",
            rates.down,
            rates.up,
            rates.down / down,
            rates.up / up
        );
        // Below the link's rate a window carries as much both ways as one way.
        if w <= 8 {
            assert!(
                rates.down >= 0.9 * down && rates.up >= 0.9 * up,
                "window {w}: {rates:?} against {down} and {up}"
            );
        }
    }
    let (_, up, down) = one_way[6];
    let both = both.unwrap();
    let halves = rates(Case {
        credit_delay: None,
        ..Case::new(Mode::Both, 32, 20)
    });
    eprintln!(
        "window 32 both ways: {:.0} down and {:.0} up items/s ({:.2}× and {:.2}× one way); \
         granting only half windows: {:.0} and {:.0} ({:.2}× and {:.2}×)",
        both.down,
        both.up,
        both.down / down,
        both.up / up,
        halves.down,
        halves.up,
        halves.down / down,
        halves.up / up,
    );
    for r in [both, halves] {
        assert!(
            r.down >= 0.5 * down && r.up >= 0.5 * up,
            "{r:?} against {down} and {up}"
        );
    }
}
