//! In-process UDP sockets: bounded queues of datagrams that local delivery appends to in runs
//! and a reader drains in batches. Per worker: each worker's sockets receive the flows it
//! processes (like SO_REUSEPORT sockets, one per CPU).

use crate::buf::{BufCache, Pkt};
use std::collections::VecDeque;

/// UDP port of the echo service (RFC 862).
pub const UDP_ECHO_PORT: u16 = 7;

/// A bound UDP socket: a bounded queue of datagrams (buffers trimmed to the payload).
pub struct UdpSocket {
    pub port: u16,
    pub(crate) queue: VecDeque<Pkt>,
    pub(crate) capacity: usize,
    pub received: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketId(pub u32);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SocketError {
    #[error("UDP port {0} is already bound")]
    InUse(u16),
    #[error("UDP port {0} is reserved for the echo service")]
    Reserved(u16),
}

/// All sockets; a 64 Ki-entry port table makes demux one array read.
pub struct Sockets {
    pub(crate) udp: Vec<UdpSocket>,
    port_map: Vec<u32>,
    /// A chained datagram's payload, copied for the reader (reused).
    linear: Vec<u8>,
    /// The worker the sockets' reader runs on, when it is not the one delivering (RFS
    /// records it as where their flows are consumed).
    pub reader_cpu: Option<usize>,
}

impl Default for Sockets {
    fn default() -> Self {
        Sockets { udp: Vec::new(), port_map: vec![u32::MAX; 65536], linear: Vec::new(), reader_cpu: None }
    }
}

impl Sockets {
    pub fn bind_udp(&mut self, port: u16, capacity: usize) -> Result<SocketId, SocketError> {
        if port == UDP_ECHO_PORT {
            return Err(SocketError::Reserved(port));
        }
        if self.port_map[port as usize] != u32::MAX {
            return Err(SocketError::InUse(port));
        }
        let id = self.udp.len() as u32;
        self.udp.push(UdpSocket { port, queue: VecDeque::with_capacity(capacity), capacity, received: 0 });
        self.port_map[port as usize] = id;
        Ok(SocketId(id))
    }

    #[inline]
    pub(crate) fn lookup(&self, port: u16) -> Option<u32> {
        let i = self.port_map[port as usize];
        (i != u32::MAX).then_some(i)
    }

    /// Datagrams waiting on all sockets (they are delivered, not in flight).
    pub fn queued(&self) -> usize {
        self.udp.iter().map(|s| s.queue.len()).sum()
    }

    pub fn socket(&self, id: SocketId) -> Option<&UdpSocket> {
        self.udp.get(id.0 as usize)
    }

    /// Receives up to `max` datagrams in one call, handing each payload to `f`, and frees
    /// their buffers. Returns how many.
    pub fn recv_batch(&mut self, bufs: &mut BufCache, id: SocketId, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let Some(s) = self.udp.get_mut(id.0 as usize) else {
            return 0;
        };
        let n = max.min(s.queue.len());
        for p in s.queue.drain(..n) {
            if p.is_chained() {
                // A datagram in a buffer chain reaches the reader whole, as one copy.
                self.linear.clear();
                bufs.extend_vec(p, &mut self.linear);
                f(&self.linear);
            } else {
                f(bufs.data(p));
            }
            bufs.free(p);
        }
        n
    }

    /// Drains every socket (the lab's application).
    pub fn drain_all(&mut self, bufs: &mut BufCache) -> usize {
        let mut n = 0;
        for s in self.udp.iter_mut() {
            n += s.queue.len();
            for p in s.queue.drain(..) {
                bufs.free(p);
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bind(2): a port binds once (EADDRINUSE after), and the echo service's port is
    /// sluice's own; an unbound port or unknown socket finds nothing.
    #[test]
    fn a_port_binds_once_and_the_echo_port_is_reserved() {
        let mut s = Sockets::default();
        let id = s.bind_udp(5001, 4).unwrap();
        assert_eq!(s.lookup(5001), Some(id.0));
        assert_eq!(s.socket(id).map(|u| (u.port, u.capacity)), Some((5001, 4)));
        assert_eq!(s.bind_udp(5001, 8).err(), Some(SocketError::InUse(5001)));
        assert_eq!(s.bind_udp(UDP_ECHO_PORT, 4).err(), Some(SocketError::Reserved(UDP_ECHO_PORT)));
        let other = s.bind_udp(5002, 4).unwrap();
        assert_ne!(other, id);
        assert_eq!((s.lookup(5002), s.lookup(5003)), (Some(other.0), None));
        assert!(s.socket(SocketId(9)).is_none());
        let pool = crate::buf::Pool::new(8).unwrap();
        let mut bufs = pool.cache();
        assert_eq!(s.recv_batch(&mut bufs, SocketId(9), 8, |_| panic!("no socket")), 0);
    }
}
