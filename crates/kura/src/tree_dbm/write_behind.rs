//! Slot writes held back within a commit, so that the file pages they land on are read from
//! the disk together instead of one fault at a time.
//!
//! A commit writes its pages into slots freed by earlier commits. In a file larger than
//! memory those slots' file pages are often on the disk only, and a slot rarely covers whole
//! 4 KiB pages, so copying it into the mapping faults each page in first: one synchronous read
//! after another, a read before every write. Measured on 2M records (a 660 MB file) under a
//! 128 MiB memory limit, 100 durable batches of 1,000 random records: 88,000 major faults in
//! the checkpoints' copies and frees, against 2,000 in the rest of the phase; this disk reads
//! 2,000 random 4 KiB pages in 0.25 s one after another and in 0.04 s when all are asked for
//! first. So the pager, for a file larger than half the memory, asks for the pages each slot
//! covers in part (its first and last) as it allocates it (`MADV_WILLNEED`, which starts the
//! read and returns), keeps the slot's bytes here, and writes them with `pwrite` when the
//! commit publishes or `FLUSH_BYTES` are waiting, by which time those pages have arrived.
//!
//! Why `pwrite` and not a copy into the mapping: a store into the mapping faults its page in
//! from the disk even when the copy covers the page whole, where `pwrite` reads only the
//! pages it covers in part; and a page written through the mapping is mapped, so reclaim
//! must unmap it again. The same 100 batches took 5.9-7.2 s with `pwrite` and the freed slots'
//! lengths kept (pager.rs, `forgotten_slot_lens`) against 7.8-9.0 s copying into the mapping
//! (with every page of each slot asked for), CPU time 4.0-4.8 s against 6.1-6.7 s, and
//! 6.9-7.7 s with `pwrite` alone; 2M records loaded in commits of 100,000 under the same limit
//! took 31-33 s against 44-50 s (alternating runs, nothing else running).
//!
//! Nothing reads a held slot before the flush: its offset reaches the tree only through the
//! commit's header, which is written after the flush (`Pager::write_header`), and the writer
//! itself reads the commit's new pages from its cache, never from their slots.

/// Bytes held before they are copied in anyway: the memory this costs, and enough slots
/// (about 700 pages of 6 KB) for their reads to run together.
pub const FLUSH_BYTES: usize = 4 << 20;

/// One held slot: where it goes, and how many of `WriteBehind::bytes` are its.
#[derive(Debug, Clone, Copy)]
pub struct HeldSlot {
    pub offset: u64,
    pub slot_len: u64,
    len: usize,
}

#[derive(Debug, Default)]
pub struct WriteBehind {
    /// Every held slot's bytes (header and body), one after another in the order of `slots`.
    /// Invariant: its length is the sum of the slots' `len`.
    bytes: Vec<u8>,
    slots: Vec<HeldSlot>,
}

impl WriteBehind {
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Holds a slot of `slot_len` bytes at `offset` whose first bytes are `parts`, one after
    /// another, the rest zeros (so that slots held one after another in the file are one
    /// write, `drain`); returns whether `FLUSH_BYTES` are now waiting.
    pub fn hold(&mut self, offset: u64, slot_len: u64, parts: &[&[u8]]) -> bool {
        let start = self.bytes.len();
        for part in parts {
            self.bytes.extend_from_slice(part);
        }
        let content = self.bytes.len() - start;
        let len = usize::try_from(slot_len).unwrap_or(usize::MAX).max(content);
        self.bytes.resize(start + len, 0);
        self.slots.push(HeldSlot { offset, slot_len, len });
        self.bytes.len() >= FLUSH_BYTES
    }

    /// Where the last held slot ends in the file: a slot held there next continues its run,
    /// and the file page they share is written whole by the run's one write.
    pub fn run_end(&self) -> Option<u64> {
        self.slots.last().map(|slot| slot.offset + slot.len as u64)
    }

    /// The held slot at `offset`, if one is.
    pub fn find(&self, offset: u64) -> Option<HeldSlot> {
        self.slots.iter().find(|slot| slot.offset == offset).copied()
    }

    /// Hands each held slot's offset and bytes to `write`, in the order they were held, and
    /// empties the queue; when a write fails, every slot stays held (the commit fails, and its
    /// rollback frees them through `take`).
    pub fn drain(&mut self, mut write: impl FnMut(u64, &[u8]) -> crate::Result<()>) -> crate::Result<()> {
        let mut rest = self.bytes.as_slice();
        let mut slots = self.slots.iter().peekable();
        let mut result = Ok(());
        while let Some(first) = slots.next() {
            // A run of slots each held where the one before ends: their bytes follow each
            // other in `bytes` as in the file, so one write covers the pages they share.
            let mut len = first.len;
            let mut end = first.offset + first.len as u64;
            while let Some(next) = slots.next_if(|slot| slot.offset == end) {
                len += next.len;
                end += next.len as u64;
            }
            // Cannot fail while the invariant on `bytes` holds; panics loudly if it did not.
            let (bytes, tail) = rest.split_at(len);
            rest = tail;
            result = write(first.offset, bytes);
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() {
            self.clear();
        }
        result
    }

    /// Forgets every held slot (a commit rolled back): returns them.
    pub fn take(&mut self) -> Vec<HeldSlot> {
        self.bytes.clear();
        std::mem::take(&mut self.slots)
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.slots.clear();
        if self.bytes.capacity() > 2 * FLUSH_BYTES {
            self.bytes.shrink_to(FLUSH_BYTES);
        }
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    #[test]
    fn drains_in_order_and_empties() {
        let mut held = WriteBehind::default();
        assert!(!held.hold(64, 128, &[b"ab", b"cd"]));
        assert!(!held.hold(256, 64, &[b"ef"]));
        assert_eq!(held.find(256).map(|s| s.slot_len), Some(64));
        assert!(held.find(65).is_none());
        let mut seen = Vec::new();
        held.drain(|offset, bytes| {
            seen.push((offset, bytes.to_vec()));
            Ok(())
        })
        .unwrap();
        let padded = |bytes: &[u8], len: usize| {
            let mut padded = bytes.to_vec();
            padded.resize(len, 0);
            padded
        };
        assert_eq!(seen, vec![(64, padded(b"abcd", 128)), (256, padded(b"ef", 64))]);
        assert!(held.is_empty());
    }

    /// Slots held where the one before ends are one write of their bytes, padded to each
    /// slot's length; a gap starts another write.
    #[test]
    fn slots_held_end_to_end_are_one_write() {
        let mut held = WriteBehind::default();
        held.hold(64, 32, &[b"ab"]);
        assert_eq!(held.run_end(), Some(96));
        held.hold(96, 48, &[b"cd", b"e"]);
        held.hold(160, 16, &[b"f"]);
        held.hold(176, 16, &[b"g"]);
        let mut seen = Vec::new();
        held.drain(|offset, bytes| {
            seen.push((offset, bytes.to_vec()));
            Ok(())
        })
        .unwrap();
        let mut first = b"ab".to_vec();
        first.resize(32, 0);
        first.extend_from_slice(b"cde");
        first.resize(80, 0);
        let mut second = b"f".to_vec();
        second.resize(16, 0);
        second.push(b'g');
        second.resize(32, 0);
        assert_eq!(seen, vec![(64, first), (160, second)]);
        assert_eq!(held.run_end(), None);
    }

    #[test]
    fn a_failed_write_keeps_every_slot_held() {
        let mut held = WriteBehind::default();
        held.hold(64, 64, &[b"x"]);
        held.hold(128, 64, &[b"y"]);
        let mut calls = 0;
        assert!(held
            .drain(|_, _| {
                calls += 1;
                Err(crate::Error::invalid("disk gone"))
            })
            .is_err());
        assert_eq!(calls, 1);
        let lens: Vec<(u64, u64)> = held.take().iter().map(|slot| (slot.offset, slot.slot_len)).collect();
        assert_eq!(lens, vec![(64, 64), (128, 64)]);
        assert!(held.is_empty());
    }

    #[test]
    fn reports_when_the_flush_is_due() {
        let mut held = WriteBehind::default();
        let big = vec![0u8; FLUSH_BYTES / 2];
        assert!(!held.hold(64, big.len() as u64, &[&big]));
        assert!(held.hold(64 + big.len() as u64, big.len() as u64, &[&big]));
    }
}
