//! The fleet across separate hosts: a three-node NATS cluster, two gateways and the devices,
//! each on a host of its own (network namespaces on one switch, made by the test), the backend
//! on another. One gateway is killed (SIGKILL), one is cut off (its cable down, nothing reset),
//! and one NATS server is killed; after each, every device is reachable again through a gateway
//! still standing, and every call that failed meanwhile said why. Needs root (`ip netns`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use blerpc_test_support::nats::NatsServer;
use blerpc_test_support::netns::{Host, Lan};
use blerpc_test_support::process::exe;
use blerpc_test_support::{Proc, http};

const TOKEN: &str = "test-token-0123456789abcdef";

/// `blerpc ARGS` on `host`, with a configuration directory of its own.
fn blerpc_on(host: &Host, dir: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = host.command(exe());
    cmd.env_remove("RUST_LOG")
        .env("XDG_CONFIG_HOME", dir.join(format!("config-{}", host.ns)))
        .args(args);
    cmd
}

struct Gateway {
    proc: Option<Proc>,
    host: Host,
    http: String,
}

fn gateway(host: &Host, name: &str, nats: &str, dir: &Path) -> Gateway {
    let known = dir.join(format!("{name}.json"));
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let ip = host.ip.to_string();
    let cmd = blerpc_on(
        host,
        dir,
        &[
            "gateway",
            "--devices",
            &format!("tcp://{ip}:7000"),
            "--http",
            &format!("{ip}:8080"),
            "--enroll",
            "--known-devices",
            known.to_str().unwrap(),
            "--tokens",
            tokens.to_str().unwrap(),
            "--nats",
            nats,
            "--nats-name",
            name,
            "--nats-replicas",
            "3",
        ],
    );
    let mut proc = Proc::spawn(cmd, name);
    loop {
        let line = proc.line();
        if line.starts_with("fleet ") {
            break;
        }
    }
    Gateway {
        proc: Some(proc),
        host: host.clone(),
        http: format!("{ip}:8080"),
    }
}

/// Calls `echo` on `id` through `http` from the backend's host; the status and body.
fn echo(backend: &Host, http_addr: &str, id: &str) -> (u16, String) {
    let (addr, path) = (
        http_addr.to_string(),
        format!("/v1/devices/{id}/calls/echo"),
    );
    backend.run(move || {
        let r = http::post(
            &addr,
            &path,
            TOKEN,
            &[
                ("Content-Type", "application/json"),
                ("Blerpc-Deadline-Ms", "3000"),
            ],
            r#"{"message":"where"}"#,
        );
        (r.status, r.text())
    })
}

/// Waits until every device in `ids` answers `echo` through `http`, within `limit`; every
/// failure meanwhile must be a problem with a reason. Returns how long it took.
fn all_reachable(backend: &Host, http_addr: &str, ids: &[String], limit: Duration) -> Duration {
    let start = Instant::now();
    for id in ids {
        loop {
            let (status, body) = echo(backend, http_addr, id);
            if status == 200 {
                assert!(body.contains("where"), "{body}");
                break;
            }
            let problem: serde_json::Value = serde_json::from_str(&body)
                .unwrap_or_else(|_| panic!("a failure without a problem: {status} {body}"));
            eprintln!(
                "  {:>6.2} s {id:.8}… through {http_addr}: {status} {}",
                start.elapsed().as_secs_f64(),
                problem["detail"]
            );
            assert!(
                problem["detail"].as_str().is_some_and(|d| !d.is_empty()),
                "a failure without a reason: {status} {body}"
            );
            assert!(
                start.elapsed() < limit,
                "device {id} not reachable through {http_addr} within {limit:?}: {status} {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    start.elapsed()
}

#[test]
fn the_fleet_survives_a_killed_gateway_a_cut_gateway_and_a_killed_nats_server() {
    let dir = tempfile::tempdir().unwrap();
    let lan = Lan::new();
    let nats_hosts: Vec<Host> = (1..=3).map(|k| lan.host(&format!("n{k}"))).collect();
    let peers: Vec<Ipv4Addr> = nats_hosts.iter().map(|h| h.ip).collect();
    let mut servers: Vec<NatsServer> = nats_hosts
        .iter()
        .enumerate()
        .map(|(k, h)| NatsServer::member(h, &format!("n{}", k + 1), &peers))
        .collect();
    let nats_urls = peers
        .iter()
        .map(|p| format!("nats://{p}:4222"))
        .collect::<Vec<_>>()
        .join(",");
    let (g1_host, g2_host) = (lan.host("g1"), lan.host("g2"));
    let devices_host = lan.host("dev");
    let backend = lan.host("backend");

    let mut g1 = gateway(&g1_host, "gw-1", &nats_urls, dir.path());
    let g2 = gateway(&g2_host, "gw-2", &nats_urls, dir.path());
    let (d1, d2) = (
        format!("tcp://{}:7000", g1_host.ip),
        format!("tcp://{}:7000", g2_host.ip),
    );
    // Four devices, two dialling gw-1 first and two gw-2 first; keepalive probes every second.
    let mut device_procs = Vec::new();
    let mut ids = Vec::new();
    for k in 0..4 {
        let key = dir.path().join(format!("d{k}.key"));
        let seed = format!("{:02x}", 0x40 + k).repeat(32);
        std::fs::write(&key, seed).unwrap();
        let dial = if k % 2 == 0 {
            format!("{d1},{d2}")
        } else {
            format!("{d2},{d1}")
        };
        let cmd = blerpc_on(
            &devices_host,
            dir.path(),
            &[
                "serve",
                "--dial",
                &dial,
                "--identity",
                key.to_str().unwrap(),
                "--dial-keepalive",
                "1",
                "--dial-backoff-max",
                "1",
            ],
        );
        let mut p = Proc::spawn(cmd, &format!("device {k}"));
        let line = p.line();
        ids.push(line.split(' ').nth(3).unwrap().to_string());
        device_procs.push(p);
    }

    // Every device through either gateway.
    let took = all_reachable(&backend, &g1.http, &ids, Duration::from_secs(60));
    eprintln!("fleet up: all 4 devices reachable through gw-1 after {took:?}");
    all_reachable(&backend, &g2.http, &ids, Duration::from_secs(10));

    // gw-1 killed: its devices redial gw-2.
    drop(g1.proc.take());
    let took = all_reachable(&backend, &g2.http, &ids, Duration::from_secs(10));
    eprintln!("gw-1 killed: all reachable through gw-2 after {took:?}");

    // gw-1 back; gw-2 cut off: its devices notice (keepalive) and go to gw-1.
    g1 = gateway(&g1_host, "gw-1", &nats_urls, dir.path());
    g2.host.cut();
    let took = all_reachable(&backend, &g1.http, &ids, Duration::from_secs(45));
    eprintln!("gw-2 cut off: all reachable through gw-1 after {took:?}");

    // One NATS server of three killed: the gateways reconnect to the others, the buckets (3
    // replicas) keep their quorum, and a device that moves is still found.
    servers[0].kill();
    g2.host.mend();
    let took = all_reachable(&backend, &g1.http, &ids, Duration::from_secs(30));
    eprintln!("n1 killed: all reachable through gw-1 after {took:?}");
    drop(device_procs.remove(0));
    let key = dir.path().join("d0.key");
    let cmd = blerpc_on(
        &devices_host,
        dir.path(),
        &[
            "serve",
            "--dial",
            &format!("{d2},{d1}"),
            "--identity",
            key.to_str().unwrap(),
            "--dial-keepalive",
            "1",
        ],
    );
    let _moved = Proc::spawn(cmd, "device 0 again");
    let took = all_reachable(&backend, &g1.http, &ids[..1], Duration::from_secs(30));
    eprintln!("device 0 redialled (gw-2 first): reachable through gw-1 after {took:?}");

    // The mended gateway's stale claims never win: every call through either gateway finds
    // every device where it is now.
    all_reachable(&backend, &g2.http, &ids, Duration::from_secs(30));
    for round in 0..5 {
        for http_addr in [&g1.http, &g2.http] {
            for id in &ids {
                let (status, body) = echo(&backend, http_addr, id);
                assert_eq!(
                    status, 200,
                    "round {round}, {id} through {http_addr}: {body}"
                );
            }
        }
    }
    drop(g2);
    drop(g1);
}
