//! The bleRPC peripheral firmware for the nRF54L15 DK (application core, secure): clocks, the
//! SoftDevice Controller on MPSL, the CRACEN RNG, its RRAM layout; everything else is
//! `blerpc-fw-app`.
//!
//! | RRAM | what |
//! |---|---|
//! | `0x0000_0000..0x0017_C000` | the application image; what `flash_read` may read ([`READABLE`]) |
//! | `0x0017_C000..0x0017_D000` | the identity seed ([`IDENTITY`]): 32 raw bytes at its start, never in the image |
#![no_std]
#![no_main]

use core::ops::Range;

use blerpc_demo::DemoLimits;
use blerpc_demo::flash::MappedFlash;
use blerpc_fw_app::{Board, run};
use embassy_executor::Spawner;
use embassy_nrf::mode::Blocking;
use embassy_nrf::{bind_interrupts, config, cracen, pac};
use nrf_sdc::mpsl::MultiprotocolServiceLayer;
use nrf_sdc::{self as sdc, mpsl};
use static_cell::StaticCell;
use trouble_host::prelude::{Address, DefaultPacketPool, PacketPool};

/// The chip's RRAM: 1524 KiB at address 0.
const FLASH_SIZE: u32 = 1524 * 1024;
/// Where the identity seed lives (the last 4 KiB; `memory.x` keeps the image out of it).
const IDENTITY: Range<u32> = 0x0017_C000..0x0017_D000;
/// What `flash_read` may read: the application image, up to the identity area. Change it here
/// (as the reference's `CONFIG_BLERPC_MAX_FLASH_READ_ADDRESS`); a range that overlaps
/// [`IDENTITY`] is refused at start-up.
const READABLE: Range<u32> = 0..IDENTITY.start;

bind_interrupts!(struct Irqs {
    SWI00 => mpsl::LowPrioInterruptHandler;
    CLOCK_POWER => mpsl::ClockInterruptHandler;
    RADIO_0 => mpsl::HighPrioInterruptHandler;
    TIMER10 => mpsl::HighPrioInterruptHandler;
    GRTC_3 => mpsl::HighPrioInterruptHandler;
});

#[embassy_executor::task]
async fn mpsl_task(mpsl: &'static MultiprotocolServiceLayer<'static>) -> ! {
    mpsl.run().await
}

/// The controller's memory for one peripheral link with 251-byte buffers, 3 each way (the
/// figure trouble's nRF54 example uses for the same configuration).
const SDC_MEM: usize = 4720;
const L2CAP_TXQ: u8 = 3;
const L2CAP_RXQ: u8 = 3;

/// The static random address the chip was programmed with (FICR DEVICEADDR).
fn address() -> Address {
    let lo = pac::FICR.deviceaddr(0).read();
    let hi = pac::FICR.deviceaddr(1).read();
    let mut a = [0u8; 6];
    a[..4].copy_from_slice(&lo.to_le_bytes());
    a[4..].copy_from_slice(&(hi as u16 | 0xC000).to_le_bytes());
    Address::random(a)
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    let mut config: config::Config = Default::default();
    config.clock_speed = config::ClockSpeed::CK128;
    config.hfclk_source = config::HfclkSource::ExternalXtal;
    config.lfclk_source = config::LfclkSource::ExternalXtal;
    let p = embassy_nrf::init(config);
    let mpsl_p = mpsl::Peripherals::new(
        p.GRTC_CH7,
        p.GRTC_CH8,
        p.GRTC_CH9,
        p.GRTC_CH10,
        p.GRTC_CH11,
        p.TIMER10,
        p.TIMER20,
        p.TEMP,
        p.PPI10_CH0,
        p.PPI20_CH1,
        p.PPIB11_CH0,
        p.PPIB21_CH0,
    );
    let lfclk_cfg = mpsl::raw::mpsl_clock_lfclk_cfg_t {
        source: mpsl::raw::MPSL_CLOCK_LF_SRC_XTAL as u8,
        rc_ctiv: 0,
        rc_temp_ctiv: 0,
        accuracy_ppm: 50,
        skip_wait_lfclk_started: false,
    };
    static MPSL: StaticCell<MultiprotocolServiceLayer> = StaticCell::new();
    let Ok(m) = MultiprotocolServiceLayer::new(mpsl_p, Irqs, lfclk_cfg) else {
        panic!("MPSL");
    };
    let mpsl = MPSL.init(m);
    let Ok(task) = mpsl_task(mpsl) else {
        panic!("MPSL task");
    };
    spawner.spawn(task);

    let sdc_p = sdc::Peripherals::new(
        p.PPI00_CH1,
        p.PPI00_CH3,
        p.PPI10_CH1,
        p.PPI10_CH2,
        p.PPI10_CH3,
        p.PPI10_CH4,
        p.PPI10_CH5,
        p.PPI10_CH6,
        p.PPI10_CH7,
        p.PPI10_CH8,
        p.PPI10_CH9,
        p.PPI10_CH10,
        p.PPI10_CH11,
        p.PPIB00_CH1,
        p.PPIB00_CH2,
        p.PPIB00_CH3,
        p.PPIB10_CH1,
        p.PPIB10_CH2,
        p.PPIB10_CH3,
    );
    static RNG: StaticCell<cracen::Cracen<'static, Blocking>> = StaticCell::new();
    let rng = RNG.init(cracen::Cracen::new_blocking(p.CRACEN));
    // The seed of the application's generator, drawn before the controller takes the RNG.
    let mut seed = [0u8; 32];
    rng.blocking_fill_bytes(&mut seed);
    static SDC_MEMORY: StaticCell<sdc::Mem<SDC_MEM>> = StaticCell::new();
    let mem = SDC_MEMORY.init(sdc::Mem::new());
    let built = sdc::Builder::new()
        .and_then(|b| b.support_adv().support_peripheral().peripheral_count(1))
        .and_then(|b| {
            b.buffer_cfg(
                DefaultPacketPool::MTU as u16,
                DefaultPacketPool::MTU as u16,
                L2CAP_TXQ,
                L2CAP_RXQ,
            )
        })
        .and_then(|b| b.build(sdc_p, rng, mpsl, mem));
    let Ok(controller) = built else {
        panic!("SoftDevice Controller");
    };

    let board = Board {
        name: "blerpc",
        address: address(),
        // SAFETY: the nRF54L15's RRAM is mapped at 0..1524 KiB and always readable.
        flash: unsafe { MappedFlash::new(FLASH_SIZE) },
        readable: READABLE,
        identity: IDENTITY,
        limits: DemoLimits::REFERENCE,
    };
    let _error = run(controller, board, seed).await;
    // The BLE host stopped: start again from reset.
    cortex_m::peripheral::SCB::sys_reset();
}

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    cortex_m::peripheral::SCB::sys_reset()
}
