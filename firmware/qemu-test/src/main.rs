//! The test image: on `thumbv8m.main-none-eabihf` a bare-metal program for QEMU's `mps2-an505`
//! (Cortex-M33) that prints over semihosting and exits with QEMU's status (0 when every check
//! passed); on the host the same checks as a plain program.
//!
//! ```sh
//! cargo build --release -p blerpc-fw-qemu-test --target thumbv8m.main-none-eabihf
//! qemu-system-arm -M mps2-an505 -nographic -semihosting-config enable=on,target=native \
//!     -kernel target/thumbv8m.main-none-eabihf/release/blerpc-fw-qemu-test
//! ```
#![cfg_attr(target_os = "none", no_std, no_main)]

use core::fmt::Write;

use blerpc_fw_qemu_test::vectors::Scratch;
use blerpc_fw_qemu_test::{Note, memory, run};

/// Formats into a fixed buffer (no allocator on the device).
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    fn new() -> Self {
        Line {
            buf: [0; 256],
            len: 0,
        }
    }
    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("?")
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Runs everything, printing through `print`; returns `true` if every check passed.
fn main_body(scratch: &mut Scratch, print: &mut dyn FnMut(&str)) -> bool {
    print("blerpc-proto on this CPU: reference vectors and an encrypted session in memory");
    let tally = run(scratch, &mut |note| {
        let mut l = Line::new();
        let _ = match note {
            Note::Fail(case, what) => write!(l, "FAIL {case}: {what}"),
            Note::Skip(case, why) => write!(l, "  skipped {case}: {why}"),
        };
        print(l.as_str());
    });
    print("| family | passed | failed | skipped |");
    print("|---|---:|---:|---:|");
    for row in tally.rows() {
        let mut l = Line::new();
        let _ = write!(
            l,
            "| {} | {} | {} | {} |",
            row.family, row.passed, row.failed, row.skipped
        );
        print(l.as_str());
    }
    print("RAM of one connection on this CPU (size_of):");
    for (what, bytes) in memory::sizes() {
        let mut l = Line::new();
        let _ = write!(l, "  {what}: {bytes} bytes");
        print(l.as_str());
    }
    if let Some(m) = blerpc_fw_qemu_test::session::ram_mark() {
        let mut l = Line::new();
        let _ = write!(
            l,
            "RAM high-water mark (statics and the painted stack's deepest point): {} bytes \
             of {} ({} static)",
            (m.read)(),
            m.total,
            m.statics
        );
        print(l.as_str());
    }
    let total = tally.totals();
    let mut l = Line::new();
    let _ = write!(
        l,
        "{} passed, {} failed, {} skipped (too large for this image's buffers)",
        total.passed, total.failed, total.skipped
    );
    print(l.as_str());
    total.failed == 0 && total.passed > 0
}

#[cfg(target_os = "none")]
mod device {
    use core::alloc::{GlobalAlloc, Layout};
    use core::mem::MaybeUninit;

    use cortex_m_rt::entry;
    use cortex_m_semihosting::{debug, hprintln};

    use super::{Scratch, main_body};

    /// The core runs without an allocator: this one refuses every request, so any allocation
    /// would fail the run (the `fuzzing` feature the vectors need links `alloc`, nothing more).
    struct NoAllocator;

    unsafe impl GlobalAlloc for NoAllocator {
        unsafe fn alloc(&self, _layout: Layout) -> *mut u8 {
            core::ptr::null_mut()
        }
        unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
    }

    #[global_allocator]
    static ALLOCATOR: NoAllocator = NoAllocator;

    /// The large buffers (about 900 KB) live in `.bss`: not on the stack, and not in `.data`
    /// (an initialised static would carry its 900 KB image in flash).
    static mut SCRATCH: MaybeUninit<Scratch> = MaybeUninit::uninit();

    #[entry]
    fn main() -> ! {
        // SAFETY: the only reference to SCRATCH, taken once at reset.
        let scratch = unsafe { (*core::ptr::addr_of_mut!(SCRATCH)).write(Scratch::new()) };
        let ok = main_body(scratch, &mut |line| hprintln!("{}", line));
        debug::exit(if ok {
            debug::EXIT_SUCCESS
        } else {
            debug::EXIT_FAILURE
        });
        loop {
            cortex_m::asm::bkpt();
        }
    }

    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo) -> ! {
        hprintln!("PANIC {}", info);
        debug::exit(debug::EXIT_FAILURE);
        loop {
            cortex_m::asm::bkpt();
        }
    }
}

#[cfg(not(target_os = "none"))]
fn main() -> std::process::ExitCode {
    // The scratch (about 900 KB) on the heap: the main thread's stack is the platform's.
    let mut scratch = std::boxed::Box::new(Scratch::new());
    let ok = main_body(&mut scratch, &mut |line| std::println!("{line}"));
    if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
