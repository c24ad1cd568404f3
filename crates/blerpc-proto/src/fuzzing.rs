//! What the fuzz targets and the test vectors need from the core that no application may use
//! (feature `fuzzing`, never in a release build of a user's code; not a stable API). The target
//! bodies themselves live in `fuzz/targets/` (crate `blerpc-fuzz`).

use crate::crypto::Aead;
use crate::session::Session;

/// Sets the counter the next message sealed by `session` will carry. The session target moves
/// it to test the replay rule (gaps, counters going backwards), the vectors to reproduce the
/// reference's frames. On a live session this reuses nonces.
pub fn set_tx_counter<A: Aead>(session: &mut Session<A>, next: u32) {
    session.set_tx_counter(next);
}
