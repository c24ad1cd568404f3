//! `blerpc gateway` as users run it: real processes on loopback. Devices dial in
//! (`blerpc serve --dial` over TCP and WebSocket, and a device on the reference Python library),
//! backends call them over HTTP, a backend's own central reaches one end to end through the
//! relay, and the gateway restarts under them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blerpc_test_support::{Proc, blerpc, http, repo, run, venv_python};

const TOKEN: &str = "test-token-0123456789abcdef";

struct Gateway {
    /// The process, killed when the value is dropped (its lines after `http`: `fleet`,
    /// `worker`).
    proc: Proc,
    /// `HOST:PORT` of the HTTP API.
    http: String,
    /// The device listeners' URLs, in the order given.
    devices: Vec<String>,
}

fn gateway(args: &[&str]) -> Gateway {
    let mut cmd = blerpc();
    cmd.arg("gateway").args(args);
    let mut proc = Proc::spawn(cmd, "blerpc gateway");
    let mut devices = Vec::new();
    loop {
        let line = proc.line();
        if let Some(url) = line.strip_prefix("devices ") {
            devices.push(url.to_string());
        } else if let Some(url) = line
            .strip_prefix("http http://")
            .or_else(|| line.strip_prefix("http https://"))
        {
            return Gateway {
                proc,
                http: url.to_string(),
                devices,
            };
        } else {
            panic!("unexpected gateway line: {line}");
        }
    }
}

/// `blerpc serve --dial URL` with the identity in `key_file`; returns the process and its key.
fn dial_device(url: &str, key_file: &Path, more: &[&str]) -> (Proc, String) {
    let mut cmd = blerpc();
    cmd.arg("serve")
        .arg("--dial")
        .arg(url)
        .arg("--identity")
        .arg(key_file)
        .args(more);
    let mut p = Proc::spawn(cmd, "blerpc serve --dial");
    let line = p.line();
    let parts: Vec<&str> = line.split(' ').collect();
    assert!(
        parts.len() == 4 && parts[0] == "dialling" && parts[2] == "identity",
        "unexpected line: {line}"
    );
    let key = parts[3].to_string();
    (p, key)
}

fn keygen(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let done = run(
        {
            let mut c = blerpc();
            c.arg("keygen").arg("--out").arg(&path);
            c
        },
        "",
    );
    assert!(done.status.success(), "keygen: {}", done.stderr);
    path
}

/// A device on the reference Python library dialling `addr` (`HOST:PORT`).
fn python_device(addr: &str, seed: &str) -> (Proc, String) {
    let mut cmd = Command::new(venv_python());
    cmd.arg(repo().join("tools/interop/peripheral.py"))
        .arg("--dial")
        .arg(addr)
        .arg("--seed")
        .arg(seed);
    let mut p = Proc::spawn(cmd, "reference peripheral --dial");
    let line = p.line();
    let parts: Vec<&str> = line.split(' ').collect();
    assert_eq!(parts[0], "DIALLING", "unexpected line: {line}");
    (p, parts[2].to_string())
}

fn devices(http: &str) -> serde_json::Value {
    let r = http::get(http, "/v1/devices", Some(TOKEN));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn status_of(http: &str, id: &str) -> Option<String> {
    devices(http)["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id)
        .map(|d| d["status"].as_str().unwrap().to_string())
}

/// Waits until `id` has `status`, within `limit`; returns how long it took.
fn wait_status(http: &str, id: &str, status: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if status_of(http, id).as_deref() == Some(status) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "device {id} not {status} within {limit:?}: {}",
            devices(http)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn call(http: &str, id: &str, command: &str, body: &str) -> http::Response {
    http::post(
        http,
        &format!("/v1/devices/{id}/calls/{command}"),
        TOKEN,
        &[("Content-Type", "application/json")],
        body,
    )
}

/// Stops process `pid` (SIGSTOP) and waits until the kernel shows it stopped: `kill` returns
/// before a running process has actually stopped.
fn freeze(pid: u32) {
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state is the field after the parenthesised command name.
        let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
        if state == Some(Some('T')) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} did not stop: {stat}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn thaw(pid: u32) {
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

/// The arguments every test gateway gets ([`blerpc_test_support::gateway::enrolling`]).
fn enrolling(dir: &Path, more: &[&str]) -> Vec<String> {
    blerpc_test_support::gateway::enrolling(dir, TOKEN, more)
}

fn tokens_file(dir: &Path) -> PathBuf {
    blerpc_test_support::gateway::tokens_file(dir, TOKEN)
}

fn host_port(url: &str) -> String {
    url.split("://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string()
}

/// A backend's own central calls `echo` on device `id` through `http`'s relayed link (pinned
/// to the device's key); asserts the echo.
fn relay_echo(http: &str, id: &str, message: &str) {
    let mut c = blerpc();
    let request = format!(r#"{{"message":"{message}"}}"#);
    c.args([
        "call",
        "--connect",
        &format!("ws://{http}/v1/devices/{id}/link"),
        "--trust-key",
        id,
        "--bearer",
        TOKEN,
        "echo",
        &request,
    ]);
    let done = run(c, "");
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(done.stdout.trim(), request);
}

/// Calls `echo` on `id` through `http` until it answers, within `limit` of `since`; until then
/// every failure must be a problem that says why (502, 503 or 504).
fn until_reachable(http: &str, id: &str, since: Instant, limit: Duration) {
    loop {
        let r = call(http, id, "echo", r#"{"message":"moved"}"#);
        if r.status == 200 {
            assert_eq!(r.json()["message"], "moved");
            return;
        }
        let problem = r.json();
        assert!(
            [502, 503, 504].contains(&r.status) && problem["detail"].is_string(),
            "{} {}",
            r.status,
            r.text()
        );
        assert!(
            since.elapsed() < limit,
            "device {id} not reachable through {http} within {limit:?}: {} {}",
            r.status,
            r.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn devices_dial_in_and_backends_call_them_over_http_and_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let known = dir.path().join("devices.json");
    let tokens = tokens_file(dir.path());
    let gw = gateway(&[
        "--devices",
        "tcp://127.0.0.1:0",
        "--devices",
        "ws://127.0.0.1:0/devices",
        "--http",
        "127.0.0.1:0",
        "--enroll",
        "--known-devices",
        known.to_str().unwrap(),
        "--tokens",
        tokens.to_str().unwrap(),
    ]);
    let (tcp_url, ws_url) = (gw.devices[0].clone(), gw.devices[1].clone());
    let (a, key_a) = dial_device(&tcp_url, &keygen(dir.path(), "a.key"), &[]);
    let (b, key_b) = dial_device(&ws_url, &keygen(dir.path(), "b.key"), &[]);
    let (_c, key_c) = python_device(&host_port(&tcp_url), &"5c".repeat(32));
    let http = gw.http.clone();
    for id in [&key_a, &key_b, &key_c] {
        wait_status(&http, id, "online", Duration::from_secs(15));
    }
    let listed = devices(&http);
    assert_eq!(listed["connected"], 3, "{listed}");
    let link_of = |id: &str| {
        listed["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == id)
            .unwrap()["link"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(link_of(&key_a), "tcp");
    assert_eq!(link_of(&key_b), "ws");

    // Unary calls to every device, JSON in and out.
    for id in [&key_a, &key_b, &key_c] {
        let r = call(&http, id, "echo", r#"{"message":"hi gateway"}"#);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.json(), serde_json::json!({"message": "hi gateway"}));
        let r = call(&http, id, "flash_read", r#"{"address":16,"length":4}"#);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["address"], 16);
    }

    // A device→caller stream as NDJSON, and as server-sent events.
    let r = call(&http, &key_a, "counter_stream", r#"{"count":5}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let items: Vec<serde_json::Value> = r
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(items.len(), 5, "{}", r.text());
    for (i, item) in items.iter().enumerate() {
        assert_eq!(item["seq"], i);
    }
    let r = http::post(
        &http,
        &format!("/v1/devices/{key_c}/calls/counter_stream"),
        TOKEN,
        &[("Accept", "text/event-stream")],
        r#"{"count":3}"#,
    );
    assert_eq!(r.status, 200);
    let text = r.text();
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|l| l.trim())
        .collect();
    assert_eq!(data.len(), 3, "{text}");
    assert!(data[2].contains(r#""seq":2"#), "{text}");

    // A caller→device stream from an NDJSON body.
    for id in [&key_b, &key_c] {
        let r = http::post(
            &http,
            &format!("/v1/devices/{id}/calls/counter_upload"),
            TOKEN,
            &[("Content-Type", "application/x-ndjson")],
            "{\"seq\":0,\"value\":1}\n{\"seq\":1,\"value\":2}\n\n{\"seq\":2,\"value\":3}",
        );
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["received_count"], 3, "{}", r.text());
    }

    // Every failure has its own status, as a problem.
    let problem = |r: &http::Response, status: u16, kind: &str| {
        assert_eq!(r.status, status, "{}", r.text());
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        assert_eq!(
            r.json()["type"],
            format!("urn:blerpc:problem:{kind}"),
            "{}",
            r.text()
        );
    };
    problem(&call(&http, &key_a, "reboot", "{}"), 400, "unknown_command");
    problem(
        &call(&http, &key_a, "echo", r#"{"mesage":"x"}"#),
        400,
        "bad_request",
    );
    problem(
        &call(&http, &"00".repeat(32), "echo", "{}"),
        404,
        "unknown_device",
    );
    problem(
        &call(
            &http,
            &key_a,
            "flash_read",
            r#"{"address":4000000,"length":4}"#,
        ),
        502,
        "device_error",
    );
    problem(&http::get(&http, "/v1/devices", None), 401, "unauthorized");
    problem(
        &http::get(&http, "/v1/devices", Some("wrong-token-0123456789")),
        401,
        "unauthorized",
    );
    let r = http::post(
        &http,
        &format!("/v1/devices/{key_a}/calls/echo"),
        TOKEN,
        &[("Blerpc-Deadline-Ms", "soon")],
        "{}",
    );
    problem(&r, 400, "bad_request");

    // End to end through the gateway: our own central, pinned to the device's key.
    let relay = |id: &str, trust: &str| {
        let mut c = blerpc();
        c.args([
            "call",
            "--connect",
            &format!("ws://{http}/v1/devices/{id}/link"),
            "--trust-key",
            trust,
            "--bearer",
            TOKEN,
            "echo",
            r#"{"message":"end to end"}"#,
        ]);
        run(c, "")
    };
    let done = relay(&key_a, &key_a);
    assert!(
        done.status.success(),
        "relayed call failed: {}",
        done.stderr
    );
    assert_eq!(done.stdout.trim(), r#"{"message":"end to end"}"#);
    let done = relay(&key_b, &key_b);
    assert!(
        done.status.success(),
        "relayed call over ws failed: {}",
        done.stderr
    );
    // The gateway (or anyone on the path) cannot pose as another device.
    let done = relay(&key_a, &key_b);
    assert!(!done.status.success());
    assert!(done.stderr.contains("trust-key"), "{}", done.stderr);
    // A device on the reference library cannot open a second connection: a clear refusal.
    let done = relay(&key_c, &key_c);
    assert!(!done.status.success());
    assert!(done.stderr.contains("501"), "{}", done.stderr);

    // Deadline: a device that stops answering.
    let pid = a.child.id();
    freeze(pid);
    let r = http::post(
        &http,
        &format!("/v1/devices/{key_a}/calls/echo"),
        TOKEN,
        &[("Blerpc-Deadline-Ms", "300")],
        r#"{"message":"anyone?"}"#,
    );
    thaw(pid);
    problem(&r, 504, "deadline");
    let r = call(&http, &key_a, "echo", r#"{"message":"back"}"#);
    assert_eq!(r.status, 200, "{}", r.text());

    // A device that goes away: offline within seconds, then 503.
    drop(b);
    let took = wait_status(&http, &key_b, "offline", Duration::from_secs(10));
    assert!(took < Duration::from_secs(5), "took {took:?}");
    problem(&call(&http, &key_b, "echo", "{}"), 503, "not_connected");

    // The metrics count it all.
    let m = http::get(&http, "/metrics", Some(TOKEN));
    assert_eq!(m.status, 200);
    let text = m.text();
    for line in [
        "blerpc_gateway_devices_connected 2",
        r#"blerpc_gateway_calls_total{status="not_connected"} 1"#,
        r#"blerpc_gateway_calls_total{status="deadline"} 1"#,
        // a, b, and a again with the wrong pin (its own key exchange fails, at the backend)
        r#"blerpc_gateway_relays_total{outcome="opened"} 3"#,
        r#"blerpc_gateway_relays_total{outcome="unsupported"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
    // Enrolment recorded the three devices.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let recorded = std::fs::read_to_string(&known).unwrap_or_default();
        if [&key_a, &key_b, &key_c]
            .iter()
            .all(|k| recorded.contains(k.as_str()))
        {
            break;
        }
        assert!(Instant::now() < deadline, "not recorded: {recorded}");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(gw);
}

/// What [`caller_under_faults`] saw.
#[derive(Debug, Default)]
struct Outcomes {
    /// Right answers per device before the gateway went down, and after it came back.
    right_answers_before: [usize; 2],
    right_answers_after: [usize; 2],
    /// `application/problem+json` errors by status.
    problems: std::collections::BTreeMap<u16, usize>,
    /// Calls that could not reach the gateway (or lost their connection) while it was down.
    gateway_unreachable: usize,
}

/// Calls `echo` on the devices in turn, each with a message of its own and a 2 s deadline,
/// until `stop`; panics on a wrong answer, an unexpected status, a call that takes longer than
/// its deadline allows, or a failure to reach the gateway outside the window in `down` (the
/// times, from `epoch`, at which it was killed and at which its replacement was listening).
fn caller_under_faults(
    http: &str,
    devices: &[String; 2],
    epoch: Instant,
    stop: &AtomicBool,
    down: &Mutex<Option<(Duration, Duration)>>,
) -> Outcomes {
    let mut out = Outcomes::default();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let which = (i % 2) as usize;
        let id = &devices[which];
        let message = format!("call {i} to {}", &id[..8]);
        i += 1;
        let started = epoch.elapsed();
        let r = http::try_request(
            http,
            "POST",
            &format!("/v1/devices/{id}/calls/echo"),
            &[
                ("Authorization", &format!("Bearer {TOKEN}")),
                ("Content-Type", "application/json"),
                ("Blerpc-Deadline-Ms", "2000"),
            ],
            format!(r#"{{"message":"{message}"}}"#).as_bytes(),
        );
        let took = epoch.elapsed() - started;
        assert!(
            took < Duration::from_secs(5),
            "call {message} took {took:?}: {r:?}"
        );
        let window = *down.lock().unwrap();
        let after = window.is_some_and(|(_, up)| started > up);
        match r {
            Ok(r) if r.status == 200 => {
                assert_eq!(r.json()["message"], message.as_str(), "a wrong answer");
                if after {
                    out.right_answers_after[which] += 1;
                } else if window.is_none() {
                    out.right_answers_before[which] += 1;
                }
            }
            Ok(r) => {
                assert!(
                    matches!(r.status, 502..=504),
                    "call {message}: unexpected {}: {}",
                    r.status,
                    r.text()
                );
                assert_eq!(
                    r.header("Content-Type"),
                    Some("application/problem+json"),
                    "{}",
                    r.text()
                );
                *out.problems.entry(r.status).or_default() += 1;
            }
            Err(e) => {
                // The gateway was killed while this call was in flight, or it was down.
                assert!(!after, "call {message} after the gateway's return: {e}");
                out.gateway_unreachable += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    out
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_gateway_restarts_and_its_devices_come_back_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(dir.path());
    let (a_key, b_key) = (keygen(dir.path(), "a.key"), keygen(dir.path(), "b.key"));
    let stranger = keygen(dir.path(), "stranger.key");
    let known = dir.path().join("devices.json");
    let (dev_port, http_port) = (free_port(), free_port());
    let devices_url = format!("tcp://127.0.0.1:{dev_port}");
    let http_addr = format!("127.0.0.1:{http_port}");
    let start = |admission: &[&str]| {
        let mut args = vec![
            "--devices",
            &devices_url,
            "--http",
            &http_addr,
            "--tokens",
            tokens.to_str().unwrap(),
            "--known-devices",
            known.to_str().unwrap(),
        ];
        args.extend_from_slice(admission);
        gateway(&args)
    };
    // Enrol two devices.
    let gw = start(&["--enroll"]);
    let (_a, ka) = dial_device(&devices_url, &a_key, &[]);
    let (b, kb) = dial_device(&devices_url, &b_key, &[]);
    for k in [&ka, &kb] {
        wait_status(&gw.http, k, "online", Duration::from_secs(15));
    }
    // Recorded before the restart.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(&known)
        .unwrap_or_default()
        .contains(kb.as_str())
    {
        assert!(Instant::now() < deadline, "enrolment not recorded");
        std::thread::sleep(Duration::from_millis(100));
    }
    // From here on a caller calls both devices back to back while device b is killed and the
    // gateway restarts: every call must get its own answer or a clear error, in bounded time.
    let epoch = Instant::now();
    let gateway_down = Arc::new(Mutex::new(None::<(Duration, Duration)>));
    let stop = Arc::new(AtomicBool::new(false));
    let caller = {
        let (stop, gateway_down) = (stop.clone(), gateway_down.clone());
        let (http, ka, kb) = (http_addr.clone(), ka.clone(), kb.clone());
        std::thread::spawn(move || {
            caller_under_faults(&http, &[ka, kb], epoch, &stop, &gateway_down)
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    drop(b);
    std::thread::sleep(Duration::from_millis(1000));
    let down = epoch.elapsed();
    drop(gw);
    // Down: a clear refusal, not a hang.
    let refused =
        std::net::TcpStream::connect_timeout(&http_addr.parse().unwrap(), Duration::from_secs(2));
    assert!(refused.is_err());
    std::thread::sleep(Duration::from_millis(500));
    // Back, with the enrolled devices as its allow-list; device b dials again too.
    let back = Instant::now();
    let gw = start(&[]);
    *gateway_down.lock().unwrap() = Some((down, epoch.elapsed()));
    let (_b_again, _) = dial_device(&devices_url, &b_key, &[]);
    for k in [&ka, &kb] {
        wait_status(&gw.http, k, "online", Duration::from_secs(10));
    }
    assert!(
        back.elapsed() < Duration::from_secs(10),
        "{:?}",
        back.elapsed()
    );
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let outcomes = caller.join().unwrap();
    eprintln!("calls through a device kill and a gateway restart: {outcomes:?}");
    // Both devices answered right before the faults and after the return, device b's death
    // was reported as such, and the restart was seen as a refused connection.
    assert!(outcomes.right_answers_before[0] > 0 && outcomes.right_answers_before[1] > 0);
    assert!(outcomes.right_answers_after[0] > 0 && outcomes.right_answers_after[1] > 0);
    assert!(outcomes.problems.contains_key(&503), "{outcomes:?}");
    assert!(outcomes.gateway_unreachable > 0, "{outcomes:?}");
    for k in [&ka, &kb] {
        let r = call(&gw.http, k, "echo", &format!(r#"{{"message":"{k}"}}"#));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["message"], k.as_str());
    }
    // A device not on the allow-list is refused, and counted.
    let (_s, ks) = dial_device(&devices_url, &stranger, &[]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = http::get(&gw.http, "/metrics", Some(TOKEN)).text();
        if m.contains(r#"blerpc_gateway_devices_refused_total{reason="not_allowed"}"#) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stranger was not refused:\n{m}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status_of(&gw.http, &ks), None);
    let r = call(&gw.http, &ks, "echo", "{}");
    assert_eq!(r.status, 404, "{}", r.text());
}

#[test]
fn plaintext_devices_are_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(dir.path());
    for allow in [false, true] {
        let mut args = vec![
            "--devices",
            "tcp://127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--enroll",
            "--tokens",
            tokens.to_str().unwrap(),
        ];
        let known = dir.path().join(format!("devices-{allow}.json"));
        args.extend(["--known-devices", known.to_str().unwrap()]);
        if allow {
            args.push("--allow-plaintext");
        }
        let gw = gateway(&args);
        let mut cmd = blerpc();
        cmd.args(["serve", "--dial", &gw.devices[0], "--plaintext"]);
        let mut device = Proc::spawn(cmd, "plaintext device");
        assert!(device.line().starts_with("dialling "));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let listed = devices(&gw.http);
            let n = listed["connected"].as_u64().unwrap();
            if allow && n == 1 {
                let id = listed["devices"][0]["id"].as_str().unwrap().to_string();
                assert!(id.starts_with("plain-tcp-127.0.0.1-"), "{id}");
                let r = call(&gw.http, &id, "echo", r#"{"message":"clear"}"#);
                assert_eq!(r.status, 200, "{}", r.text());
                break;
            }
            if !allow {
                let m = http::get(&gw.http, "/metrics", Some(TOKEN)).text();
                if m.contains(r#"blerpc_gateway_devices_refused_total{reason="plaintext"}"#) {
                    assert_eq!(n, 0);
                    break;
                }
            }
            assert!(Instant::now() < deadline, "allow={allow}: {listed}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn worker_processes_hold_the_devices_behind_one_api() {
    let dir = tempfile::tempdir().unwrap();
    // The schema from the .proto file itself (protox), as a user's own service would come.
    let schema = repo().join("proto/blerpc.proto");
    let args = enrolling(
        dir.path(),
        &["--schema", schema.to_str().unwrap(), "--workers", "3"],
    );
    let gw = gateway(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut held = Vec::new();
    for i in 0..6 {
        let key = keygen(dir.path(), &format!("d{i}.key"));
        held.push(dial_device(&gw.devices[0], &key, &[]));
    }
    for (_, id) in &held {
        wait_status(&gw.http, id, "online", Duration::from_secs(15));
    }
    assert_eq!(devices(&gw.http)["connected"], 6);
    // Each device answers through the worker that holds it.
    for (_, id) in &held {
        let r = call(&gw.http, id, "echo", &format!(r#"{{"message":"{id}"}}"#));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["message"], id.as_str());
        let r = http::get(&gw.http, &format!("/v1/devices/{id}"), Some(TOKEN));
        assert_eq!(r.json()["status"], "online");
    }
    let r = call(&gw.http, &held[0].1, "counter_stream", r#"{"count":4}"#);
    assert_eq!(r.text().lines().count(), 4, "{}", r.text());
    // Relayed end to end through the front and a worker.
    relay_echo(&gw.http, &held[1].1, "through the front");
    // Merged metrics; an unknown device and the token still checked at the front.
    let m = http::get(&gw.http, "/metrics", Some(TOKEN)).text();
    assert!(m.contains("blerpc_gateway_devices_connected 6"), "{m}");
    assert!(m.ends_with("# EOF\n"));
    assert_eq!(call(&gw.http, &"11".repeat(32), "echo", "{}").status, 404);
    assert_eq!(http::get(&gw.http, "/v1/devices", None).status, 401);
    // A device that leaves is offline at the front too.
    let (gone, gone_id) = held.pop().unwrap();
    drop(gone);
    wait_status(&gw.http, &gone_id, "offline", Duration::from_secs(10));
    assert_eq!(call(&gw.http, &gone_id, "echo", "{}").status, 503);
}

#[test]
fn over_tls_devices_dial_wss_and_a_backend_relays_over_https() {
    let dir = tempfile::tempdir().unwrap();
    blerpc::link::local_ca::LocalPki::generate()
        .unwrap()
        .write_to(dir.path())
        .unwrap();
    let p = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    let tokens = tokens_file(dir.path());
    let known = dir.path().join("devices.json");
    let gw = gateway(&[
        "--devices",
        "wss://127.0.0.1:0/devices",
        "--tls-cert",
        &p("cert.pem"),
        "--tls-key",
        &p("key.pem"),
        "--http",
        "127.0.0.1:0",
        "--http-tls-cert",
        &p("cert.pem"),
        "--http-tls-key",
        &p("key.pem"),
        "--enroll",
        "--known-devices",
        known.to_str().unwrap(),
        "--tokens",
        tokens.to_str().unwrap(),
    ]);
    assert!(
        gw.devices[0].starts_with("wss://127.0.0.1:"),
        "{:?}",
        gw.devices
    );
    let (_device, id) = dial_device(
        &gw.devices[0],
        &keygen(dir.path(), "d.key"),
        &["--dial-tls-ca", &p("ca.pem")],
    );
    // The device is online: asked over HTTPS by our own central's relayed call, which needs it.
    let mut done = None;
    for _ in 0..100 {
        let mut c = blerpc();
        c.args([
            "call",
            "--connect",
            &format!("wss://{}/v1/devices/{id}/link", gw.http),
            "--tls-ca",
            &p("ca.pem"),
            "--trust-key",
            &id,
            "--bearer",
            TOKEN,
            "echo",
            r#"{"message":"over tls, end to end"}"#,
        ]);
        let d = run(c, "");
        if d.status.success() {
            done = Some(d);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let done = done.expect("no relayed call over wss succeeded within 10 s");
    assert_eq!(done.stdout.trim(), r#"{"message":"over tls, end to end"}"#);
    // Plain HTTP to the HTTPS port is not answered as HTTP.
    let mut raw = std::net::TcpStream::connect(&gw.http).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    use std::io::{Read as _, Write as _};
    raw.write_all(b"GET /v1/devices HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = raw.read_to_end(&mut answer);
    assert!(!answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
}

#[test]
fn calls_beyond_the_queue_bound_are_refused_with_429() {
    let dir = tempfile::tempdir().unwrap();
    // The link watch never asks a device with calls queued, but an ask made just before the
    // device stops answering would hold the one call in flight: it is off here.
    let args = enrolling(
        dir.path(),
        &[
            "--max-in-flight",
            "1",
            "--max-queued",
            "2",
            "--diagnostics-every",
            "0",
        ],
    );
    let gw = gateway(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (device, id) = dial_device(&gw.devices[0], &keygen(dir.path(), "d.key"), &[]);
    wait_status(&gw.http, &id, "online", Duration::from_secs(15));
    // The device stops answering: one call in flight, two queued, the rest refused at once.
    let pid = device.child.id();
    freeze(pid);
    let calls: Vec<_> = (0..6)
        .map(|i| {
            let (http, id) = (gw.http.clone(), id.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100 * i));
                http::post(
                    &http,
                    &format!("/v1/devices/{id}/calls/echo"),
                    TOKEN,
                    &[("Blerpc-Deadline-Ms", "1500")],
                    "{}",
                )
            })
        })
        .collect();
    let statuses: Vec<u16> = calls
        .into_iter()
        .map(|t| t.join().unwrap().status)
        .collect();
    thaw(pid);
    let full = statuses.iter().filter(|&&s| s == 429).count();
    let late = statuses.iter().filter(|&&s| s == 504).count();
    assert_eq!((full, late), (3, 3), "{statuses:?}");
    // Back: calls answer again.
    let r = call(&gw.http, &id, "echo", r#"{"message":"after"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Two `blerpc gateway --nats` processes on a real nats-server form one fleet: a device dialling
/// both (`--dial A,B`) is called through either, and when its gateway is killed (SIGKILL) it
/// moves to the other, where calls find it again.
#[test]
fn a_fleet_on_nats_answers_for_every_device_and_survives_a_killed_gateway() {
    let nats = blerpc_test_support::nats::NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let member = |name: &str| {
        // Each gateway enrols into a file of its own.
        let own = dir.path().join(name);
        std::fs::create_dir_all(&own).unwrap();
        let args = enrolling(&own, &["--nats", &nats.url, "--nats-name", name]);
        gateway(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let a = member("gw-a");
    let b = member("gw-b");
    let dial = format!("{},{}", a.devices[0], b.devices[0]);
    let (_device, id) = dial_device(&dial, &keygen(dir.path(), "d.key"), &[]);
    // Listed by both (B lists A's devices through NATS), called through both.
    wait_status(&a.http, &id, "online", Duration::from_secs(15));
    wait_status(&b.http, &id, "online", Duration::from_secs(15));
    for http in [&a.http, &b.http] {
        let r = call(http, &id, "echo", r#"{"message":"fleet"}"#);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["message"], "fleet");
    }
    let stranger = "ab".repeat(32);
    let r = call(&b.http, &stranger, "echo", "{}");
    assert_eq!(r.status, 404, "{}", r.text());

    // Gateway A dies; the device redials B, and B answers for it within 10 s.
    let killed = Instant::now();
    drop(a);
    until_reachable(&b.http, &id, killed, Duration::from_secs(10));
    eprintln!(
        "reachable again through gw-b {:?} after gw-a was killed",
        killed.elapsed()
    );
}

/// The entry of device `id` in `http`'s listing.
fn listed(http: &str, id: &str) -> Option<serde_json::Value> {
    devices(http)["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id)
        .cloned()
}

/// `blerpc gateway --workers 2 --nats`: each worker joins the fleet as a gateway of its own
/// (`box-w0`, `box-w1`) and holds the devices that dial into the shared port; the front joins
/// as `box`, holds none, and routes everything through NATS. Calls (unary, a stream, a relayed
/// link) reach every device through the front, the listing names each device's worker, a
/// SIGKILLed worker's devices come back through the other, the front starts the dead worker
/// again and new devices land on it, and a durable call for an offline device runs on the
/// worker it connects to.
#[test]
fn workers_on_nats_are_gateways_of_the_fleet_behind_one_front() {
    let nats = blerpc_test_support::nats::NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let args = enrolling(
        dir.path(),
        &["--workers", "2", "--nats", &nats.url, "--nats-name", "box"],
    );
    let mut gw = gateway(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(gw.proc.line(), "fleet box");
    // `worker NAME URL pid PID`, one per worker.
    let mut pids = std::collections::HashMap::new();
    for k in 0..2 {
        let line = gw.proc.line();
        let parts: Vec<&str> = line.split(' ').collect();
        assert!(
            parts.len() == 5 && parts[0] == "worker" && parts[1] == format!("box-w{k}"),
            "unexpected line: {line}"
        );
        assert!(parts[2].starts_with("http://127.0.0.1:") && parts[3] == "pid");
        pids.insert(parts[1].to_string(), parts[4].parse::<u32>().unwrap());
    }
    let holder = |id: &str| listed(&gw.http, id).unwrap()["gateway"].clone();
    // Devices dial the shared port until both workers hold some (the kernel spreads them).
    let mut held: Vec<(Proc, String, PathBuf)> = Vec::new();
    loop {
        let key = keygen(dir.path(), &format!("d{}.key", held.len()));
        let (p, id) = dial_device(&gw.devices[0], &key, &[]);
        wait_status(&gw.http, &id, "online", Duration::from_secs(15));
        held.push((p, id, key));
        let workers: std::collections::HashSet<String> = held
            .iter()
            .map(|(_, id, _)| holder(id).as_str().unwrap().to_string())
            .collect();
        if workers.len() == 2 && held.len() >= 4 {
            break;
        }
        assert!(held.len() < 16, "every device landed on {workers:?}");
    }
    // Every device answers through the front, listed with the worker that holds it.
    for (_, id, _) in &held {
        let r = call(&gw.http, id, "echo", &format!(r#"{{"message":"{id}"}}"#));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["message"], id.as_str());
        let worker = holder(id);
        assert!(pids.contains_key(worker.as_str().unwrap()), "{worker}");
    }
    assert_eq!(devices(&gw.http)["connected"], held.len());
    let r = call(&gw.http, &held[0].1, "counter_stream", r#"{"count":4}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text().lines().count(), 4, "{}", r.text());
    // A relayed link through the front: the device dials its worker's own port.
    relay_echo(&gw.http, &held[1].1, "through the fleet");
    // The front's /metrics: every gateway of the fleet's, summed (the front holds none).
    let m = http::get(&gw.http, "/metrics", Some(TOKEN)).text();
    let connected = format!("blerpc_gateway_devices_connected {}", held.len());
    assert!(m.contains(&connected), "{m}");

    // One device goes offline, and a durable call waits for it.
    let (gone, gone_id, gone_key) = held.pop().unwrap();
    drop(gone);
    wait_status(&gw.http, &gone_id, "offline", Duration::from_secs(10));
    let r = http::post(
        &gw.http,
        &format!("/v1/devices/{gone_id}/calls/echo"),
        TOKEN,
        &[
            ("Content-Type", "application/json"),
            ("Blerpc-Durable", "ttl=60"),
        ],
        r#"{"message":"when back"}"#,
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let record = r.header("location").unwrap().to_string();

    // A worker dies (SIGKILL): its devices redial the shared port and land on the other.
    let victim = holder(&held[0].1).as_str().unwrap().to_string();
    let survivor = pids.keys().find(|n| **n != victim).unwrap().clone();
    let killed = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-KILL", &pids[&victim].to_string()])
            .status()
            .unwrap()
            .success()
    );
    for (_, id, _) in &held {
        until_reachable(&gw.http, id, killed, Duration::from_secs(10));
        // On the survivor, or on the victim once the front has started it again.
        let now = holder(id);
        assert!(now == survivor.as_str() || now == victim.as_str(), "{now}");
    }
    eprintln!(
        "every device of {victim} reachable again {:?} after the kill",
        killed.elapsed()
    );
    // The front starts the dead worker again (`--worker-restarts`), under its own name, and
    // new devices land on it too.
    let line = gw.proc.line();
    let parts: Vec<&str> = line.split(' ').collect();
    assert!(
        parts.len() == 6 && parts[0] == "worker" && parts[1] == victim && parts[5] == "restarted",
        "unexpected line: {line}"
    );
    let restarted: u32 = parts[4].parse().unwrap();
    assert_ne!(restarted, pids[&victim]);
    assert!(Path::new(&format!("/proc/{restarted}")).exists());
    let mut extra: Vec<Proc> = Vec::new();
    loop {
        let key = keygen(dir.path(), &format!("e{}.key", extra.len()));
        let (p, id) = dial_device(&gw.devices[0], &key, &[]);
        wait_status(&gw.http, &id, "online", Duration::from_secs(15));
        extra.push(p);
        if holder(&id) == victim.as_str() {
            let r = call(&gw.http, &id, "echo", r#"{"message":"restarted"}"#);
            assert_eq!(r.status, 200, "{}", r.text());
            break;
        }
        assert!(
            extra.len() < 16,
            "no device landed on the restarted {victim}"
        );
    }

    // The offline device comes back: its durable call runs on the worker that holds it.
    let (_back, back_id) = dial_device(&gw.devices[0], &gone_key, &[]);
    assert_eq!(back_id, gone_id);
    let deadline = Instant::now() + Duration::from_secs(10);
    let done = loop {
        let r = http::get(&gw.http, &record, Some(TOKEN));
        assert_eq!(r.status, 200, "{}", r.text());
        let body = r.json();
        if body["state"] == "succeeded" {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "the durable call did not run: {body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(done["response"]["message"], "when back");
    let sent = done["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["state"] == "sent")
        .unwrap();
    assert_eq!(sent["by"], holder(&back_id), "{done}");
}
