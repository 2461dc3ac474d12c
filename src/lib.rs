//! sluice: a userspace packet datapath that brings the Linux kernel's batching and steering
//! mechanisms (NAPI, listified receive, XDP, ...) into one observable, testable program.
//!
//! Data flows one way: `port` (rx burst) → `napi` poll → `xdp` native → packet metadata
//! (`buf::skb`) → `xdp` generic → `rx` (l2, ip, route, forward / local) → `tx` → `port`.
//! Stages read the shared [`net::Net`] and write their thread's [`worker::Worker`]; the control
//! plane (`config`, `cli`, `bench`) builds a [`datapath::Datapath`] (both) and runs it.

pub mod bench;
pub mod buf;
pub mod cli;
pub mod config;
pub mod datapath;
pub mod gro;
pub mod napi;
pub mod net;
pub mod port;
pub mod rps;
pub mod rx;
pub mod stats;
pub mod tunables;
pub mod tx;
pub mod wire;
pub mod worker;
pub mod xdp;
