//! Longest-prefix-match tables: the lookup half of routing.
//!
//! Each table keeps its routes twice. A per-length exact-match map is the control-plane source
//! of truth (it answers "what covers this prefix once a route goes away"); a leaf-pushed
//! multibit array structure is the data plane, so a lookup is a fixed short walk of array
//! indexing with no backtracking and no allocation. A route's result is an opaque next-hop
//! index chosen by the caller, at most [`MAX_NEXT_HOP`].
//!
//! - [`Fib4`]: DIR-24-8, one memory access for matches up to /24, two beyond.
//! - [`Fib6`]: 16-bit root stride then 8-bit strides down to /128.
//!
//! Updates need `&mut self`; to update while other threads look up, build or clone outside
//! the fast path and publish behind an `Arc` swap.

mod arena;
pub mod v4;
pub mod v6;

pub use v4::Fib4;
pub use v6::Fib6;

/// Largest next-hop index a table stores: the top two bits of an entry are flags.
pub const MAX_NEXT_HOP: u32 = arena::PAYLOAD;

/// Why a route could not be installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FibError {
    #[error("prefix length {0} out of range")]
    BadPrefixLen(u8),
    #[error("next hop index {0} too large")]
    BadNextHop(u32),
    #[error("table full")]
    Full,
}
