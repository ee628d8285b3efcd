//! Which commit is the durable one, and what the commits since it wrote.
//!
//! A commit made with `synchronize(true)` is durable: its pages, then its header, were
//! fsynced. So is the state a writer opens (the open fsyncs it before changing anything).
//! Commits after it (automatic ones, `synchronize(false)`, write batches) are written without
//! fsync: after a power loss, any subset of their pages and header may be on the disk. Two
//! rules keep the durable commit whole until the next one:
//!
//! - its header copy is never overwritten: every later commit writes the other copy (the
//!   pager picks sequence numbers of the other parity, see `Pager::publish`);
//! - its slots, freed by later commits, are held back instead of reused. A slot written since
//!   the durable commit and freed again belongs to no durable tree and is reused at once.
//!
//! Each header written since carries the digest and the number of the pages its tree holds
//! that were written since the durable commit, so that an open after a crash can tell whether
//! every one of them reached the disk (`verify.rs`), and otherwise fall back to the durable
//! header in the other copy. The held-back slots cost room: at most the size of the durable
//! tree, until the next durable commit (a close makes one).

use super::cache::IdMap;
use super::format::SinceBase;

/// What a page adds to a header's digest: its offset and slot checksum, mixed. A page that
/// did not reach the disk leaves either other bytes (another checksum) or an older page at
/// the same offset (whose checksum differs unless its bytes are the same), so the sum over
/// the tree read back differs from the header's.
pub fn digest_term(offset: u64, checksum: u64) -> u64 {
    (checksum ^ offset.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (checksum >> 29)
}

#[derive(Debug, Default)]
pub struct Durability {
    /// The sequence number of the durable header.
    sequence: u64,
    /// Pages written since the durable commit and not freed since: offset → digest term.
    written: IdMap<u64>,
    /// Sum of the terms in `written`.
    digest: u64,
    /// Pages written since the last publish (a rollback frees them).
    unpublished: Vec<u64>,
    /// Slots of the durable tree freed since it was committed: `(offset, slot length)`.
    held: Vec<(u64, u64)>,
    /// Sum of the slot lengths in `held`.
    held_bytes: u64,
}

impl Durability {
    /// The header with `sequence` is durable, and nothing was written since.
    pub fn new(sequence: u64) -> Durability {
        Durability { sequence, ..Durability::default() }
    }

    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// Whether anything was written or freed since the durable commit.
    pub fn is_clean(&self) -> bool {
        self.written.is_empty() && self.held.is_empty()
    }

    /// Whether slots of the durable tree were freed since it was committed.
    pub fn holds_slots(&self) -> bool {
        !self.held.is_empty()
    }

    /// The room the held-back slots take (file space no commit can reuse until the next
    /// durable one).
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// A page was written into the slot at `offset`.
    pub fn wrote(&mut self, offset: u64, checksum: u64) {
        let term = digest_term(offset, checksum);
        let old = self.written.insert(offset, term);
        debug_assert!(old.is_none(), "slot {offset} written twice without being freed");
        self.digest = self.digest.wrapping_add(term);
        self.unpublished.push(offset);
    }

    /// The slot at `offset` is freed: true when it may be reused at once (written since the
    /// durable commit), false when it is held back until the next one.
    pub fn freed(&mut self, offset: u64, slot_len: u64) -> bool {
        match self.written.remove(&offset) {
            Some(term) => {
                self.digest = self.digest.wrapping_sub(term);
                true
            }
            None => {
                self.held.push((offset, slot_len));
                self.held_bytes += slot_len;
                false
            }
        }
    }

    /// What a header published now says, given that the pages at `replaced` are freed right
    /// after it (they are no longer in its tree).
    pub fn since_base(&self, replaced: &[u64]) -> SinceBase {
        let mut digest = self.digest;
        let mut new_pages = self.written.len() as u64;
        for term in replaced.iter().filter_map(|offset| self.written.get(offset)) {
            digest = digest.wrapping_sub(*term);
            new_pages -= 1;
        }
        SinceBase { base: self.sequence, digest, new_pages }
    }

    /// A header was published: its pages are no longer rolled back.
    pub fn published(&mut self) {
        self.unpublished.clear();
    }

    /// Forgets the pages written since the last publish (a failed commit); returns them, to
    /// be freed.
    pub fn abandon(&mut self) -> Vec<u64> {
        let abandoned = std::mem::take(&mut self.unpublished);
        for offset in &abandoned {
            if let Some(term) = self.written.remove(offset) {
                self.digest = self.digest.wrapping_sub(term);
            }
        }
        abandoned
    }

    /// The header with `sequence` is now durable: returns the held slots, free from now on.
    pub fn made_durable(&mut self, sequence: u64) -> Vec<(u64, u64)> {
        let held = std::mem::take(&mut self.held);
        *self = Durability::new(sequence);
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_new_pages_and_holds_back_durable_ones() {
        let mut durability = Durability::new(4);
        durability.wrote(1024, 77);
        durability.wrote(2048, 78);
        // Freeing a page of the durable tree holds it back, and its room counts.
        assert!(!durability.freed(512, 64));
        assert_eq!(durability.held_bytes(), 64);
        // The header of the commit that replaces 1024 counts only 2048.
        let since = durability.since_base(&[1024]);
        assert_eq!(since, SinceBase { base: 4, digest: digest_term(2048, 78), new_pages: 1 });
        durability.published();
        // A page written since is reused at once: nothing more held.
        assert!(durability.freed(1024, 64));
        assert_eq!(durability.held_bytes(), 64);
        durability.wrote(4096, 79);
        assert_eq!(durability.abandon(), vec![4096]);
        assert_eq!(durability.since_base(&[]).digest, digest_term(2048, 78));
        assert_eq!(durability.made_durable(9), vec![(512, 64)]);
        assert!(durability.is_clean());
        assert_eq!(durability.held_bytes(), 0);
        assert_eq!(durability.sequence(), 9);
    }
}
