//! The firmware's application on Linux: `blerpc_fw_app::run`, exactly as a board runs it, over
//! an HCI transport instead of the SoftDevice Controller, with a flash image in memory.
//!
//! The image is laid out like a board's: 1 MiB that `flash_read` may read (byte `i` is
//! `(i * 31 + 7) mod 256`, the host demo's synthetic image), then a 4 KiB identity area that
//! holds the seed (or is erased, for the development seed).

use blerpc_demo::DemoLimits;
use blerpc_demo::flash::SliceFlash;
use blerpc_fw_app::Board;
use blerpc_fw_service::identity::identity_seed;
use blerpc_proto::crypto::{CryptoProvider, RustCrypto};
use rand_core::{OsRng, RngCore};
use trouble_host::prelude::Address;

use crate::hci;

/// The readable part of the image.
pub const READABLE_LEN: u32 = 1 << 20;
/// The identity area after it.
pub const IDENTITY_LEN: u32 = 4096;

/// Runs the peripheral on the controller at `hci_addr` until the BLE host fails. Prints
/// `IDENTITY <public key hex>` and `ADDRESS <address>` first.
pub fn run(hci_addr: &str, seed: Option<[u8; 32]>, address: [u8; 6]) -> anyhow::Result<()> {
    let mut image: Vec<u8> = (0..READABLE_LEN as usize)
        .map(|i| (i.wrapping_mul(31).wrapping_add(7)) as u8)
        .collect();
    let mut identity = vec![0xFF; IDENTITY_LEN as usize];
    if let Some(s) = seed {
        identity[..32].copy_from_slice(&s);
    }
    image.extend_from_slice(&identity);
    let stored: [u8; 32] = identity[..32].try_into()?;
    let public = RustCrypto
        .load_identity(&identity_seed(&stored).0)
        .map(|id| RustCrypto.identity_public(&id))
        .map_err(|e| anyhow::anyhow!("identity: {e}"))?;
    println!("IDENTITY {}", hex::encode(public));
    let address = Address::random(address);
    println!("ADDRESS {:?}", address.addr);

    let flash = SliceFlash(Box::leak(image.into_boxed_slice()));
    let board = Board {
        name: "blerpc",
        address,
        flash,
        readable: 0..READABLE_LEN,
        identity: READABLE_LEN..READABLE_LEN + IDENTITY_LEN,
        limits: DemoLimits::REFERENCE,
    };
    let mut rng_seed = [0u8; 32];
    OsRng.fill_bytes(&mut rng_seed);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let controller = hci::connect(hci_addr).await?;
        let error = blerpc_fw_app::run(controller, board, rng_seed).await;
        anyhow::bail!("the BLE host stopped: {error:?}")
    })
}
