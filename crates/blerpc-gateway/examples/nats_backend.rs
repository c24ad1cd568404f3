//! A backend that calls devices over NATS directly, without HTTP: any gateway of the fleet
//! that holds the device answers.
//!
//! ```text
//! cargo run -p blerpc-gateway --example nats_backend -- nats://127.0.0.1:4222 DEVICE_ID
//! ```
//!
//! It calls `echo`, reads a `counter_stream` line by line, and uploads to `counter_upload`
//! (the demo service's commands); a device held by no gateway answers 503 at once.

use std::time::Duration;

use blerpc_gateway::nats::{FleetClient, NatsLimits};
use futures_util::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(device)) = (args.next(), args.next()) else {
        eprintln!("usage: nats_backend NATS_URL DEVICE_ID");
        std::process::exit(2);
    };
    let nats = async_nats::connect(url.as_str()).await?;
    let fleet = FleetClient::new(nats, "blerpc", NatsLimits::default())?;

    let echo = fleet
        .call(
            &device,
            "echo",
            r#"{"message":"hello over NATS"}"#,
            Some(Duration::from_secs(5)),
        )
        .await?;
    println!(
        "echo: {} {}",
        echo.status,
        String::from_utf8_lossy(&echo.body)
    );
    if echo.status != 200 {
        return Ok(());
    }

    let (status, mut lines) = fleet
        .stream(&device, "counter_stream", r#"{"count":3}"#)
        .await?;
    println!("counter_stream: {status}");
    while let Some(chunk) = lines.next().await {
        print!("  {}", String::from_utf8_lossy(&chunk?));
    }

    let items = futures_util::stream::iter((0..3).map(|i| format!(r#"{{"seq":{i},"value":{i}}}"#)));
    let upload = fleet.upload(&device, "counter_upload", items, None).await?;
    println!(
        "counter_upload: {} {}",
        upload.status,
        String::from_utf8_lossy(&upload.body)
    );
    Ok(())
}
