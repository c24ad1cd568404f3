//! The bleRPC peripheral firmware for the nRF52840 DK: clocks, the SoftDevice Controller on MPSL,
//! the chip's RNG, its flash layout; everything else is `blerpc-fw-app`.
//!
//! | flash | what |
//! |---|---|
//! | `0x0000_0000..0x000F_F000` | the application image; what `flash_read` may read ([`READABLE`]) |
//! | `0x000F_F000..0x0010_0000` | the identity seed ([`IDENTITY`]): 32 raw bytes at its start, never in the image |
#![no_std]
#![no_main]

use core::ops::Range;

use blerpc_demo::DemoLimits;
use blerpc_demo::flash::MappedFlash;
use blerpc_fw_app::{Board, run};
use embassy_executor::Spawner;
use embassy_nrf::mode::Blocking;
use embassy_nrf::{bind_interrupts, pac, rng};
use nrf_sdc::mpsl::MultiprotocolServiceLayer;
use nrf_sdc::{self as sdc, mpsl};
use static_cell::StaticCell;
use trouble_host::prelude::{Address, DefaultPacketPool, PacketPool};

/// The chip's flash: 1 MiB at address 0.
const FLASH_SIZE: u32 = 1024 * 1024;
/// Where the identity seed lives (the last flash page; `memory.x` keeps the image out of it).
const IDENTITY: Range<u32> = 0x000F_F000..0x0010_0000;
/// What `flash_read` may read: the application image, up to the identity page. Change it here
/// (as the reference's `CONFIG_BLERPC_MAX_FLASH_READ_ADDRESS`); a range that overlaps
/// [`IDENTITY`] is refused at start-up.
const READABLE: Range<u32> = 0..IDENTITY.start;

bind_interrupts!(struct Irqs {
    EGU0_SWI0 => mpsl::LowPrioInterruptHandler;
    CLOCK_POWER => mpsl::ClockInterruptHandler;
    RADIO => mpsl::HighPrioInterruptHandler;
    TIMER0 => mpsl::HighPrioInterruptHandler;
    RTC0 => mpsl::HighPrioInterruptHandler;
});

#[embassy_executor::task]
async fn mpsl_task(mpsl: &'static MultiprotocolServiceLayer<'static>) -> ! {
    mpsl.run().await
}

/// The controller's memory for one peripheral link with 251-byte buffers, 3 each way (the
/// figure trouble's nRF52 examples use for the same configuration).
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
    let p = embassy_nrf::init(Default::default());
    let mpsl_p =
        mpsl::Peripherals::new(p.RTC0, p.TIMER0, p.TEMP, p.PPI_CH19, p.PPI_CH30, p.PPI_CH31);
    let lfclk_cfg = mpsl::raw::mpsl_clock_lfclk_cfg_t {
        source: mpsl::raw::MPSL_CLOCK_LF_SRC_XTAL as u8,
        rc_ctiv: 0,
        rc_temp_ctiv: 0,
        accuracy_ppm: mpsl::raw::MPSL_DEFAULT_CLOCK_ACCURACY_PPM as u16,
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
        p.PPI_CH17, p.PPI_CH18, p.PPI_CH20, p.PPI_CH21, p.PPI_CH22, p.PPI_CH23, p.PPI_CH24,
        p.PPI_CH25, p.PPI_CH26, p.PPI_CH27, p.PPI_CH28, p.PPI_CH29,
    );
    static RNG: StaticCell<rng::Rng<'static, Blocking>> = StaticCell::new();
    let rng = RNG.init(rng::Rng::new_blocking(p.RNG));
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
        // SAFETY: the nRF52840's flash is mapped at 0..1 MiB and always readable.
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
