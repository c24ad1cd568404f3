//! The functional tests over a connected `blerpc::Client` (feature `std`).

use std::time::Duration;

use tokio::time::Instant;

use super::{
    Call, Mismatch, TESTS, case, check_data_write, check_echo, check_flash_read, check_item,
    check_item_count, check_upload, counter_item, data_byte,
};
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

fn failed(e: impl ToString) -> String {
    e.to_string()
}

fn mismatch(m: Mismatch) -> String {
    m.to_string()
}

async fn run(c: &pb::BlerpcClient, call: Call) -> Result<(), String> {
    match call {
        Call::Echo(message) => {
            let r = c
                .echo(pb::EchoRequest {
                    message: message.into(),
                })
                .await
                .map_err(failed)?;
            check_echo(message, &r.message).map_err(mismatch)
        }
        Call::FlashRead { address, length } => {
            let r = c
                .flash_read(pb::FlashReadRequest { address, length })
                .await
                .map_err(failed)?;
            check_flash_read(length, r.data.len()).map_err(mismatch)
        }
        Call::DataWrite { len } => {
            let data: Vec<u8> = (0..len).map(data_byte).collect();
            let r = c
                .data_write(pb::DataWriteRequest { data: data.into() })
                .await
                .map_err(failed)?;
            check_data_write(len, r.length).map_err(mismatch)
        }
        Call::CounterStream { count } => {
            let items = c
                .counter_stream(pb::CounterStreamRequest { count })
                .await
                .map_err(failed)?
                .collect_vec()
                .await
                .map_err(failed)?;
            let got = u32::try_from(items.len()).unwrap_or(u32::MAX);
            check_item_count(count, got).map_err(mismatch)?;
            for (i, item) in (0..).zip(&items) {
                check_item(i, item.seq, item.value).map_err(mismatch)?;
            }
            Ok(())
        }
        Call::CounterUpload { count } => {
            let items = (0..count).map(|i| {
                let (seq, value) = counter_item(i);
                pb::CounterUploadRequest { seq, value }
            });
            let r = c.counter_upload(items).await.map_err(failed)?;
            check_upload(count, r.received_count).map_err(mismatch)
        }
    }
}

/// Runs one test by name.
pub async fn run_one(c: &pb::BlerpcClient, name: &'static str) -> TestResult {
    let start = Instant::now();
    let outcome = match case(name) {
        Some(case) => run(c, case.call).await,
        None => Err(format!("unknown test {name}")),
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
