//! The hostile suite's tables.

use super::{Report, TARGET};
use crate::table::{Align, Table};

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1 << 20) as f64)
}

/// Prints every phase, the counters, the slowest calls and the medians with the target.
pub(super) fn print(r: &Report) {
    let p = &r.profile;
    let links: Vec<&str> = r.phases.iter().map(|p| p.link.as_str()).collect();
    if links.iter().any(|l| *l != "http") {
        println!(
            "hostile peers against blerpc serve: {} sockets per attack, {:.0} s phases, setup \
             deadline {:.1} s, container deadline {:.1} s, {} handshake slots; the legitimate \
             client makes a new connection per call every {} ms",
            p.sockets,
            p.phase_s,
            p.setup_timeout_s,
            p.container_timeout_s,
            p.max_handshakes,
            p.interval_ms
        );
    }
    if links.contains(&"http") {
        println!(
            "hostile HTTP clients against blerpc gateway's HTTP port (link http): {} sockets per \
             attack, {:.0} s phases, header, idle and body deadline {:.1} s, {} connections per \
             address, {} event streams; the legitimate caller (from 127.0.0.1, the attackers \
             from 127.B.0.x) posts echo on a new connection every {} ms",
            p.http_sockets,
            p.http_phase_s,
            p.header_timeout_s,
            p.max_per_address,
            p.max_event_streams,
            p.interval_ms
        );
        if p.http_rate > 0.0 {
            println!(
                "the gateway's address guard: {:.0} new connections a second from one address \
                 in bursts of {:.0}, a protocol error costing {:.0}, a {:.0} s penalty \
                 (counters refused:rate, refused:penalized, penalties:rate, penalties:offences)",
                p.http_rate, p.http_burst, p.http_offence_cost, p.http_penalty_s
            );
        } else {
            println!("the gateway's address guard: off (--http-rate 0)");
        }
    }
    let mut t = Table::new([
        "run",
        "link",
        "attack",
        "sockets",
        "calls ok",
        "p50 ms",
        "p99 ms",
        "×base",
        "RSS MiB",
        "peak",
        "after",
        "CPU s",
        "closed",
        "mean s",
        "max s",
        "held late",
        "half-open",
    ]);
    for i in 3..17 {
        t = t.align(i, Align::Right);
    }
    for ph in &r.phases {
        t.row([
            (ph.run + 1).to_string(),
            ph.link.clone(),
            ph.attack.clone(),
            ph.sockets.to_string(),
            format!("{}/{}", ph.ok, ph.calls),
            format!("{:.1}", ph.p50_ms),
            format!("{:.1}", ph.p99_ms),
            format!("{:.2}", ph.p99_vs_baseline),
            mib(ph.rss_before),
            mib(ph.rss_peak),
            mib(ph.rss_after),
            format!("{:.2}", ph.server_cpu_s),
            format!("{}/{}", ph.closed_by_server, ph.opened),
            format!("{:.2}", ph.mean_close_s),
            format!("{:.1}", ph.max_close_s),
            ph.held_past_deadline.to_string(),
            ph.never_completed.to_string(),
        ]);
    }
    print!("{}", t.plain(""));
    println!(
        "calls ok: legitimate calls that succeeded; ×base: p99 over the same link's baseline \
         (no attack) p99; RSS: before the phase, peak during it, after the attack stopped; \
         closed: hostile connections the server closed / opened; mean s, max s: how long they \
         stayed before it closed them, on average and at most; \
         held late: hostile connections the server still held a deadline and some slack after \
         they opened (serve: setup deadline + 2 s; gateway: header deadline + 1 s; must be 0 but \
         for the event streams it serves); half-open: ones that old the kernel completed on the attacker's side \
         only (the listen backlog was full; the server holds nothing for them)"
    );
    let mut reasons = Table::new([
        "run",
        "link",
        "attack",
        "server counters (by reason)",
        "answers (status×count)",
        "log bytes",
    ])
    .align(5, Align::Right);
    for ph in r
        .phases
        .iter()
        .filter(|p| !p.reasons.is_empty() || !p.statuses.is_empty())
    {
        let list: Vec<String> = ph.reasons.iter().map(|(r, n)| format!("{r}={n}")).collect();
        let answers: Vec<String> = ph
            .statuses
            .iter()
            .map(|(s, n)| {
                if *s == 0 {
                    format!("none×{n}")
                } else {
                    format!("{s}×{n}")
                }
            })
            .collect();
        reasons.row([
            (ph.run + 1).to_string(),
            ph.link.clone(),
            ph.attack.clone(),
            list.join(" "),
            answers.join(" "),
            ph.log_bytes.to_string(),
        ]);
    }
    if !reasons.is_empty() {
        print!("{}", reasons.plain(""));
    }
    let mut slow = Table::new([
        "run",
        "link",
        "attack",
        "slowest calls (s into the phase: ms)",
    ]);
    for ph in &r.phases {
        let list: Vec<String> = ph
            .slowest
            .iter()
            .map(|(at, ms)| format!("{at:.1}: {ms:.1}"))
            .collect();
        slow.row([
            (ph.run + 1).to_string(),
            ph.link.clone(),
            ph.attack.clone(),
            list.join(", "),
        ]);
    }
    print!("{}", slow.plain(""));
    println!("medians over {} runs:", p.runs);
    let mut m = Table::new([
        "link",
        "attack",
        "calls ok",
        "p50 ms",
        "p99 ms",
        "×base",
        "target",
        "met",
        "RSS growth MiB",
        "CPU s",
    ]);
    for i in 2..10 {
        m = m.align(i, Align::Right);
    }
    for x in &r.medians {
        let none = x.attack == "none";
        m.row([
            x.link.clone(),
            x.attack.clone(),
            format!("{}/{}", x.ok, x.calls),
            format!("{:.1}", x.p50_ms),
            format!("{:.1}", x.p99_ms),
            format!("{:.2}", x.p99_vs_baseline),
            if none {
                "—".into()
            } else {
                format!("≤ {TARGET}")
            },
            if none {
                "—"
            } else if x.target_met {
                "yes"
            } else {
                "NO"
            }
            .to_string(),
            mib(x.rss_growth),
            format!("{:.2}", x.server_cpu_s),
        ]);
    }
    print!("{}", m.plain(""));
    println!(
        "target: the median over the runs of each run's p99 over its own baseline p99, ≤ {TARGET} \
         (reported; the run fails only on a failed call or a connection held past its deadline)"
    );
}
