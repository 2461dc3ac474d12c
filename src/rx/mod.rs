//! Receive path.

pub mod fib;
