//! Free space of a tree file: which slots may be reused, best fit, with coalescing.
//!
//! Copy-on-write frees a page's old slot at every commit that rewrites it, so reuse is what
//! keeps a long run of updates from growing the file. Free slots are indexed by offset (to
//! merge a freed slot with free neighbours, and to give back a free tail by lowering `end`)
//! and by size (to take the smallest slot that fits, splitting off the rest). Invariant:
//! free slots never overlap or touch (touching ones are merged), and all lie below `end`.
//!
//! This structure knows nothing about commits: the pager hands it slots freed by a commit only
//! after that commit's header is written, so a slot of the last committed tree is never
//! handed out.

use std::collections::{BTreeMap, BTreeSet};

use crate::encoding::{put_varint, ByteReader, MAX_VARINT_LEN};
use crate::error::{Error, Result};

use super::format::{DATA_START, SLOT_ALIGN};

/// A remainder smaller than this stays with the slot it was cut from: too small for a page.
const MIN_SPLIT: u64 = 64;

#[derive(Debug, Clone)]
pub struct Space {
    by_offset: BTreeMap<u64, u64>,
    by_size: BTreeSet<(u64, u64)>,
    end: u64,
    free_bytes: u64,
}

/// Rounds a slot length up to the slot alignment.
pub fn aligned(len: u64) -> u64 {
    len.div_ceil(SLOT_ALIGN) * SLOT_ALIGN
}

impl Space {
    pub fn new(end: u64) -> Space {
        Space { by_offset: BTreeMap::new(), by_size: BTreeSet::new(), end, free_bytes: 0 }
    }

    /// The end of the used area: the next slot appended goes here.
    pub fn end(&self) -> u64 {
        self.end
    }

    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// Whether `offset` lies in a free slot.
    pub fn is_free(&self, offset: u64) -> bool {
        self.by_offset.range(..=offset).next_back().is_some_and(|(&start, &len)| offset < start.saturating_add(len))
    }

    pub fn free_slots(&self) -> usize {
        self.by_offset.len()
    }

    /// The free slots, `(offset, length)`, in file order.
    #[cfg(test)]
    pub fn slots(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_offset.iter().map(|(&offset, &len)| (offset, len))
    }

    /// Whether any free slot overlaps `[offset, offset + len)`.
    pub fn overlaps(&self, offset: u64, len: u64) -> bool {
        let end = offset.saturating_add(len);
        self.by_offset.range(..end).next_back().is_some_and(|(&start, &free)| start.saturating_add(free) > offset)
    }

    /// Takes a slot of `len` bytes (a multiple of the alignment): `(offset, slot length)`.
    /// The slot may be longer than asked when the rest was too small to split off.
    pub fn allocate(&mut self, len: u64) -> (u64, u64) {
        let len = aligned(len.max(MIN_SPLIT));
        if let Some(&(size, offset)) = self.by_size.range((len, 0)..).next() {
            return self.cut(offset, size, len);
        }
        let offset = self.end;
        self.end += len;
        (offset, len)
    }

    /// Takes a slot of `len` bytes from the first free slot at or after `from` that fits:
    /// next fit, for a run of writes that should lie one after another in the file
    /// (`Placement::Sequential` in pager.rs). None when no free slot there fits. Each free
    /// slot it passes over is one it will not look at again while the calls go on from where
    /// the last slot ended.
    pub fn allocate_from(&mut self, from: u64, len: u64) -> Option<(u64, u64)> {
        let len = aligned(len.max(MIN_SPLIT));
        let (offset, size) =
            self.by_offset.range(from..).find(|&(_, &size)| size >= len).map(|(&offset, &size)| (offset, size))?;
        Some(self.cut(offset, size, len))
    }

    /// Takes `len` aligned bytes from the start of the free slot at `offset` of `size` bytes:
    /// `(offset, slot length)`, the rest left free unless too small to split off.
    fn cut(&mut self, offset: u64, size: u64, len: u64) -> (u64, u64) {
        self.take(offset, size);
        if size - len >= MIN_SPLIT {
            self.insert(offset + len, size - len);
            return (offset, len);
        }
        (offset, size)
    }

    /// Takes a slot of `len` bytes at the end of the used area, never from the free space.
    pub fn append(&mut self, len: u64) -> (u64, u64) {
        let len = aligned(len);
        let offset = self.end;
        self.end += len;
        (offset, len)
    }

    /// Returns a slot to the free space, merging it with free neighbours.
    pub fn release(&mut self, mut offset: u64, mut len: u64) {
        if let Some((&before, &before_len)) = self.by_offset.range(..offset).next_back() {
            if before + before_len == offset {
                self.take(before, before_len);
                offset = before;
                len += before_len;
            }
        }
        if let Some(&after_len) = self.by_offset.get(&(offset + len)) {
            self.take(offset + len, after_len);
            len += after_len;
        }
        if offset + len >= self.end {
            self.end = offset;
        } else {
            self.insert(offset, len);
        }
    }

    fn insert(&mut self, offset: u64, len: u64) {
        self.by_offset.insert(offset, len);
        self.by_size.insert((len, offset));
        self.free_bytes += len;
    }

    fn take(&mut self, offset: u64, len: u64) {
        self.by_offset.remove(&offset);
        self.by_size.remove(&(len, offset));
        self.free_bytes -= len;
    }

    /// Free space recovered from the slots in use (after a crash lost the saved list):
    /// every gap between used slots is free, and the area ends after the last used slot.
    pub fn from_used(mut used: Vec<(u64, u64)>) -> Result<Space> {
        used.sort_unstable();
        let mut space = Space::new(DATA_START);
        for (offset, len) in used {
            if offset < space.end {
                return Err(Error::broken(format!("tree pages overlap at offset {offset}")));
            }
            if offset > space.end {
                space.insert(space.end, offset - space.end);
            }
            space.end = offset + len;
        }
        Ok(space)
    }

    /// The free list as saved at close: `varint count`, then per slot the varint gap from the
    /// previous slot's end and the varint length.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.by_offset.len() * 6 + MAX_VARINT_LEN);
        put_varint(&mut out, self.by_offset.len() as u64);
        let mut previous_end = DATA_START;
        for (&offset, &len) in &self.by_offset {
            put_varint(&mut out, offset - previous_end);
            put_varint(&mut out, len);
            previous_end = offset + len;
        }
        out
    }

    /// Reads a saved free list, checking that its slots lie in `DATA_START..end`, aligned and
    /// apart, so that a bad list can never hand out a slot in use beyond what it claims.
    pub fn decode(bytes: &[u8], end: u64) -> Result<Space> {
        let bad = || Error::broken("tree free list is malformed");
        let mut reader = ByteReader::new(bytes, "tree free list");
        // Each entry takes at least two bytes (a gap and a length).
        let count = reader.count(2)?;
        let mut space = Space::new(end);
        let mut previous_end = DATA_START;
        for index in 0..count {
            let gap = reader.varint()?;
            let len = reader.varint()?;
            let offset = previous_end.checked_add(gap).ok_or_else(bad)?;
            let slot_end = offset.checked_add(len).ok_or_else(bad)?;
            if (index > 0 && gap == 0)
                || len == 0
                || !offset.is_multiple_of(SLOT_ALIGN)
                || !len.is_multiple_of(SLOT_ALIGN)
                || slot_end > end
            {
                return Err(bad());
            }
            space.insert(offset, len);
            previous_end = slot_end;
        }
        Ok(space)
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    #[test]
    fn reuses_splits_and_merges() {
        let mut space = Space::new(DATA_START);
        let a = space.allocate(100);
        let b = space.allocate(1000);
        let c = space.allocate(100);
        assert_eq!(a, (DATA_START, 112));
        assert_eq!(b.0, DATA_START + 112);
        space.release(b.0, b.1);
        let d = space.allocate(200);
        assert_eq!(d.0, b.0); // best fit, split
        assert_eq!(space.free_bytes(), b.1 - 208);
        space.release(d.0, d.1);
        assert_eq!(space.free_slots(), 1); // merged back
        space.release(c.0, c.1);
        assert_eq!(space.end(), a.0 + a.1); // free tail given back
        assert_eq!(space.free_slots(), 0);
        let encoded = space.encode();
        let decoded = Space::decode(&encoded, space.end()).unwrap();
        assert_eq!(decoded.free_bytes(), space.free_bytes());
    }

    /// Random allocations (best fit, next fit, at the end) and releases: the slots handed out
    /// never overlap one another or the free space, the free slots never touch, and a next
    /// fit takes the first free slot at or after its start that is long enough, as a scan of
    /// the free slots before the call finds it.
    #[test]
    fn next_fit_takes_the_first_slot_that_fits_and_keeps_the_invariants() {
        let mut seed = 0x2545_F491_4F6C_DD1D_u64;
        let mut random = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        for _ in 0..50 {
            let mut space = Space::new(DATA_START);
            let mut used: Vec<(u64, u64)> = Vec::new();
            let mut cursor = DATA_START;
            for _ in 0..400 {
                let len = 1 + random(600);
                match random(4) {
                    0 if !used.is_empty() => {
                        let (offset, slot_len) = used.swap_remove(random(used.len() as u64) as usize);
                        space.release(offset, slot_len);
                    }
                    1 => {
                        let wanted = aligned(len.max(MIN_SPLIT));
                        let expected = space.slots().find(|&(offset, size)| offset >= cursor && size >= wanted);
                        let end = space.end();
                        let (offset, slot_len) =
                            space.allocate_from(cursor, len).unwrap_or_else(|| space.append(wanted));
                        assert_eq!(offset, expected.map_or(end, |(offset, _)| offset));
                        assert!(slot_len >= wanted && slot_len < wanted + MIN_SPLIT);
                        cursor = offset + slot_len;
                        used.push((offset, slot_len));
                    }
                    2 => used.push(space.append(len)),
                    _ => used.push(space.allocate(len)),
                }
                if random(50) == 0 {
                    cursor = DATA_START;
                }
                let mut all: Vec<(u64, u64, bool)> = used.iter().map(|&(o, l)| (o, l, true)).collect();
                all.extend(space.slots().map(|(o, l)| (o, l, false)));
                all.sort_unstable();
                for (&(a, a_len, a_used), &(b, _, b_used)) in all.iter().zip(all.iter().skip(1)) {
                    assert!(a + a_len <= b, "slots overlap at {b}");
                    assert!(a_used || b_used || a + a_len < b, "free slots touch at {b}");
                }
                assert!(all.last().is_none_or(|&(o, l, _)| o + l <= space.end()));
                assert_eq!(space.free_bytes(), space.slots().map(|(_, l)| l).sum::<u64>());
            }
        }
    }

    #[test]
    fn recovers_gaps() {
        let space = Space::from_used(vec![(DATA_START + 64, 64), (DATA_START + 256, 128)]).unwrap();
        assert_eq!(space.end(), DATA_START + 384);
        assert_eq!(space.free_bytes(), 64 + 128);
        assert!(Space::from_used(vec![(DATA_START, 128), (DATA_START + 64, 64)]).is_err());
        let mut encoded = space.encode();
        assert!(Space::decode(&encoded, DATA_START + 200).is_err());
        encoded.truncate(2);
        assert!(Space::decode(&encoded, space.end()).is_err());
    }
}
