//! Field reports over a connection the app opens (feature `report`; the Python wheel has it):
//! the same run as `blerpc report` ([`blerpc_report::run`], `docs/field-reports.md`), with each
//! connection, the first and every reconnect, opened by the app through a [`ReportConnector`]:
//! on a GATT link its own BLE stack provides (Bumble, bleak, a phone's), or by URL. The host's
//! BLE adapter is what the app says it is (`ble_adapter`): the app owns the radio.

use std::sync::Arc;
use std::time::Duration;

use blerpc_report::schema::{Environment, Known};
use blerpc_report::{Mix, Options};

use crate::connection::Connection;
use crate::{BlerpcError, code};

/// Opens connections to the device a report runs against. Implemented by the app.
#[uniffi::export(with_foreign)]
#[async_trait::async_trait]
pub trait ReportConnector: Send + Sync {
    /// A new connection to the device (set up, ready for calls): the first, and one after each
    /// loss. Must itself be bounded in time (a connect timeout); an error ends the run's
    /// reconnecting if it lasts past `reconnect_give_up_ms`.
    async fn connect(&self) -> Result<Arc<Connection>, BlerpcError>;
}

/// How a report runs and what the person running it says (each `None` is written as missing,
/// naming the option that gives it).
#[derive(Clone, Debug, uniffi::Record)]
pub struct ReportOptions {
    /// What the report names the device by (`ble://AA:BB:…`, a URL).
    pub url: String,
    /// The link's kind: `ble`, `tcp`, `tls`, ….
    pub kind: String,
    /// How long to keep calling, ms.
    pub duration_ms: u64,
    /// `KIND:WEIGHT,…` (`echo`, `flash_read_8k`, `flash_read_1`, `data_write_200`); default the
    /// published benchmark's mix.
    #[uniffi(default = None)]
    pub mix: Option<String>,
    /// Losses of the connection the run reconnects after; one more ends it. Default 100.
    #[uniffi(default = 100)]
    pub max_reconnects: u32,
    /// Calls at most. Default 1,000,000.
    #[uniffi(default = 1000000)]
    pub max_calls: u64,
    /// Wait before each reconnect attempt, ms, at least 1. Default 500.
    #[uniffi(default = 500)]
    pub reconnect_backoff_ms: u64,
    /// Give up reconnecting after this long without a connection, ms. Default 30,000.
    #[uniffi(default = 30000)]
    pub reconnect_give_up_ms: u64,
    /// The host's BLE adapter and its stack's version (the app's stack: `Bumble 0.0.x,
    /// virtual controller`).
    #[uniffi(default = None)]
    pub ble_adapter: Option<String>,
    /// The board the device runs on.
    #[uniffi(default = None)]
    pub board: Option<String>,
    /// The access point (Wi-Fi links).
    #[uniffi(default = None)]
    pub access_point: Option<String>,
    /// The distance to the device.
    #[uniffi(default = None)]
    pub distance: Option<String>,
    /// Anything else.
    #[uniffi(default = None)]
    pub note: Option<String>,
    /// A directory to write `report.json`, `report.md` and the two plots into (created if
    /// missing); `None`: nothing written.
    #[uniffi(default = None)]
    pub out_dir: Option<String>,
}

/// Runs a field report against the device `connector` reaches and returns it as JSON
/// (`blerpc-report/1`, `docs/report.schema.json`); with `out_dir`, also writes its files.
/// Runs on the library's runtime: the caller's event loop stays free for its BLE stack.
/// Cancelling the foreign task that awaits this stops the run (nothing is written).
#[uniffi::export(async_runtime = "tokio")]
pub async fn run_report(
    connector: Arc<dyn ReportConnector>,
    options: ReportOptions,
) -> Result<String, BlerpcError> {
    let run = options_for(&options)?;
    let out_dir = options.out_dir.clone();
    let task = crate::runtime()?.spawn(async move {
        let connect = || {
            let connector = connector.clone();
            async move {
                connector
                    .connect()
                    .await
                    .map(|c| c.client().clone())
                    .map_err(|e| e.to_string())
            }
        };
        blerpc_report::run(connect, &run, |_| {}).await
    });
    let report = crate::connection::AbortOnDrop(task)
        .await
        .map_err(|e| BlerpcError::connection(code::LINK_FAILED, format!("the report's run: {e}")))?
        .map_err(|e| BlerpcError::connection(code::LINK_FAILED, e.to_string()))?;
    if let Some(dir) = out_dir {
        blerpc_report::write(&report, std::path::Path::new(&dir))
            .map_err(|e| BlerpcError::invalid(e.to_string()))?;
    }
    serde_json::to_string_pretty(&report)
        .map_err(|e| BlerpcError::invalid(format!("the report as JSON: {e}")))
}

/// The run's options from the app's.
fn options_for(o: &ReportOptions) -> Result<Options, BlerpcError> {
    if o.duration_ms == 0 {
        return Err(BlerpcError::invalid("duration_ms must be at least 1"));
    }
    if o.reconnect_backoff_ms == 0 {
        // A connect that fails at once would be retried in a loop with no wait.
        return Err(BlerpcError::invalid(
            "reconnect_backoff_ms must be at least 1",
        ));
    }
    let adapter = match &o.ble_adapter {
        Some(a) => Known::Value(a.clone()),
        None => Known::missing("not given (ble_adapter): the app owns the BLE stack"),
    };
    let environment = Environment::for_host(
        adapter,
        o.board.clone(),
        o.access_point.clone(),
        o.distance.clone(),
        o.note.clone(),
    );
    let mut run = Options::new(
        &o.url,
        &o.kind,
        Duration::from_millis(o.duration_ms),
        environment,
    );
    if let Some(mix) = &o.mix {
        run.mix = mix
            .parse::<Mix>()
            .map_err(|e| BlerpcError::invalid(e.to_string()))?;
    }
    run.max_reconnects = o.max_reconnects;
    run.max_calls = o.max_calls.max(1);
    run.reconnect_backoff = Duration::from_millis(o.reconnect_backoff_ms);
    run.reconnect_give_up = Duration::from_millis(o.reconnect_give_up_ms);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> ReportOptions {
        ReportOptions {
            url: "ble://01:02:03:04:05:C1".into(),
            kind: "ble".into(),
            duration_ms: 1000,
            mix: None,
            max_reconnects: 100,
            max_calls: 1_000_000,
            reconnect_backoff_ms: 500,
            reconnect_give_up_ms: 30_000,
            ble_adapter: None,
            board: Some("a board".into()),
            access_point: None,
            distance: None,
            note: None,
            out_dir: None,
        }
    }

    fn refusal(o: ReportOptions) -> String {
        match options_for(&o) {
            Err(BlerpcError::InvalidArgument { detail, .. }) => detail,
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn the_apps_options_become_the_runs() {
        let run = options_for(&ReportOptions {
            mix: Some("echo:1".into()),
            ..options()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(run.duration, Duration::from_secs(1));
        assert_eq!(run.mix.cycle().len(), 1);
        assert_eq!(
            run.environment.board.value().map(String::as_str),
            Some("a board")
        );
        assert!(run.environment.ble_adapter.value().is_none());
        assert!(
            refusal(ReportOptions {
                duration_ms: 0,
                ..options()
            })
            .contains("duration_ms")
        );
        assert!(
            refusal(ReportOptions {
                reconnect_backoff_ms: 0,
                ..options()
            })
            .contains("reconnect_backoff_ms")
        );
        assert!(
            !refusal(ReportOptions {
                mix: Some("nope:1".into()),
                ..options()
            })
            .is_empty()
        );
    }
}
