//! Every call shape at ATT MTUs from 23 to 512 (encryption where the MTU allows the key
//! exchange, i.e. ≥ 136).

use std::time::Duration;

use blerpc_proto::connection::CallKind;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

#[test]
fn calls_work_at_every_mtu() {
    for mtu in [
        23, 24, 27, 50, 100, 135, 136, 185, 200, 247, 251, 262, 263, 300, 512,
    ] {
        let b = PairBuilder::encrypted(mtu >= 136);
        let mut p = b.mtu(mtu).build();
        p.connect();
        assert_eq!(p.central.is_encrypted(), mtu >= 136, "mtu {mtu}");
        let msg = "M".repeat(256);
        assert_eq!(
            p.call("echo", &echo_req(&msg)).unwrap(),
            echo_req(&msg),
            "mtu {mtu}"
        );
        // The largest read one response transaction carries at this MTU (8 KB at most).
        let len = (blerpc_proto::split::max_message_len(mtu) - 64).min(8192);
        let req = flash_read_req(16, len as u32);
        let resp = p.call("flash_read", &req).unwrap();
        assert_eq!(
            flash_read_reply_of(&resp).unwrap().1.len(),
            len,
            "mtu {mtu}"
        );
        let id = p
            .start_call(
                "counter_stream",
                &counter_stream_req(7),
                CallKind::ServerStream,
            )
            .unwrap();
        p.drive_until(Duration::from_secs(10), |p| p.stream_outcome(id).is_some());
        assert_eq!(p.stream_outcome(id).unwrap().unwrap().len(), 7, "mtu {mtu}");
        let max = p
            .sent_c2p
            .iter()
            .chain(&p.sent_p2c)
            .map(Vec::len)
            .max()
            .unwrap();
        assert!(max <= mtu - 3, "mtu {mtu}: a PDU of {max} bytes");
    }
}

#[test]
fn a_request_larger_than_one_transaction_is_refused_locally() {
    // At MTU 23, 256 containers carry 14 + 255 * 16 = 4,094 bytes.
    let mut p = PairBuilder::plaintext().mtu(23).build();
    p.connect();
    let big = vec![0u8; 5000];
    let err = p
        .start_call("data_write", &data_write_req(&big), CallKind::Unary)
        .unwrap_err();
    assert!(
        matches!(
            err,
            blerpc_proto::connection::CallError::RequestTooLarge { max: 4094, .. }
        ),
        "{err:?}"
    );
}

#[test]
fn connections_need_an_mtu_that_fits_the_capabilities_reply() {
    use blerpc_proto::connection::{ConfigError, MIN_CONNECTION_ATT_MTU};
    assert_eq!(MIN_CONNECTION_ATT_MTU, 13);
    let mut b = PairBuilder::plaintext();
    b.central.att_mtu = 12;
    let err = TestCentral::new(
        b.central,
        blerpc_proto::crypto::RustCrypto,
        rand_chacha::rand_core::SeedableRng::seed_from_u64(1),
        blerpc_proto::Instant::ZERO,
    )
    .unwrap_err();
    assert_eq!(err, ConfigError::MtuTooSmall { att_mtu: 12 });
    let mut p = PairBuilder::plaintext().mtu(13).build();
    p.connect();
    assert_eq!(p.call("echo", &echo_req("tiny")).unwrap(), echo_req("tiny"));
}

#[test]
fn a_peripheral_below_mtu_136_refuses_the_key_exchange_loudly() {
    // A central that attempts the key exchange anyway gets ERROR KEY_EXCHANGE_FAILED, not a
    // step 2 that cannot fit the link.
    let mut b = PairBuilder::default();
    b.peripheral.att_mtu = 100;
    let mut p = b.build();
    p.drive_until(Duration::from_secs(5), |p| p.central.is_closed());
    assert!(p.central_events.contains(&CEv::Closed(
        blerpc_proto::connection::CloseReason::HandshakeRefused(
            blerpc_proto::wire::error_code::ErrorCode::KeyExchangeFailed
        )
    )));
}
