//! Benchmark harness.

pub mod stats;
