//! XDP hooks: native (on the raw buffer, before packet metadata exists) and generic (after).

use crate::buf::skb::Skb;
use crate::buf::Pkt;
use crate::datapath::Datapath;

/// Programs attached to the datapath's hooks.
#[derive(Default)]
pub struct XdpHooks {}

impl XdpHooks {
    /// Frames queued for redirect, not yet flushed.
    pub fn in_flight(&self) -> u64 {
        0
    }
}

/// Native hook: runs on the raw burst; survivors (PASS) stay in `rx`.
#[inline]
pub fn run_native(_dp: &mut Datapath, _port: u16, _rx: &mut Vec<Pkt>) {}

/// Generic hook: runs on packets with metadata; survivors (PASS) stay in `skbs`.
#[inline]
pub fn run_generic(_dp: &mut Datapath, _skbs: &mut Vec<Skb>) {}

/// End of poll: redirect bulk queues go out.
#[inline]
pub fn flush_redirects(_dp: &mut Datapath) {}
