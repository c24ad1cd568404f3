//! `blerpc serve` and `blerpc call` / `upload` against each other over TCP, WebSocket and TLS;
//! pinning (a wrong key, trust on first use); clear one-line errors; `keygen`; `demo`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use blerpc_test_support::{blerpc, run, serve};

fn call(url: &str, pin: &[&str], args: &[&str], stdin: &str) -> blerpc_test_support::Done {
    let mut cmd = blerpc();
    cmd.arg(args[0])
        .args(["--connect", url])
        .args(pin)
        .args(&args[1..]);
    run(cmd, stdin)
}

/// Runs every command shape against `url`.
fn every_shape(url: &str, key: &str, extra: &[&str]) {
    let mut pin = vec!["--trust-key", key];
    pin.extend_from_slice(extra);
    let d = call(url, &pin, &["call", "echo", r#"{"message":"hi"}"#], "");
    assert!(d.status.success(), "{url}: {}", d.stderr);
    assert_eq!(d.stdout, "{\"message\":\"hi\"}\n");
    let d = call(
        url,
        &pin,
        &["call", "flash_read", r#"{"address":1,"length":3}"#],
        "",
    );
    // Synthetic flash: byte i is (31 i + 7) mod 256 → 26 45 64 → "JkVk".
    assert_eq!(
        d.stdout, "{\"address\":1,\"data\":\"JkVk\"}\n",
        "{}",
        d.stderr
    );
    let d = call(url, &pin, &["call", "counter_stream", r#"{"count":3}"#], "");
    assert_eq!(
        d.stdout, "{\"seq\":0,\"value\":0}\n{\"seq\":1,\"value\":10}\n{\"seq\":2,\"value\":20}\n",
        "{}",
        d.stderr
    );
    let d = call(
        url,
        &pin,
        &["upload", "counter_upload"],
        "{\"seq\":0}\n\n{\"seq\":1,\"value\":10}\n",
    );
    assert_eq!(d.stdout, "{\"received_count\":2}\n", "{}", d.stderr);
}

#[test]
fn serve_and_call_over_tcp() {
    let (_server, url, key) = serve(&["--listen", "tcp://127.0.0.1:0"]);
    assert!(
        url.starts_with("tcp://127.0.0.1:") && !url.ends_with(":0"),
        "{url}"
    );
    assert_eq!(key.len(), 64);
    every_shape(&url, &key, &[]);
}

/// A stranger (no key exchange) gets classic containers only: a long container before the
/// session closes the connection at its header, though the extension was agreed.
#[test]
fn diagnostics_report_the_servers_counts_and_why_fields_are_missing() {
    let (_server, url, key) = serve(&["--listen", "tcp://127.0.0.1:0"]);
    let pin = ["--trust-key", key.as_str()];
    for _ in 0..2 {
        let d = call(&url, &pin, &["call", "echo", r#"{"message":"hi"}"#], "");
        assert!(d.status.success(), "{}", d.stderr);
    }
    let d = call(&url, &pin, &["diagnostics", "--json"], "");
    assert!(d.status.success(), "{}", d.stderr);
    let json: serde_json::Value = serde_json::from_str(&d.stdout).unwrap();
    // Two echoes and this request, each on a connection of its own.
    assert_eq!(json["calls"], 3, "{json}");
    assert_eq!(json["connections"], 3, "{json}");
    assert_eq!(json["errors"], serde_json::json!({}), "{json}");
    assert_eq!(json["att_mtu"], 247, "{json}");
    assert!(
        json["conn_interval_us"]["unavailable"]
            .as_str()
            .unwrap()
            .starts_with("not a BLE link"),
        "{json}"
    );
    let d = call(&url, &pin, &["diagnostics"], "");
    assert!(d.status.success(), "{}", d.stderr);
    assert!(d.stdout.contains("| calls "), "{}", d.stdout);
    assert!(d.stdout.contains("| version "), "{}", d.stdout);
}

#[test]
fn a_long_container_before_the_key_exchange_closes_the_connection() {
    use std::io::{Read as _, Write as _};
    let (_server, url, _key) = serve(&["--listen", "tcp://127.0.0.1:0"]);
    let addr = url.strip_prefix("tcp://").unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // Well inside the 10 s setup deadline, which would close it anyway.
    s.set_read_timeout(Some(std::time::Duration::from_secs(3)))
        .unwrap();
    // CAPABILITIES announcing large messages and long containers (flags 0x0006).
    s.write_all(&[0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0x06, 0x00])
        .unwrap();
    let mut reply = [0u8; 64];
    let n = s.read(&mut reply).unwrap();
    assert!(n >= 4 && reply[2] == 0xd0, "{:02x?}", &reply[..n]);
    // A long FIRST (flags LONG_FLAG): 1,000 bytes announced and carried.
    let mut pdu = vec![0x10, 0x00, 0x02, 0xe8, 0x03, 0xe8, 0x03];
    pdu.extend_from_slice(&[0x5a; 1000]);
    let _ = s.write_all(&pdu);
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
}

#[test]
fn serve_and_call_over_websocket() {
    let (_server, url, key) = serve(&["--listen", "ws://127.0.0.1:0/blerpc"]);
    assert!(
        url.starts_with("ws://127.0.0.1:") && url.ends_with("/blerpc"),
        "{url}"
    );
    every_shape(&url, &key, &[]);
}

#[test]
fn serve_and_call_over_tls_and_wss_with_a_verified_certificate() {
    let dir = tempfile::tempdir().unwrap();
    blerpc::link::local_ca::LocalPki::generate()
        .unwrap()
        .write_to(dir.path())
        .unwrap();
    let p = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    let tls = ["--tls-cert", &p("cert.pem"), "--tls-key", &p("key.pem")];
    let (_s1, url, key) = serve(&[&["--listen", "tls://127.0.0.1:0"], &tls[..]].concat());
    let url = url.replace("127.0.0.1", "localhost");
    every_shape(&url, &key, &["--tls-ca", &p("ca.pem")]);
    let (_s2, url, key) = serve(&[&["--listen", "wss://127.0.0.1:0/"], &tls[..]].concat());
    every_shape(&url, &key, &["--tls-cert-pin", &p("cert.pem")]);

    // Without trust: a clear error before connecting.
    let d = call(&url, &["--trust-key", &key], &["call", "echo"], "");
    assert!(!d.status.success());
    assert!(
        d.stderr.contains("needs TLS trust: pass --tls-ca FILE"),
        "{}",
        d.stderr
    );
}

#[test]
fn a_wrong_trust_key_is_refused_in_one_line() {
    let (_server, url, _key) = serve(&["--listen", "tcp://127.0.0.1:0"]);
    let wrong = "11".repeat(32);
    let d = call(&url, &["--trust-key", &wrong], &["call", "echo"], "");
    assert_eq!(d.status.code(), Some(2), "{}", d.stderr);
    assert!(d.stdout.is_empty());
    assert_eq!(d.stderr.lines().count(), 1, "{}", d.stderr);
    assert!(d.stderr.starts_with("blerpc: "), "{}", d.stderr);
    assert!(d.stderr.contains(&url), "{}", d.stderr);
    assert!(d.stderr.contains("check --trust-key"), "{}", d.stderr);

    let d = call(&url, &["--trust-key", "abc"], &["call", "echo"], "");
    assert!(
        d.stderr
            .contains("--trust-key must be an Ed25519 public key as 64 hex digits"),
        "{}",
        d.stderr
    );
}

#[test]
fn known_keys_pin_on_first_use_and_refuse_a_changed_key() {
    let dir = tempfile::tempdir().unwrap();
    let kk = dir.path().join("known_keys.json");
    let kk = kk.to_str().unwrap();
    let id = dir.path().join("id.key");
    let d = run(
        {
            let mut c = blerpc();
            c.args(["keygen", "--out", id.to_str().unwrap()]);
            c
        },
        "",
    );
    assert!(d.status.success(), "{}", d.stderr);
    let (mut server, url, key) = serve(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--identity",
        id.to_str().unwrap(),
    ]);
    assert_eq!(d.stdout.trim(), key);
    for first in [true, false] {
        let d = call(&url, &["--known-keys", kk], &["call", "echo"], "");
        assert!(d.status.success(), "{}", d.stderr);
        assert_eq!(d.stdout, "{\"message\":\"\"}\n");
        // Said once: when the key is pinned.
        let notice = format!("pinned its identity {key} in {kk} (trust on first use)");
        assert_eq!(d.stderr.contains(&notice), first, "{}", d.stderr);
    }
    let pinned = std::fs::read_to_string(kk).unwrap();
    assert!(pinned.contains(&key), "{pinned}");
    // A damaged file refuses the connection, with advice for the file, not for a changed key.
    std::fs::write(dir.path().join("damaged.json"), "{\"x\": 5").unwrap();
    let damaged = dir.path().join("damaged.json");
    let d = call(
        &url,
        &["--known-keys", damaged.to_str().unwrap()],
        &["call", "echo"],
        "",
    );
    assert_eq!(d.status.code(), Some(2), "{}", d.stderr);
    assert_eq!(d.stderr.lines().count(), 1, "{}", d.stderr);
    assert!(d.stderr.contains("is malformed"), "{}", d.stderr);
    assert!(
        d.stderr.contains("until the file is a JSON object"),
        "{}",
        d.stderr
    );
    assert!(!d.stderr.contains("key changed"), "{}", d.stderr);
    drop(server.child.kill());
    // The same address, another key: refused.
    let port = url.rsplit(':').next().unwrap();
    let (_other, url2, key2) = serve(&["--listen", &format!("tcp://127.0.0.1:{port}")]);
    assert_eq!(url2, url);
    assert_ne!(key2, key);
    let d = call(&url, &["--known-keys", kk], &["call", "echo"], "");
    assert!(!d.status.success());
    assert_eq!(d.stderr.lines().count(), 1, "{}", d.stderr);
    assert!(
        d.stderr.contains(&format!(
            "is pinned for it in {kk}: the device was re-keyed, or this is not the device"
        )) && d.stderr.contains(
            "remove the pin only if you know why the key changed, or pass --trust-key HEX"
        ),
        "{}",
        d.stderr
    );
}

#[test]
fn a_users_mistakes_get_one_line_each_that_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    let cli = |args: &[&str]| {
        let mut c = blerpc();
        c.args(args);
        run(c, "")
    };
    // keygen into a directory that does not exist: refused, nothing created.
    let d = cli(&["keygen", "--out", &path("no/such/id.key")]);
    assert_eq!(d.status.code(), Some(2), "{}", d.stderr);
    assert!(
        d.stderr.contains("does not exist: create it first"),
        "{}",
        d.stderr
    );
    assert!(!dir.path().join("no").exists());
    // A binary identity file.
    std::fs::write(path("bin.key"), [0xffu8, 0xfe, 0, 1, 2]).unwrap();
    let d = cli(&[
        "serve",
        "--listen",
        "tcp://127.0.0.1:0",
        "--identity",
        &path("bin.key"),
    ]);
    assert_eq!(d.status.code(), Some(2), "{}", d.stderr);
    assert!(
        d.stderr.contains("is not a seed: it must hold"),
        "{}",
        d.stderr
    );
    assert!(!d.stderr.contains("UTF-8"), "{}", d.stderr);
    // A serial port that does not exist: no `listening` line, the cause once.
    if cfg!(feature = "serial") {
        let d = cli(&["serve", "--listen", "serial:///dev/blerpc-no-such-port"]);
        assert_eq!(d.status.code(), Some(2), "{}", d.stderr);
        assert!(d.stdout.is_empty(), "{}", d.stdout);
        assert!(d.stderr.contains("cannot open serial port"), "{}", d.stderr);
        assert_eq!(
            d.stderr.matches("No such file or directory").count(),
            1,
            "{}",
            d.stderr
        );
    }
    // Nothing listening: the cause once.
    let d = call("tcp://127.0.0.1:9", &["--no-pin"], &["call", "echo"], "");
    assert_eq!(
        d.stderr.matches("Connection refused").count(),
        1,
        "{}",
        d.stderr
    );
    // A value out of range names its field.
    let d = call(
        "tcp://127.0.0.1:9",
        &["--no-pin"],
        &["call", "flash_read", r#"{"address":-1}"#],
        "",
    );
    assert!(d.stderr.contains("(field `address`)"), "{}", d.stderr);
    // A handler's failure: the central is told where to look, the server logs why.
    let (server, url, key) = serve(&["--listen", "tcp://127.0.0.1:0"]);
    let d = call(
        &url,
        &["--trust-key", &key],
        &["call", "flash_read", r#"{"address":4000000000,"length":4}"#],
        "",
    );
    assert_eq!(d.status.code(), Some(2), "{}", d.stderr);
    assert!(
        d.stderr.contains("the server's log says why"),
        "{}",
        d.stderr
    );
    let log = server.stop();
    assert!(
        log.contains(
            "flash_read failed: handler failed: 0xee6b2800+4 is outside the readable flash"
        ),
        "{log}"
    );
}

#[test]
fn plaintext_needs_consent_on_both_sides() {
    let (_server, url, key) = serve(&["--listen", "tcp://127.0.0.1:0", "--plaintext"]);
    assert_eq!(key, "none");
    let d = call(
        &url,
        &["--no-pin", "--plaintext"],
        &["call", "echo", r#"{"message":"x"}"#],
        "",
    );
    assert_eq!(d.stdout, "{\"message\":\"x\"}\n", "{}", d.stderr);
    let d = call(&url, &["--no-pin"], &["call", "echo"], "");
    assert!(!d.status.success());
    assert_eq!(d.stderr.lines().count(), 1, "{}", d.stderr);
}

#[test]
fn bad_json_and_unknown_commands_are_clear_errors_before_connecting() {
    // Nothing listens on port 9: the errors come before any connection attempt.
    let url = "tcp://127.0.0.1:9";
    let d = call(
        url,
        &["--no-pin"],
        &["call", "flash_read", "{\"adress\":1}"],
        "",
    );
    assert_eq!(d.status.code(), Some(2));
    assert!(
        d.stderr.starts_with(
            "blerpc: bad JSON for blerpc.FlashReadRequest: unrecognized field name 'adress'"
        ),
        "{}",
        d.stderr
    );
    let d = call(url, &["--no-pin"], &["call", "reboot"], "");
    assert_eq!(
        d.stderr,
        "blerpc: unknown command `reboot`: blerpc.Blerpc has echo, flash_read, data_write, counter_stream, counter_upload\n"
    );
    let d = call(url, &["--no-pin"], &["call", "counter_upload"], "");
    assert!(d.stderr.contains("with `blerpc upload`"), "{}", d.stderr);
    let d = call(url, &["--no-pin"], &["upload", "echo"], "");
    assert!(d.stderr.contains("use `blerpc call`"), "{}", d.stderr);
    let d = call(url, &["--no-pin"], &["call", "echo"], "");
    assert!(
        d.stderr
            .starts_with("blerpc: cannot connect to tcp://127.0.0.1:9"),
        "{}",
        d.stderr
    );
    assert_eq!(d.stderr.lines().count(), 1);
    let d = call("http://x", &["--no-pin"], &["call", "echo"], "");
    assert!(
        d.stderr.contains("unknown link scheme `http`"),
        "{}",
        d.stderr
    );
}

#[test]
fn a_bad_upload_line_names_its_line() {
    let (_server, url, key) = serve(&["--listen", "tcp://127.0.0.1:0"]);
    let d = call(
        &url,
        &["--trust-key", &key],
        &["upload", "counter_upload"],
        "{\"seq\":1}\n{\"seq\":\n",
    );
    assert!(!d.status.success());
    assert!(
        d.stderr
            .contains("stdin line 2: bad JSON for blerpc.CounterUploadRequest"),
        "{}",
        d.stderr
    );
}

#[test]
fn keygen_writes_a_private_seed_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("id.key");
    let keygen = |force: bool| {
        let mut c = blerpc();
        c.args(["keygen", "--out", path.to_str().unwrap()]);
        if force {
            c.arg("--force");
        }
        run(c, "")
    };
    let d = keygen(false);
    assert!(d.status.success(), "{}", d.stderr);
    let public = d.stdout.trim().to_string();
    assert_eq!(public.len(), 64);
    let seed = std::fs::read_to_string(&path).unwrap();
    assert_eq!(seed.trim().len(), 64);
    let seed = blerpc::known_keys::parse_key(&seed).unwrap();
    assert_eq!(
        blerpc::known_keys::to_hex(&blerpc::identity::public_key(&seed).unwrap()),
        public
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let d = keygen(false);
    assert_eq!(d.status.code(), Some(2));
    assert!(
        d.stderr.contains("already exists; pass --force"),
        "{}",
        d.stderr
    );
    assert!(keygen(true).status.success());
    assert_ne!(
        std::fs::read_to_string(&path).unwrap().trim(),
        blerpc::known_keys::to_hex(&seed)
    );
}

#[test]
fn serve_refuses_an_identity_inside_the_readable_flash() {
    let dir = tempfile::tempdir().unwrap();
    let seed = [0x42u8; 32];
    let mut image = vec![0u8; 8192];
    image[4096..4128].copy_from_slice(&seed);
    std::fs::write(dir.path().join("flash.bin"), &image).unwrap();
    std::fs::write(dir.path().join("id.key"), blerpc::known_keys::to_hex(&seed)).unwrap();
    #[cfg(unix)]
    {
        // Private, as `blerpc keygen` writes it (a readable one adds a warning line).
        use std::os::unix::fs::PermissionsExt as _;
        let private = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(dir.path().join("id.key"), private).unwrap();
    }
    let args = |readable: &str| {
        let mut c = blerpc();
        c.args([
            "serve",
            "--listen",
            "tcp://127.0.0.1:0",
            "--readable",
            readable,
        ])
        .arg("--identity")
        .arg(dir.path().join("id.key"))
        .arg("--flash-image")
        .arg(dir.path().join("flash.bin"));
        c
    };
    let d = run(args("0..8192"), "");
    assert_eq!(d.status.code(), Some(2));
    assert!(d.stderr.contains("refusing to start"), "{}", d.stderr);
    assert!(d.stderr.contains("0x1000"), "{}", d.stderr);
    assert_eq!(d.stderr.lines().count(), 1, "{}", d.stderr);
}

#[test]
fn ble_without_the_feature_is_a_clear_error() {
    if cfg!(feature = "ble-peripheral") {
        return;
    }
    let d = run(
        {
            let mut c = blerpc();
            c.args(["serve", "--listen", "ble://"]);
            c
        },
        "",
    );
    assert_eq!(d.status.code(), Some(2));
    assert!(
        d.stderr.contains("built without ble-peripheral"),
        "{}",
        d.stderr
    );
}

#[test]
fn demo_passes_on_every_link() {
    let d = run(
        {
            let mut c = blerpc();
            c.arg("demo");
            c
        },
        "",
    );
    assert!(d.status.success(), "{}\n{}", d.stdout, d.stderr);
    let total = d.stdout.lines().find(|l| l.starts_with("total")).unwrap();
    let links = blerpc_demo::links::available_links();
    assert_eq!(
        total.matches("PASS 12/12").count(),
        links.len(),
        "{}",
        d.stdout
    );
    assert!(d.stdout.contains("all links PASS"));
}
