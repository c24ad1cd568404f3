//! The codec benchmark's workloads in WebAssembly (feature `codec-bench`): the very workloads
//! of `blerpc-bench codec` (the `blerpc-codec-workloads` crate), timed with the same method on
//! the page's clock.
//!
//! Method (as `blerpc-bench codec` measures natively): 300 ms untimed warm-up; a batch size
//! calibrated by doubling until one batch takes `sample_ms`; then `samples` batches, each
//! giving ns/op. `performance.now()` is coarsened by the browser (100 µs without cross-origin
//! isolation in Chromium), under 1 % of a 20 ms batch.

use std::hint::black_box;

use blerpc_proto::crypto::RustCrypto;
use wasm_bindgen::prelude::*;

use crate::clock::now_ms;
use crate::error::{Error, code, set};

use blerpc_codec_workloads::{CodecPath, KeyExchange, Workload, expected_pdus};

const WARMUP_MS: f64 = 300.0;

fn measure(
    samples: usize,
    sample_ms: f64,
    mut f: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<(u64, Vec<f64>)> {
    let warm = now_ms();
    while now_ms() - warm < WARMUP_MS {
        f()?;
    }
    let mut iters = 1u64;
    loop {
        let t = now_ms();
        for _ in 0..iters {
            f()?;
        }
        if now_ms() - t >= sample_ms || iters >= 1 << 30 {
            break;
        }
        iters *= 2;
    }
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = now_ms();
        for _ in 0..iters {
            f()?;
        }
        out.push((now_ms() - t) * 1e6 / iters as f64);
    }
    Ok((iters, out))
}

fn run(w: Workload, samples: usize, sample_ms: f64) -> anyhow::Result<(u64, Vec<f64>)> {
    if w == Workload::Kx {
        let mut kx = KeyExchange::new(RustCrypto, 0x00b1_e4bc)?;
        kx.verify()?;
        measure(samples, sample_ms, || {
            black_box(kx.run_once()?);
            Ok(())
        })
    } else {
        let mut path = CodecPath::new(w, &RustCrypto)?;
        path.verify(expected_pdus(w))?;
        measure(samples, sample_ms, || {
            black_box(path.run_once()?);
            Ok(())
        })
    }
}

/// Runs one workload (`enc_8k`, `enc_echo`, `plain_8k`, `kx`) with the RustCrypto provider:
/// `{ workload, iters, samplesNs: [ns/op per sample] }`.
#[wasm_bindgen(js_name = codecBench)]
pub fn codec_bench(workload: &str, samples: usize, sample_ms: f64) -> Result<JsValue, JsValue> {
    let w = Workload::from_name(workload).ok_or_else(|| {
        Error::new(
            code::INVALID_ARGUMENT,
            format!("unknown workload {workload}"),
        )
    })?;
    let (iters, ns) = run(w, samples.max(1), sample_ms)
        .map_err(|e| Error::new(code::CALL_FAILED, format!("{workload}: {e:#}")))?;
    let out: JsValue = js_sys::Object::new().into();
    set(&out, "workload", &workload.into());
    set(&out, "iters", &(iters as f64).into());
    let arr = js_sys::Array::new();
    for v in ns {
        arr.push(&v.into());
    }
    set(&out, "samplesNs", &arr);
    Ok(out)
}
