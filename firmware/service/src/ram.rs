//! The most RAM the firmware has used since boot, on Cortex-M: its statics (everything from the
//! start of RAM to the end of `.uninit`: `.data`, `.bss`, the BLE stack's and the executor's
//! task arenas, the connection's buffers) plus the deepest the stack has gone.
//!
//! cortex-m-rt's `paint-stack` feature (the boards and the QEMU image enable it) fills the
//! stack, from `_stack_end` (just past the statics) to `_stack_start` (the top of RAM), with
//! [`PAINT`] before `main`; the stack grows down from the top, so the lowest word no longer
//! holding the paint is its high-water mark. Interrupt handlers run on the same stack and are
//! counted. A word the program happened to write with the paint's own value reads as unused
//! (an underestimate of at most that word's depth); a build without the paint reads as the whole
//! stack used (an overestimate, never an underestimate). Reading scans the unused part of the
//! stack once, upward from its bottom: about 48 K words on the nRF54L15 (well under a
//! millisecond), done once per `blerpc.diagnostics` answer.

/// cortex-m-rt's `STACK_PAINT_VALUE`.
pub const PAINT: u32 = 0xCCCC_CCCC;

unsafe extern "C" {
    /// The first byte of RAM (cortex-m-rt's linker script).
    static _ram_start: u32;
    /// The stack's lowest address: the end of the statics.
    static _stack_end: u32;
    /// The stack's top (its first push lands just below).
    static _stack_start: u32;
}

/// The most RAM used since boot, bytes: the statics and the stack's deepest point.
pub fn high_water() -> u32 {
    let ram = core::ptr::addr_of!(_ram_start) as usize;
    let bottom = core::ptr::addr_of!(_stack_end) as usize;
    let top = core::ptr::addr_of!(_stack_start) as usize;
    let mut unused = bottom;
    while unused < top {
        // SAFETY: `unused` is a word-aligned address in the stack region the linker script
        // reserves (`_stack_end` is 4-aligned, `_stack_start` 8-aligned), always mapped RAM;
        // a volatile read of it has no effect, whatever the stack holds there.
        let word = unsafe { core::ptr::read_volatile(unused as *const u32) };
        if word != PAINT {
            break;
        }
        unused += 4;
    }
    u32::try_from(top.saturating_sub(ram) - (unused - bottom)).unwrap_or(u32::MAX)
}

/// The statics alone, bytes: the floor of [`high_water`].
pub fn statics() -> u32 {
    let ram = core::ptr::addr_of!(_ram_start) as usize;
    let bottom = core::ptr::addr_of!(_stack_end) as usize;
    u32::try_from(bottom.saturating_sub(ram)).unwrap_or(u32::MAX)
}

/// All the RAM the linker script gives the program, bytes: the ceiling of [`high_water`].
pub fn total() -> u32 {
    let ram = core::ptr::addr_of!(_ram_start) as usize;
    let top = core::ptr::addr_of!(_stack_start) as usize;
    u32::try_from(top.saturating_sub(ram)).unwrap_or(u32::MAX)
}
