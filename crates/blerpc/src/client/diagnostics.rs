//! [`Client::diagnostics`]: the peripheral's diagnostics (the diagnostics extension).

use blerpc_proto::wire::capabilities::CapabilityFlags;
use blerpc_proto::wire::diagnostics::{DIAGNOSTICS_COMMAND, Diagnostics};

use super::{Client, Error};
use crate::diagnostics::{DeviceDiagnostics, NOT_ANNOUNCED};

impl Client {
    /// The peripheral's diagnostics: its link as it sees it, uptime, build and version,
    /// counters and memory marks, each field its value or the reason it is missing
    /// (`docs/protocol.md` "Diagnostics"). A peripheral that does not announce the extension
    /// is not asked (a reference peripheral would drop the command and leave the call to time
    /// out): every field is then unavailable with [`NOT_ANNOUNCED`]. A response that does
    /// not decode is [`Error::Decode`].
    pub async fn diagnostics(&self) -> Result<DeviceDiagnostics, Error> {
        let announced = self
            .info()
            .capabilities
            .is_some_and(|c| c.flags.contains(CapabilityFlags::DIAGNOSTICS));
        if !announced {
            return Ok(DeviceDiagnostics::unavailable(NOT_ANNOUNCED));
        }
        let bytes = self.call(DIAGNOSTICS_COMMAND, Vec::new()).await?;
        let wire = Diagnostics::parse(&bytes)
            .map_err(|e| Error::Decode(format!("the {DIAGNOSTICS_COMMAND} response: {e}")))?;
        Ok(DeviceDiagnostics::from_wire(&wire))
    }
}
