//! The payload mix: which calls a report makes, in what proportion.
//!
//! The default is the published bleRPC benchmark's calls in its counts (`../shared/spec/benchmarks.md`
//! §1): 50 × `echo("hello")`, 10 × `flash_read` of 8 KiB, 20 × `flash_read` of 1 byte, 20 ×
//! `data_write` of 200 bytes, interleaved so every stretch of the run sees each kind.

use serde::{Deserialize, Serialize};

/// One kind of call in the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallType {
    /// `echo("hello")`: a round trip with the smallest payload.
    Echo,
    /// `flash_read(0, 8192)`: 8 KiB down (35 containers at ATT MTU 247).
    FlashRead8k,
    /// `flash_read(0, 1)`: the overhead of one read.
    FlashRead1,
    /// `data_write` of 200 bytes (`i % 256`): one container up.
    DataWrite200,
}

impl CallType {
    /// Every kind, in table order.
    pub const ALL: [CallType; 4] = [
        CallType::Echo,
        CallType::FlashRead8k,
        CallType::FlashRead1,
        CallType::DataWrite200,
    ];

    /// The name in `--mix`, tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            CallType::Echo => "echo",
            CallType::FlashRead8k => "flash_read_8k",
            CallType::FlashRead1 => "flash_read_1",
            CallType::DataWrite200 => "data_write_200",
        }
    }

    /// Application payload bytes up and down per call (protobuf `data`/`message` bytes).
    pub fn payload(self) -> (u64, u64) {
        match self {
            CallType::Echo => (5, 5),
            CallType::FlashRead8k => (0, 8192),
            CallType::FlashRead1 => (0, 1),
            CallType::DataWrite200 => (200, 0),
        }
    }
}

/// Calls by weight; each cycle of the run makes `weight` calls of each kind, interleaved. In
/// JSON, as on the command line: `"echo:50,flash_read_8k:10"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mix(pub Vec<(CallType, u32)>);

impl Serialize for Mix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Mix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A `--mix` that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--mix {given:?}: {why}; write KIND:WEIGHT pairs separated by commas, KIND one of echo, \
     flash_read_8k, flash_read_1, data_write_200 (e.g. echo:50,flash_read_8k:10)"
)]
pub struct MixError {
    /// What was given.
    pub given: String,
    /// What is wrong with it.
    pub why: String,
}

impl Default for Mix {
    fn default() -> Self {
        Mix(vec![
            (CallType::Echo, 50),
            (CallType::FlashRead8k, 10),
            (CallType::FlashRead1, 20),
            (CallType::DataWrite200, 20),
        ])
    }
}

impl std::str::FromStr for Mix {
    type Err = MixError;
    fn from_str(s: &str) -> Result<Self, MixError> {
        let err = |why: String| MixError {
            given: s.to_string(),
            why,
        };
        let mut mix = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (kind, weight) = part.split_once(':').unwrap_or((part, "1"));
            let kind = CallType::ALL
                .into_iter()
                .find(|k| k.name() == kind.trim())
                .ok_or_else(|| err(format!("unknown kind {kind:?}")))?;
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|_| err(format!("weight {weight:?} is not a whole number")))?;
            if weight == 0 || weight > 10_000 {
                return Err(err(format!("weight {weight} is outside 1..=10000")));
            }
            if mix.iter().any(|(k, _)| *k == kind) {
                return Err(err(format!("{} appears twice", kind.name())));
            }
            mix.push((kind, weight));
        }
        if mix.is_empty() {
            return Err(err("no call kinds".into()));
        }
        Ok(Mix(mix))
    }
}

impl std::fmt::Display for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(k, w)| format!("{}:{w}", k.name()))
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl Mix {
    /// One cycle of calls: each kind `weight` times, spread evenly (the kind furthest behind
    /// its share goes next), so a short run still sees every kind in proportion.
    pub fn cycle(&self) -> Vec<CallType> {
        let total: u32 = self.0.iter().map(|(_, w)| w).sum();
        let mut done = vec![0u32; self.0.len()];
        let mut out = Vec::with_capacity(total as usize);
        for n in 1..=total {
            // The kind whose share of the first n calls it is most behind.
            let next = (0..self.0.len())
                .max_by(|&a, &b| {
                    let behind = |i: usize| {
                        f64::from(self.0[i].1) * f64::from(n) / f64::from(total)
                            - f64::from(done[i])
                    };
                    behind(a).total_cmp(&behind(b)).then(b.cmp(&a))
                })
                .unwrap_or(0);
            done[next] += 1;
            out.push(self.0[next].0);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_mix_parses_prints_and_cycles_in_proportion() {
        let mix: Mix = "echo:3, flash_read_8k:1".parse().unwrap();
        assert_eq!(mix.to_string(), "echo:3,flash_read_8k:1");
        let cycle = mix.cycle();
        assert_eq!(cycle.len(), 4);
        assert_eq!(cycle.iter().filter(|k| **k == CallType::Echo).count(), 3);
        let default = Mix::default();
        assert_eq!(default.to_string().parse::<Mix>().unwrap(), default);
        let cycle = default.cycle();
        assert_eq!(cycle.len(), 100);
        // Interleaved: the 8 KiB reads are spread, never bunched at one end.
        let first_half = cycle[..50]
            .iter()
            .filter(|k| **k == CallType::FlashRead8k)
            .count();
        assert_eq!(first_half, 5);
    }

    #[test]
    fn a_bad_mix_says_what_to_write() {
        for bad in ["", "ping:1", "echo:0", "echo:x", "echo:1,echo:2"] {
            let e = bad.parse::<Mix>().unwrap_err();
            assert!(e.to_string().contains("KIND:WEIGHT"), "{e}");
        }
    }
}
