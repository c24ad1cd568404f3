//! What a connection counts for the diagnostics extension: requests, ERROR answers by code,
//! messages dropped while reassembling, and the high-water marks of its buffers.
//!
//! The core counts; a runtime takes the counts ([`Peripheral::take_counters`]) and adds them
//! up across connections and reboots as it sees fit ([`Counters::add`]): the runtime server
//! into its metrics, the firmware into one static since boot.
//!
//! [`Peripheral::take_counters`]: super::Peripheral::take_counters

use crate::wire::diagnostics::ErrorCount;

/// ERROR codes counted one by one: `0x00 ..= 0x0F` (every code the protocol defines); higher
/// codes an application passes are counted together as [`OTHER_ERROR_CODE`].
pub const COUNTED_ERROR_CODES: usize = 16;

/// The code under which ERROR answers with a code of 16 or more are reported together.
pub const OTHER_ERROR_CODE: u8 = 0xff;

/// Counts since the last [`Peripheral::take_counters`](super::Peripheral::take_counters) (or
/// since the connection opened), and the high-water marks over the same time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests handed to the application (calls; a stream's items are not calls).
    pub requests: u32,
    /// ERROR answers by code: `errors[code]` for codes below [`COUNTED_ERROR_CODES`].
    pub errors: [u32; COUNTED_ERROR_CODES],
    /// ERROR answers with a code of [`COUNTED_ERROR_CODES`] or more.
    pub other_errors: u32,
    /// Messages dropped while reassembling (out of sequence, timed out, over the budget).
    pub reassembly_drops: u32,
    /// The most bytes the outbox held at once.
    pub outbox_high_water: u32,
    /// The most bytes held reassembling at once.
    pub reassembly_high_water: u32,
}

impl Counters {
    /// `true` when nothing was counted (high-water marks aside).
    pub fn is_empty(&self) -> bool {
        self.requests == 0
            && self.other_errors == 0
            && self.reassembly_drops == 0
            && self.errors.iter().all(|n| *n == 0)
    }

    /// Adds `other`'s counts to these (saturating) and keeps the higher high-water marks.
    pub fn add(&mut self, other: &Counters) {
        self.requests = self.requests.saturating_add(other.requests);
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a = a.saturating_add(b);
        }
        self.other_errors = self.other_errors.saturating_add(other.other_errors);
        self.reassembly_drops = self.reassembly_drops.saturating_add(other.reassembly_drops);
        self.outbox_high_water = self.outbox_high_water.max(other.outbox_high_water);
        self.reassembly_high_water = self.reassembly_high_water.max(other.reassembly_high_water);
    }

    /// Counts an ERROR answer with `code`.
    pub(crate) fn error(&mut self, code: u8) {
        let slot = match self.errors.get_mut(usize::from(code)) {
            Some(n) => n,
            None => &mut self.other_errors,
        };
        *slot = slot.saturating_add(1);
    }

    /// The ERROR answers by code, codes with none left out, in code order
    /// ([`OTHER_ERROR_CODE`] last): what a diagnostics message's `errors` lists.
    pub fn error_counts(&self) -> impl Iterator<Item = ErrorCount> + '_ {
        (0u8..)
            .zip(self.errors)
            .chain(core::iter::once((OTHER_ERROR_CODE, self.other_errors)))
            .filter(|(_, n)| *n > 0)
            .map(|(code, n)| (code, u64::from(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_high_water_marks_keep_the_highest() {
        let mut a = Counters::default();
        assert!(a.is_empty());
        a.error(0x02);
        a.error(0x02);
        a.error(0x42);
        a.outbox_high_water = 100;
        let mut b = Counters {
            requests: 3,
            outbox_high_water: 50,
            reassembly_high_water: 7,
            ..Counters::default()
        };
        b.error(0x0d);
        a.add(&b);
        assert_eq!(a.requests, 3);
        assert_eq!((a.outbox_high_water, a.reassembly_high_water), (100, 7));
        assert!(a.error_counts().eq([(0x02, 2), (0x0d, 1), (0xff, 1)]));
        assert!(!a.is_empty());
    }
}
