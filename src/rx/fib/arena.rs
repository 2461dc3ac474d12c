//! Entry encoding and the pool of 256-entry tables shared by the IPv4 tbl8 groups and the
//! IPv6 trie levels.
//!
//! Every data-plane slot is a `u32` entry plus a control-plane `u8` depth kept in a parallel
//! array, so lookups never touch the depths. The depth is the length of the route whose result
//! was leaf-pushed into the slot; it is what lets an update rewrite exactly the slots that a
//! route owns without recomputing them from the whole route set. For a slot that points to a
//! child table, the depth is that of the route pushed into the child's "background" entries
//! (the longest route covering the whole slot), so the child can be folded back into the slot.

/// The entry holds a route result.
pub(super) const VALID: u32 = 1 << 31;
/// The entry points to a child table; the payload is its index.
pub(super) const EXT: u32 = 1 << 30;
/// Next-hop index or child table index.
pub(super) const PAYLOAD: u32 = EXT - 1;
/// Entries per child table (an 8-bit stride).
pub(super) const NODE: usize = 256;

/// Result of a terminal (non-`EXT`) entry.
#[inline(always)]
pub(super) fn decode(e: u32) -> Option<u32> {
    if e & VALID != 0 {
        Some(e & PAYLOAD)
    } else {
        None
    }
}

/// Start of child table `n` in the flat entry arrays.
#[inline(always)]
pub(super) fn base(n: u32) -> usize {
    (n as usize) * NODE
}

/// Growable pool of 256-entry child tables, addressed by index so the tables stay contiguous
/// and can be recycled without pointer juggling.
#[derive(Clone)]
pub(super) struct Arena {
    entries: Vec<u32>,
    depths: Vec<u8>,
    free: Vec<u32>,
    max_nodes: usize,
}

impl Arena {
    pub(super) fn new(max_nodes: usize) -> Self {
        Self {
            entries: Vec::new(),
            depths: Vec::new(),
            free: Vec::new(),
            // A node index must fit the entry payload, and its entry offset a usize.
            max_nodes: max_nodes.min(PAYLOAD as usize + 1).min(usize::MAX / NODE),
        }
    }

    /// Nodes currently holding part of a table.
    pub(super) fn in_use(&self) -> usize {
        (self.entries.len() / NODE).saturating_sub(self.free.len())
    }

    /// Nodes that can still be handed out (recycled or fresh).
    pub(super) fn available(&self) -> usize {
        self.free.len() + self.max_nodes.saturating_sub(self.entries.len() / NODE)
    }

    /// A node whose every slot holds `(e, d)`: the parent slot's content pushed down.
    fn alloc(&mut self, e: u32, d: u8) -> Option<u32> {
        let n = match self.free.pop() {
            Some(n) => n,
            None => {
                let count = self.entries.len() / NODE;
                if count >= self.max_nodes {
                    return None;
                }
                self.entries.resize(self.entries.len() + NODE, 0);
                self.depths.resize(self.depths.len() + NODE, 0);
                u32::try_from(count).ok()?
            }
        };
        let r = base(n)..base(n) + NODE;
        self.entries.get_mut(r.clone())?.fill(e);
        self.depths.get_mut(r)?.fill(d);
        Some(n)
    }

    /// Data-plane read; `None` only if the structure were inconsistent.
    #[inline(always)]
    pub(super) fn entry(&self, i: usize) -> Option<u32> {
        self.entries.get(i).copied()
    }

    fn get(&self, i: usize) -> (u32, u8) {
        (self.entries.get(i).copied().unwrap_or(0), self.depths.get(i).copied().unwrap_or(0))
    }

    fn set(&mut self, i: usize, (e, d): (u32, u8)) {
        if let (Some(se), Some(sd)) = (self.entries.get_mut(i), self.depths.get_mut(i)) {
            *se = e;
            *sd = d;
        }
    }

    /// Child of a slot holding `(e, d)`, created if the slot is terminal. Returns the entry the
    /// slot must now hold and the child index; the slot keeps depth `d` as background depth.
    pub(super) fn child_of(&mut self, e: u32, d: u8) -> Option<(u32, u32)> {
        if e & EXT != 0 {
            return Some((e, e & PAYLOAD));
        }
        let n = self.alloc(e, d)?;
        Some((EXT | n, n))
    }

    /// Child of slot `idx` of node `node`, created on demand.
    pub(super) fn child_at(&mut self, node: u32, idx: usize) -> Option<u32> {
        let i = base(node) + idx;
        let (e, d) = self.get(i);
        let (e, n) = self.child_of(e, d)?;
        self.set(i, (e, d));
        Some(n)
    }

    /// Overwrites slot `idx` of node `node`.
    pub(super) fn set_slot(&mut self, node: u32, idx: usize, slot: (u32, u8)) {
        self.set(base(node) + idx, slot);
    }

    /// Existing child of slot `idx` of node `node`.
    pub(super) fn existing_child(&self, node: u32, idx: usize) -> Option<u32> {
        let e = self.get(base(node) + idx).0;
        (e & EXT != 0).then_some(e & PAYLOAD)
    }

    /// New content of a slot `(e, d)` that lies inside a route of length `len` being set to
    /// `val`. Slots owned by a longer route stay; child tables get the result in their
    /// background entries.
    #[inline(always)]
    pub(super) fn paint(&mut self, e: u32, d: u8, val: u32, len: u8) -> (u32, u8) {
        if d > len {
            (e, d)
        } else if e & EXT == 0 {
            (val, len)
        } else {
            self.paint_node(e & PAYLOAD, 0, NODE, val, len);
            (e, len)
        }
    }

    /// `paint` over `count` slots of `node` from `lo`.
    pub(super) fn paint_node(&mut self, node: u32, lo: usize, count: usize, val: u32, len: u8) {
        let start = base(node) + lo;
        for i in start..start + count {
            let (e, d) = self.get(i);
            let new = self.paint(e, d, val, len);
            self.set(i, new);
        }
    }

    /// New content of a slot `(e, d)` inside a removed route of length `len`: what that route
    /// owned goes to the covering route `(rv, rd)`.
    #[inline(always)]
    pub(super) fn unpaint(&mut self, e: u32, d: u8, len: u8, rv: u32, rd: u8) -> (u32, u8) {
        if d != len {
            (e, d)
        } else if e & EXT == 0 {
            (rv, rd)
        } else {
            self.unpaint_node(e & PAYLOAD, 0, NODE, len, rv, rd);
            (e, rd)
        }
    }

    /// `unpaint` over `count` slots of `node` from `lo`.
    pub(super) fn unpaint_node(&mut self, node: u32, lo: usize, count: usize, len: u8, rv: u32, rd: u8) {
        let start = base(node) + lo;
        for i in start..start + count {
            let (e, d) = self.get(i);
            let new = self.unpaint(e, d, len, rv, rd);
            self.set(i, new);
        }
    }

    /// If `node` (whose parent slot ends at bit `start`) holds no route longer than `start`,
    /// frees it and returns the single `(entry, depth)` its parent slot should hold instead.
    pub(super) fn fold(&mut self, node: u32, start: u8) -> Option<(u32, u8)> {
        let r = base(node)..base(node) + NODE;
        let entries = self.entries.get(r.clone())?;
        let depths = self.depths.get(r)?;
        // Background entries all carry the same pushed result, so "no entry deeper than the
        // parent slot and no grandchild" means the node is redundant.
        if entries.iter().any(|&e| e & EXT != 0) || depths.iter().any(|&d| d > start) {
            return None;
        }
        let first = (*entries.first()?, *depths.first()?);
        self.free.push(node);
        Some(first)
    }
}
