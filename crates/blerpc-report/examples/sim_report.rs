//! A field report on the simulated BLE link (virtual time): the demo server on the peripheral
//! end, the link at CI 15 ms with 5 % packet loss, dropped twice; the report written into the
//! directory given (default `blerpc-report-sim`). What `docs/examples/report-sim/` holds:
//!
//!     cargo run -p blerpc-report --example sim_report -- docs/examples/report-sim

use std::sync::{Arc, Mutex};
use std::time::Duration;

use blerpc::Client;
use blerpc_report::schema::{Environment, Known};
use blerpc_report::{Options, run};
use blerpc_sim::{LinkParams, Monitor, pair};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "blerpc-report-sim".into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()?;
    let report = rt.block_on(async {
        let (server, key) = blerpc_demo::server::demo_server()?;
        let server = Arc::new(server);
        let monitors: Arc<Mutex<Vec<Monitor>>> = Arc::default();
        let params = LinkParams {
            initial_interval: None,
            loss: 0.05,
            ..LinkParams::default()
        };
        let connect = {
            let monitors = monitors.clone();
            move || {
                let (server, monitors) = (server.clone(), monitors.clone());
                async move {
                    let (central, peripheral) = pair(params).map_err(|e| e.to_string())?;
                    if let Ok(mut m) = monitors.lock() {
                        m.push(central.monitor());
                    }
                    tokio::spawn(async move { server.serve_link(peripheral).await });
                    Client::connect(central, blerpc_demo::server::client_config(key))
                        .await
                        .map_err(|e| e.to_string())
                }
            }
        };
        // The link drops 10 s and 20 s into the run.
        let dropper = tokio::spawn(async move {
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_secs(10)).await;
                if let Some(m) = monitors.lock().ok().and_then(|m| m.last().cloned()) {
                    m.disconnect("supervision timeout (simulated)");
                }
            }
        });
        let environment = Environment::for_host(
            Known::missing("the simulated link has no adapter"),
            Some("simulated peripheral (blerpc-sim, the runtime server)".into()),
            None,
            None,
            Some("CI 15 ms, 2M PHY, 5 % packet loss, two drops".into()),
        );
        let options = Options::new("sim://", "sim", Duration::from_secs(30), environment);
        let report = run(connect, &options, |_| {}).await?;
        dropper.abort();
        Ok::<_, Box<dyn std::error::Error>>(report)
    })?;
    for path in blerpc_report::write(&report, std::path::Path::new(&out))? {
        println!("wrote {}", path.display());
    }
    Ok(())
}
