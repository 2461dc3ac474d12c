//! A port's transmit staging queue on one worker: filled during a poll, handed to the port at
//! its end.

use crate::buf::Pkt;

/// Queue length that forces an early flush.
pub const QUEUE_SOFT_LIMIT: usize = 1024;

#[derive(Debug, Default)]
pub struct TxQueue {
    pub pkts: Vec<Pkt>,
}
