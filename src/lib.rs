//! sluice: a userspace packet datapath that brings the Linux kernel's batching and steering
//! mechanisms (NAPI, listified receive, XDP, ...) into one observable, testable program.

pub mod bench;
pub mod rx;
pub mod wire;
