//! Serves the thermostat and calls every command over an in-memory link (encrypted, MTU 247).
//!
//! ```text
//! cargo run -p blerpc-example --example thermostat
//! ```

use blerpc::client::PinPolicy;
use blerpc::link::mem;
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use blerpc_example::SimThermostat;
use blerpc_example::thermostat::{
    GetReadingRequest, ScheduleStep, SetTargetRequest, ThermostatClient, ThermostatServer,
    WatchRequest,
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The peripheral: our handler behind the generated Dispatch.
    let (central, peripheral) = mem::pair(247);
    let server = Server::new(
        ThermostatServer::new(SimThermostat::default()),
        ServerConfig {
            identity: Some([7; 32]),
            ..Default::default()
        },
    )?;
    let key = server.identity_public().ok_or("server has no identity")?;
    tokio::spawn(async move { server.serve_link(peripheral).await });

    // The central: the generated typed client over a connected blerpc::Client.
    let client = ThermostatClient::new(
        Client::connect(
            central,
            ClientConfig {
                pinning: PinPolicy::Trust(key),
                ..Default::default()
            },
        )
        .await?,
    );

    let reading = client.get_reading(GetReadingRequest {}).await?;
    println!(
        "get_reading     -> {:.2} °C",
        f64::from(reading.centi_celsius) / 100.0
    );

    let target = client
        .set_target(SetTargetRequest {
            centi_celsius: 2050,
        })
        .await?;
    println!(
        "set_target      -> {:.2} °C",
        f64::from(target.centi_celsius) / 100.0
    );

    match client
        .set_target(SetTargetRequest {
            centi_celsius: 9900,
        })
        .await
    {
        Ok(_) => println!("set_target 99 °C was accepted?"),
        Err(e) => println!("set_target      -> refused: {e}"),
    }

    let mut watch = client.watch(WatchRequest { count: 3 }).await?;
    while let Some(reading) = watch.message().await? {
        println!(
            "watch           -> #{} {:.2} °C",
            reading.seq,
            f64::from(reading.centi_celsius) / 100.0
        );
    }

    let schedule =
        [(390, 2100), (510, 1700), (1050, 2150), (1350, 1600)].map(|(minute, centi_celsius)| {
            ScheduleStep {
                minute,
                centi_celsius,
            }
        });
    let summary = client.upload_schedule(schedule).await?;
    println!(
        "upload_schedule -> {} steps, {:.2}..{:.2} °C",
        summary.steps,
        f64::from(summary.min_centi_celsius) / 100.0,
        f64::from(summary.max_centi_celsius) / 100.0
    );

    // Both ways at once: send targets while reading what the thermostat made of them.
    let mut adjust = client.adjust().await?;
    let sender = adjust.sender();
    let sending = tokio::spawn(async move {
        for centi_celsius in [1900, 2000, 2100] {
            sender.send(SetTargetRequest { centi_celsius }).await?;
        }
        sender.finish().await
    });
    while let Some(target) = adjust.message().await? {
        println!(
            "adjust          -> {:.2} °C",
            f64::from(target.centi_celsius) / 100.0
        );
    }
    sending.await??;
    Ok(())
}
