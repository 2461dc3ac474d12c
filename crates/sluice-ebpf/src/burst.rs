//! Running a program over a burst of packets, the way a driver's NAPI poll runs XDP on
//! each frame of its rx ring: one call per burst instead of one per packet, so the engine's
//! per-run set-up (native stack, context checks, dispatch) is paid where it has to be.
//!
//! Packets sit in a [`FrameRegion`]: equal-sized frames in one mapping below 4 GiB, like an
//! AF_XDP UMEM. The region is checked once; each packet is then a [`FrameDesc`] (frame index,
//! data offset, length), so the engine builds `struct xdp_md` with two additions.

use crate::state::{Engine, RunError, RunErrorKind};
use crate::xdp::{RunOutcome, XdpBuff};
use crate::Env;
use std::marker::PhantomData;

/// Equal-sized frames in one region that lies wholly below 4 GiB.
#[derive(Debug)]
pub struct FrameRegion<'a> {
    base: *mut u8,
    frame_size: usize,
    frames: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> FrameRegion<'a> {
    /// The frames of `mem`, `frame_size` bytes each (a trailing partial frame is not used).
    pub fn new(mem: &'a mut [u8], frame_size: usize) -> Result<FrameRegion<'a>, RunErrorKind> {
        let frames = mem.len().checked_div(frame_size).unwrap_or(0);
        // SAFETY: `mem` is `frames * frame_size` (or more) writable bytes borrowed exclusively for 'a.
        unsafe { FrameRegion::from_raw(mem.as_mut_ptr(), frame_size, frames) }
    }

    /// A region over raw memory (a buffer pool's mapping).
    ///
    /// # Safety
    /// `[base, base + frames * frame_size)` must be valid for reads and writes for `'a`, and
    /// nothing else may access the frames a burst names while it runs.
    pub unsafe fn from_raw(base: *mut u8, frame_size: usize, frames: usize) -> Result<FrameRegion<'a>, RunErrorKind> {
        let end = frames.checked_mul(frame_size).and_then(|len| (base as usize).checked_add(len));
        if end.is_none_or(|e| e >= 1 << 32) || frame_size > u32::MAX as usize {
            return Err(RunErrorKind::BufferAbove4G);
        }
        Ok(FrameRegion { base, frame_size, frames, _borrow: PhantomData })
    }

    pub fn frame_size(&self) -> usize {
        self.frame_size
    }

    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Frame `i` as bytes.
    pub fn frame_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        if i >= self.frames {
            return None;
        }
        // SAFETY: frame i lies inside the region (checked), which `self` borrows exclusively.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.add(i * self.frame_size), self.frame_size) })
    }

    /// The 32-bit addresses of `[data, data_end)` of `d` if it lies inside its frame.
    #[inline(always)]
    pub(crate) fn addresses<D: FrameDesc>(&self, d: &D) -> Option<(u32, u32)> {
        let (frame, data, len) = (d.frame() as usize, d.data(), d.data_len());
        // Checked: `FrameDesc` is a safe trait, its numbers may be anything.
        if frame >= self.frames || data.checked_add(len).is_none_or(|end| end > self.frame_size) {
            return None;
        }
        // Below 4 GiB: checked for the whole region in `from_raw`.
        let start = self.base as usize + frame * self.frame_size + data;
        Some((start as u32, (start + len) as u32))
    }

    /// An [`XdpBuff`] for `d` (None if it does not lie inside its frame).
    #[inline]
    pub fn buff<D: FrameDesc>(&mut self, d: &D, ctx: BurstCtx) -> Option<XdpBuff<'_>> {
        let (data, len) = (d.data(), d.data_len());
        let frame = self.frame_mut(d.frame() as usize)?;
        if data.checked_add(len).is_none_or(|end| end > frame.len()) {
            return None;
        }
        let mut b = XdpBuff::new(frame, data, len);
        b.ingress_ifindex = ctx.ingress_ifindex;
        b.rx_queue_index = ctx.rx_queue_index;
        Some(b)
    }
}

/// One packet of a burst: which frame, and where the packet lies in it. A run that moves the
/// packet (adjust_head/tail) writes the new bounds back with [`FrameDesc::set_bounds`];
/// metadata from adjust_meta is not carried (as after the kernel's XDP_PASS without an skb).
pub trait FrameDesc: Copy {
    fn frame(&self) -> u32;
    /// Offset of the first packet byte in the frame.
    fn data(&self) -> usize;
    fn data_len(&self) -> usize;
    fn set_bounds(&mut self, data: usize, len: usize);
}

/// What every packet of a burst shares (they came from one rx queue).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BurstCtx {
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
}

/// Runs of a burst that faulted (their outcome is XDP_ABORTED), and the first fault.
#[derive(Debug, Default)]
pub struct BurstFaults {
    pub count: u64,
    pub first: Option<RunError>,
}

impl BurstFaults {
    #[inline]
    pub(crate) fn record(&mut self, e: RunError) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(e);
        }
    }
}

/// The fault of a descriptor that does not lie inside its frame.
pub(crate) fn bad_desc<D: FrameDesc>(d: &D, region: &FrameRegion<'_>) -> RunErrorKind {
    let frame_len = if (d.frame() as usize) < region.frames { region.frame_size } else { 0 };
    RunErrorKind::BadBuffer { data_meta: d.data(), data: d.data(), data_end: d.data().saturating_add(d.data_len()), frame_len }
}

pub(crate) const ABORTED: RunOutcome = RunOutcome { action: crate::insn::XDP_ABORTED, redirect: None };

/// A burst run through [`Engine::run`], one packet at a time: what every engine can do.
/// `out` must be at least as long as `pkts`; outcome `i` belongs to packet `i`.
pub fn run_burst_each<E: Engine + ?Sized, D: FrameDesc>(
    engine: &E,
    region: &mut FrameRegion<'_>,
    pkts: &mut [D],
    ctx: BurstCtx,
    env: &mut dyn Env,
    out: &mut [RunOutcome],
) -> BurstFaults {
    let mut faults = BurstFaults::default();
    for (d, o) in pkts.iter_mut().zip(out.iter_mut()) {
        let Some(mut xb) = region.buff(d, ctx) else {
            *o = ABORTED;
            faults.record(RunError::new(0, bad_desc(d, region)));
            continue;
        };
        match engine.run(&mut xb, env) {
            Ok(r) => {
                *o = r;
                let (data, len) = (xb.data, xb.data_end - xb.data);
                d.set_bounds(data, len);
            }
            Err(e) => {
                *o = ABORTED;
                faults.record(e);
            }
        }
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    struct Wild(u32, usize, usize);

    impl FrameDesc for Wild {
        fn frame(&self) -> u32 {
            self.0
        }
        fn data(&self) -> usize {
            self.1
        }
        fn data_len(&self) -> usize {
            self.2
        }
        fn set_bounds(&mut self, data: usize, len: usize) {
            (self.1, self.2) = (data, len);
        }
    }

    #[test]
    fn descriptors_outside_their_frame_are_refused_without_overflow() {
        let mut mem = crate::LowMem::new(4 * 2048).unwrap();
        let mut region = FrameRegion::new(mem.as_mut_slice(), 2048).unwrap();
        assert_eq!(region.frames(), 4);
        let ok = Wild(3, 256, 60);
        let (a, b) = region.addresses(&ok).unwrap();
        assert_eq!(b - a, 60);
        for bad in [Wild(4, 0, 1), Wild(0, 2000, 60), Wild(1, usize::MAX - 5, 10), Wild(1, 10, usize::MAX), Wild(u32::MAX, 0, 0)] {
            assert!(region.addresses(&bad).is_none());
            assert!(region.buff(&bad, BurstCtx::default()).is_none());
            assert!(matches!(bad_desc(&bad, &region), RunErrorKind::BadBuffer { .. }));
        }
    }
}
