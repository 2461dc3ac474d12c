//! Fuzz harness for sluice: the target bodies live in `harness` (also replayed by the main
//! crate's tests/fuzz_corpus.rs); `common` is the integration tests' router harness.

#[path = "../../tests/common/mod.rs"]
pub mod common;
pub mod harness;
