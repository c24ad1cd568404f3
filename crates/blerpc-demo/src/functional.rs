//! The reference functional tests (`benchmarks.md` §1, `central_py/tests/test_integration.py`),
//! with the reference's exact parameters, run over any connected client.

use std::time::Duration;

use tokio::time::Instant;

use crate::pb;

/// One test's outcome.
#[derive(Clone, Debug)]
pub struct TestResult {
    /// The reference's test name.
    pub name: &'static str,
    /// `Ok(())` or what went wrong.
    pub outcome: Result<(), String>,
    /// Time the test took (`tokio::time`: virtual on a paused runtime such as the simulated
    /// link, real otherwise).
    pub elapsed: Duration,
}

impl TestResult {
    /// `true` if the test passed.
    pub fn passed(&self) -> bool {
        self.outcome.is_ok()
    }
}

/// The test names, in the reference's order.
pub const TESTS: [&str; 12] = [
    "echo_basic",
    "echo_empty",
    "echo_max_length",
    "multi_container_echo",
    "flash_read_basic",
    "flash_read_8kb",
    "data_write_basic",
    "data_write_8kb",
    "counter_stream",
    "counter_stream_large",
    "counter_upload",
    "counter_upload_large",
];

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

async fn echo(c: &pb::BlerpcClient, message: String) -> Result<(), String> {
    let r = c
        .echo(pb::EchoRequest {
            message: message.clone(),
        })
        .await
        .map_err(|e| e.to_string())?;
    check(r.message == message, || {
        format!("echoed {} bytes, sent {}", r.message.len(), message.len())
    })
}

async fn flash_read(c: &pb::BlerpcClient, length: u32) -> Result<(), String> {
    let r = c
        .flash_read(pb::FlashReadRequest { address: 0, length })
        .await
        .map_err(|e| e.to_string())?;
    check(r.data.len() == length as usize, || {
        format!("got {} bytes, asked {length}", r.data.len())
    })
}

async fn data_write(c: &pb::BlerpcClient, data: Vec<u8>) -> Result<(), String> {
    let len = data.len();
    let r = c
        .data_write(pb::DataWriteRequest { data: data.into() })
        .await
        .map_err(|e| e.to_string())?;
    check(r.length as usize == len, || {
        format!("peripheral counted {}, sent {len}", r.length)
    })
}

async fn counter_stream(c: &pb::BlerpcClient, count: u32) -> Result<(), String> {
    let items = c
        .counter_stream(pb::CounterStreamRequest { count })
        .await
        .map_err(|e| e.to_string())?
        .collect_vec()
        .await
        .map_err(|e| e.to_string())?;
    check(items.len() == count as usize, || {
        format!("{} items, expected {count}", items.len())
    })?;
    for (i, item) in items.iter().enumerate() {
        let i = i as u32;
        check(item.seq == i && item.value == (i as i32) * 10, || {
            format!("item {i} is seq={} value={}", item.seq, item.value)
        })?;
    }
    Ok(())
}

async fn counter_upload(c: &pb::BlerpcClient, count: u32) -> Result<(), String> {
    let items = (0..count).map(|i| pb::CounterUploadRequest {
        seq: i,
        value: (i as i32) * 10,
    });
    let r = c.counter_upload(items).await.map_err(|e| e.to_string())?;
    check(r.received_count == count, || {
        format!("received_count {}, sent {count}", r.received_count)
    })
}

/// Runs one test by name.
pub async fn run_one(c: &pb::BlerpcClient, name: &'static str) -> TestResult {
    let start = Instant::now();
    let pattern = |n: usize| -> Vec<u8> { (0..=255u8).cycle().take(n).collect() };
    let outcome = match name {
        "echo_basic" => echo(c, "hello".into()).await,
        "echo_empty" => echo(c, String::new()).await,
        "echo_max_length" => echo(c, "A".repeat(256)).await,
        "multi_container_echo" => echo(c, "B".repeat(250)).await,
        "flash_read_basic" => flash_read(c, 16).await,
        "flash_read_8kb" => flash_read(c, 8192).await,
        "data_write_basic" => data_write(c, pattern(1024)).await,
        "data_write_8kb" => data_write(c, pattern(8192)).await,
        "counter_stream" => counter_stream(c, 5).await,
        "counter_stream_large" => counter_stream(c, 20).await,
        "counter_upload" => counter_upload(c, 5).await,
        "counter_upload_large" => counter_upload(c, 20).await,
        other => Err(format!("unknown test {other}")),
    };
    TestResult {
        name,
        outcome,
        elapsed: start.elapsed(),
    }
}

/// Runs all twelve tests in order.
pub async fn run_all(c: &pb::BlerpcClient) -> Vec<TestResult> {
    let mut out = Vec::with_capacity(TESTS.len());
    for name in TESTS {
        out.push(run_one(c, name).await);
    }
    out
}
