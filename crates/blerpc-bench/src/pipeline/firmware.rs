//! The firmware's connection (`firmware/service`: the core's peripheral on the reference
//! firmware's fixed buffers, one reassembly slot, the demo service answering inline) on the
//! peripheral end of a simulated BLE link: what `firmware/app` does with trouble-host's GATT
//! server, with the simulated link in its place.
//!
//! The firmware answers a request inside the write that completes it; each request costs
//! `service` of virtual time there (the MCU's decrypt, handler, encrypt), during which the loop
//! does nothing else, as one core running one work item at a time would.

use std::time::Duration;

use blerpc::link::{Link, LinkRx as _, LinkTx as _};
use blerpc_demo::DemoService;
use blerpc_fw_service::connection::{Connection, firmware_config};
use blerpc_fw_service::identity::DEVELOPMENT_SEED;
use blerpc_proto::Instant;
use blerpc_proto::crypto::{CryptoProvider as _, IdentitySeed, RustCrypto};
use blerpc_sim::SimLink;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng as _;

/// The firmware's identity key (its development seed), for the central to pin.
pub fn identity_public() -> anyhow::Result<[u8; 32]> {
    let identity = RustCrypto
        .load_identity(&IdentitySeed::from_bytes(DEVELOPMENT_SEED))
        .map_err(|e| anyhow::anyhow!("the firmware's identity: {e:?}"))?;
    Ok(RustCrypto.identity_public(&identity))
}

/// Serves the demo service as the firmware does on `link` until the central goes away.
pub async fn serve(link: SimLink, service: Duration) -> anyhow::Result<()> {
    let epoch = tokio::time::Instant::now();
    let now =
        || Instant::from_micros(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX));
    let identity = RustCrypto
        .load_identity(&IdentitySeed::from_bytes(DEVELOPMENT_SEED))
        .map_err(|e| anyhow::anyhow!("the firmware's identity: {e:?}"))?;
    let att_mtu = link.att_mtu();
    let mut conn = Connection::new(
        now(),
        firmware_config(true),
        RustCrypto,
        Some(identity),
        ChaCha20Rng::seed_from_u64(7),
        DemoService::default(),
    )
    .map_err(|e| anyhow::anyhow!("the firmware's connection: {e:?}"))?;
    conn.set_att_mtu(att_mtu)
        .map_err(|e| anyhow::anyhow!("ATT MTU {att_mtu}: {e:?}"))?;
    let (mut tx, mut rx) = link.split();
    let mut out = vec![0u8; att_mtu.saturating_sub(3)];
    loop {
        while !tx.is_full() {
            let Some(n) = conn.poll_transmit(now(), &mut out) else {
                break;
            };
            tx.queue(out.get(..n).unwrap_or(&[]))?;
        }
        tx.flush().await?;
        let deadline = conn
            .poll_timeout()
            .map(|t| epoch + Duration::from_micros(t.as_micros()));
        let timer = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            pdu = rx.recv() => {
                let Some(pdu) = pdu? else { return Ok(()) };
                let answered = conn.stats().responses;
                conn.handle_pdu(now(), pdu);
                if conn.stats().responses != answered {
                    tokio::time::sleep(service).await;
                }
            }
            () = timer => conn.handle_timeout(now()),
        }
    }
}
